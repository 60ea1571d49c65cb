import ArgumentParser
import E3DBCommandLine
import E3DBKit
import E3DBStore
import Foundation
import Synchronization

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
            created with --identity, this adds a passphrase or key. It does not change the master key: the old \
            passphrase with an old copy of the store still opens that copy's master key, and with it every record \
            written later; use 'store rekey' to cut those off.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @OptionGroup var newKey: NewStoreKeyOptions

    @Option(help: "Argon2id cost for the new passphrase.")
    var kdf: KDFOption = .moderate

    func run() throws {
        let store = try keys.open()
        let credential = try newKey.credential()
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

struct StoreRekeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Replace the store's master key: re-encrypt every record, setting and file key under a new one.",
        discussion: """
            Unlike passwd, an old passphrase or key with an old copy of the store opens nothing written afterwards. \
            The store is copied under the new master key into a new database file beside itself (store-<hex>.sqlite, \
            encrypted under the new key when the store's file is; free disk space for one copy), in batches; then \
            one transaction of the key header (keys.sqlite) names the copy and puts in the new key material, and the \
            old file is removed. If interrupted, run it again: it resumes the copy, or starts it again when the store \
            changed meanwhile; the store stays the old one until that transaction. Writers wait while it copies; no \
            other process may have the store open when it commits. With \
            --new-passphrase-file or --new-key-file the new master key is sealed under that credential. Prints \
            {"records":N,"resumed":…,"store_id":…}; progress on stderr (not with --quiet).
            """)

    @OptionGroup var keys: StoreKeyOptions

    @OptionGroup var newKey: NewStoreKeyOptions

    @Option(help: "Argon2id cost for the passphrase (default: the store's current cost).")
    var kdf: KDFOption?

    @Option(help: "Records per transaction in the copy.")
    var batchSize = 500

    @Flag(name: [.short, .long], help: "No progress on stderr.")
    var quiet = false

    func validate() throws {
        guard batchSize > 0 else { throw ValidationError("--batch-size must be positive") }
    }

    func run() throws {
        let credential = try keys.credential()
        let newCredential = newKey.isGiven ? try newKey.credential() : nil
        let quiet = self.quiet
        let resumed = Mutex(false)
        let store = try libraryCall("rekeying \(keys.store)") {
            try EncryptedStore.rekey(
                at: keys.url, credential: credential, newCredential: newCredential,
                kdfParameters: kdf?.preset.parameters, batchSize: batchSize
            ) { progress in
                resumed.withLock { $0 = progress.resumed }
                if !quiet { StandardError.line("rekey: \(progress.recordsDone)/\(progress.recordsTotal)") }
            }
        }
        let total = try libraryCall("counting the records of \(keys.store)") {
            try store.statistics().recordsPerCollection.values.reduce(0, +)
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "records": .number(Double(total)), "resumed": .bool(resumed.withLock { $0 }),
                    "store_id": .string(store.storeID.lowercasedString),
                ])))
    }
}

/// The new passphrase or key of `store passwd` and `store rekey`.
struct NewStoreKeyOptions: ParsableArguments {
    @Option(help: "A file holding the new passphrase.")
    var newPassphraseFile: String?

    @Option(help: "A file holding the new raw key (32 bytes, base64url).")
    var newKeyFile: String?

    func validate() throws {
        if newPassphraseFile != nil && newKeyFile != nil {
            throw ValidationError("pass only one of --new-passphrase-file and --new-key-file")
        }
    }

    var isGiven: Bool { newPassphraseFile != nil || newKeyFile != nil }

    /// The new credential: from the file given, or typed twice at the terminal.
    func credential() throws -> StoreCredential {
        try StoreKeyOptions.credential(
            passphraseFile: newPassphraseFile, keyFile: newKeyFile, confirm: true, what: "new passphrase")
    }
}
