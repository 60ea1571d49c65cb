import ArgumentParser
import E3DBCommandLine
import E3DBKit
import E3DBStore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `e3dbkit store …`: the embedded encrypted store.
struct StoreCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "An embedded encrypted store of E3DB records (SQLite, passphrase or key, per-collection keys).",
        discussion: """
            Every command takes --store DIR and exactly one key source: --passphrase-file FILE, --key-file FILE (32 \
            bytes, base64url), --identity FILE (an E3DB client identity JSON enrolled with 'store identity add', or \
            the one the store was created for) or, when standard input is a terminal, a prompt without echo; never \
            the key itself on the command line. A wrong passphrase, key or identity exits 77. See docs/store.md.
            """,
        subcommands: [
            StoreInitCommand.self, StorePutCommand.self, StoreGetCommand.self, StoreUpdateCommand.self,
            StoreFindCommand.self,
            StoreIndexCommand.self,
            StoreDeleteCommand.self, StorePasswdCommand.self, StoreRekeyCommand.self, StoreRotateCommand.self,
            StoreExportCommand.self,
            StoreImportCommand.self,
            StoreVerifyCommand.self, StoreStatsCommand.self, StoreIdentityCommand.self, StoreAttachCommand.self,
            StoreCatCommand.self, StoreListFilesCommand.self, StoreMoveFileCommand.self, StoreRemoveFileCommand.self,
            StoreRemoveOrphansCommand.self, StoreSettingCommand.self,
        ]
    )
}

/// `--kdf` values.
enum KDFOption: String, ExpressibleByArgument, CaseIterable {
    case interactive, moderate, sensitive
    var preset: KDFPreset { KDFPreset(rawValue: rawValue) ?? .moderate }
}

/// The store directory and where its key comes from.
struct StoreKeyOptions: ParsableArguments {
    @Option(help: "The store's directory.")
    var store: String

    @Option(help: "A file holding the passphrase ('-' for stdin; surrounding whitespace is removed).")
    var passphraseFile: String?

    @Option(help: "A file holding a raw 32-byte key as base64url ('-' for stdin).")
    var keyFile: String?

    @Option(
        help:
            "An E3DB client identity JSON file (client_id, public_key, private_key, …) enrolled in the store ('-' for stdin)."
    )
    var identity: String?

    @Option(
        help:
            "Refuse the store (exit 2, storeRolledBack) when its write counter (see 'store stats') is below N: an older copy."
    )
    var minWriteCounter: Int?

    static let onlyOne = "pass only one of --passphrase-file, --key-file and --identity"

    func validate() throws {
        // `store import` also takes --identity as the reader beside another key source; `credential()` checks the rest.
        if passphraseFile != nil && keyFile != nil { throw ValidationError(StoreKeyOptions.onlyOne) }
    }

    var url: URL { URL(fileURLWithPath: store, isDirectory: true) }

    /// The credential: from the file given, or typed at the terminal.
    func credential(confirm: Bool = false) throws -> StoreCredential {
        if let identity {
            guard passphraseFile == nil && keyFile == nil else {
                throw CLIError(StoreKeyOptions.onlyOne, exitCode: ExitStatus.usage)
            }
            return .identity(try DocumentCLI.identity(identity).boxKey)
        }
        return try StoreKeyOptions.credential(
            passphraseFile: passphraseFile, keyFile: keyFile, confirm: confirm, what: "passphrase")
    }

    static func credential(passphraseFile: String?, keyFile: String?, confirm: Bool, what: String) throws
        -> StoreCredential
    {
        if let keyFile { return .key(try DocumentCLI.keyFile(keyFile, what: "key file", key: "store key")) }
        if let passphraseFile { return .passphrase(try CLIIO.readSecret(passphraseFile, what: "passphrase file")) }
        let first = try TerminalPrompt.secret("\(what): ")
        if confirm {
            let second = try TerminalPrompt.secret("\(what) again: ")
            guard first.constantTimeEquals(second) else {
                throw CLIError("the two entries differ", exitCode: ExitStatus.usage)
            }
        }
        return .passphrase(first)
    }

    func open() throws -> EncryptedStore {
        try open(with: credential())
    }

    func open(with credential: StoreCredential) throws -> EncryptedStore {
        do {
            return try EncryptedStore.open(
                at: url, credential: credential, expectedMinimumWriteCounter: minWriteCounter)
        } catch {
            throw CLIError(error, while: "opening the store \(store)")
        }
    }

    /// `open()` for async commands: the store's async open (its KDF on a thread of its own).
    func open() async throws -> EncryptedStore {
        let credential = try credential()
        do {
            return try await EncryptedStore.open(
                at: url, credential: credential, expectedMinimumWriteCounter: minWriteCounter)
        } catch {
            throw CLIError(error, while: "opening the store \(store)")
        }
    }
}

/// `NAME=VALUE` for --where and --plain.
struct Assignment: ExpressibleByArgument {
    let name: String
    let value: String

    init?(argument: String) {
        guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else { return nil }
        name = String(argument[..<equals])
        value = String(argument[argument.index(after: equals)...])
    }
}
