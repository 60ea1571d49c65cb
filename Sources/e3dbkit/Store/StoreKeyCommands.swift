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

struct StoreInitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init", abstract: "Create a store; prints {\"database\":…,\"kdf\":…,\"store_id\":…}.")

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "Argon2id cost for a passphrase: interactive, moderate (default) or sensitive.")
    var kdf: KDFOption = .moderate

    @Flag(
        help: ArgumentHelp(
            "Keep the database in a plain SQLite file (the layout before the encrypted file): its query tables "
                + "(collection names, types, plain metadata, index tokens, sizes) are then readable in the file."))
    var plainDatabase = false

    func run() throws {
        let encryption: DatabaseEncryption = plainDatabase ? .plain : .encrypted
        let store: EncryptedStore
        let kdfName: String
        if let identity = keys.identity {
            guard keys.passphraseFile == nil && keys.keyFile == nil else {
                throw CLIError(StoreKeyOptions.onlyOne, exitCode: ExitStatus.usage)
            }
            let me = try DocumentCLI.identity(identity)
            store = try libraryCall("creating the store \(keys.store)") {
                try EncryptedStore.create(at: keys.url, identity: me, databaseEncryption: encryption)
            }
            kdfName = "identity"
        } else {
            let credential = try keys.credential(confirm: true)
            store = try libraryCall("creating the store \(keys.store)") {
                try EncryptedStore.create(
                    at: keys.url, credential: credential, kdf: kdf.preset, databaseEncryption: encryption)
            }
            if case .key = credential { kdfName = "raw-key" } else { kdfName = "argon2id-\(kdf.rawValue)" }
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "store_id": .string(store.storeID.lowercasedString), "kdf": .string(kdfName),
                    "database": .string(store.databaseEncryption.rawValue),
                ])))
    }
}

struct StorePasswdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd",
        abstract: "Change the store's passphrase or key (one wrapped key is rewritten, whatever the store's size).",
        discussion: """
            Enrolled identities keep working (they wrap the store's master key, which does not change). On a store \
            created with --identity, this adds a passphrase or key.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "A file holding the new passphrase.")
    var newPassphraseFile: String?

    @Option(help: "A file holding the new raw key (32 bytes, base64url).")
    var newKeyFile: String?

    @Option(help: "Argon2id cost for the new passphrase.")
    var kdf: KDFOption = .moderate

    func validate() throws {
        if newPassphraseFile != nil && newKeyFile != nil {
            throw ValidationError("pass only one of --new-passphrase-file and --new-key-file")
        }
    }

    func run() throws {
        let store = try keys.open()
        let credential = try StoreKeyOptions.credential(
            passphraseFile: newPassphraseFile, keyFile: newKeyFile, confirm: true, what: "new passphrase")
        try libraryCall("changing the key of \(keys.store)") {
            try store.changeCredential(to: credential, kdf: kdf.preset)
        }
    }
}

struct StoreRotateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Rotate a collection's access key: re-encrypt every record under a new key (resumable).",
        discussion: """
            A new key becomes current at once; records move to it in batches, each one transaction. If interrupted, \
            run it again: it goes on with the same key. Prints {"key_version":…,"records":N}; progress on stderr \
            (not with --quiet).
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection.")
    var collection: String

    @Flag(name: [.short, .long], help: "No progress on stderr.")
    var quiet = false

    func run() throws {
        let store = try keys.open()
        let quiet = self.quiet
        let result = try libraryCall("rotating \(collection)") {
            try store.rotateKey(collection: collection) { progress in
                if !quiet { StandardError.line("rotate: \(progress.recordsDone)/\(progress.recordsTotal)") }
            }
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "key_version": .number(Double(result.keyVersion)), "records": .number(Double(result.recordsDone)),
                ])))
    }
}
