import ArgumentParser
import E3DBCommandLine
import E3DBKit
import E3DBStore
import Foundation

/// `e3dbkit store setting …`: the store's encrypted settings (each value sealed under a key derived from the master
/// key, with its name inside), as JSON.
struct StoreSettingCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "setting",
        abstract: "Encrypted settings: named JSON values sealed under the store's master key.",
        discussion: """
            Values are any JSON (an object, an array, a string, a number, true, false or null), read from a file or \
            standard input and printed in canonical form. Names are stored in clear; values never are.
            """,
        subcommands: [
            StoreSettingSetCommand.self, StoreSettingGetCommand.self, StoreSettingListCommand.self,
            StoreSettingRemoveCommand.self,
        ]
    )
}

struct StoreSettingSetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Store a JSON value under a name, replacing any value it had.")

    @OptionGroup var keys: StoreKeyOptions

    @Argument(help: "The setting's name.")
    var name: String

    @Argument(help: "A file holding the JSON value ('-' for stdin).")
    var value: String = "-"

    func run() throws {
        var bytes = try CLIIO.readAll(value, what: "setting value")
        defer { bytes.wipe() }
        let json: JSONValue
        do {
            json = try CanonicalJSON.parse(bytes)
        } catch {
            throw CLIError("\(value) does not hold a JSON value: \(error)", exitCode: ExitStatus.dataError)
        }
        let store = try keys.open()
        try libraryCall("writing setting \(name)") { try store.setSetting(json, forKey: name) }
    }
}

struct StoreSettingGetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Print a setting's JSON value (exit 64 when there is none).")

    @OptionGroup var keys: StoreKeyOptions

    @Argument(help: "The setting's name.")
    var name: String

    func run() throws {
        let store = try keys.open()
        let value = try libraryCall("reading setting \(name)") { try store.setting(JSONValue.self, forKey: name) }
        guard let value else { throw CLIError("the store has no setting \(name)", exitCode: ExitStatus.usage) }
        try StandardOutput.line(CanonicalJSON.serialize(value))
    }
}

struct StoreSettingListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Print the settings' names, one per line, sorted (not their values).")

    @OptionGroup var keys: StoreKeyOptions

    func run() throws {
        let store = try keys.open()
        for name in try libraryCall("listing settings", { try store.settingKeys() }) {
            try StandardOutput.line(name)
        }
    }
}

struct StoreSettingRemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove a setting (nothing happens when there is none).")

    @OptionGroup var keys: StoreKeyOptions

    @Argument(help: "The setting's name.")
    var name: String

    func run() throws {
        let store = try keys.open()
        try libraryCall("removing setting \(name)") { try store.removeSetting(forKey: name) }
    }
}
