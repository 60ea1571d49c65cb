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

struct StoreExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a collection for another E3DB client: DIR/records.ndjson and DIR/eak.json.",
        discussion: """
            records.ndjson holds one EncryptedDocument per line; eak.json holds the collection's access key \
            wrapped for the reader (EAKInfo). Any E3DB SDK decrypts them with the reader's private key. Prints \
            {"eak":…,"records":N,"records_file":…}.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection.")
    var collection: String

    @Option(help: "The reader's identity JSON file (only its public key is used).")
    var readerIdentity: String?

    @Option(parsing: .unconditional, help: "The reader's Curve25519 public key, base64url.")
    var readerPublicKey: String?

    @Option(help: "The output directory.")
    var out: String

    func validate() throws {
        if (readerIdentity == nil) == (readerPublicKey == nil) {
            throw ValidationError("pass exactly one of --reader-identity and --reader-public-key")
        }
    }

    func run() throws {
        let reader: Box.PublicKey
        if let readerPublicKey {
            reader = try DocumentCLI.boxPublicKey(readerPublicKey, what: "reading --reader-public-key")
        } else {
            reader = try DocumentCLI.identity(readerIdentity ?? "").publicKey
        }
        let store = try keys.open()
        let export = try libraryCall("exporting \(collection)") {
            try store.export(
                collection: collection, to: URL(fileURLWithPath: out, isDirectory: true), readerPublicKey: reader)
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "records": .number(Double(export.recordCount)), "records_file": .string(export.recordsFile.path),
                    "eak": .string(export.eakFile.path),
                ])))
    }
}

struct StoreImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a collection shared with you (DIR/eak.json and DIR/records.ndjson); prints the new ids.",
        discussion: """
            Every record is decrypted before anything is stored; all are stored in one transaction. The reader the \
            EAKInfo was written for is --reader-identity, or else --identity: beside --passphrase-file or \
            --key-file, --identity names only the reader; alone, it also opens the store.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The identity JSON file of the reader the EAKInfo was written for (default: --identity).")
    var readerIdentity: String?

    @Option(help: "The new collection's name.")
    var collection: String

    @Argument(help: "The export directory.")
    var directory: String

    func run() throws {
        guard let readerPath = readerIdentity ?? keys.identity else {
            throw CLIError(
                "pass --reader-identity or --identity (the reader the EAKInfo was written for)",
                exitCode: ExitStatus.usage)
        }
        let me = try DocumentCLI.identity(readerPath)
        let store: EncryptedStore
        if readerIdentity == nil && (keys.passphraseFile != nil || keys.keyFile != nil) {
            // --identity names only the reader here; the passphrase or key opens the store.
            var passphraseOrKey = keys
            passphraseOrKey.identity = nil
            store = try passphraseOrKey.open()
        } else if readerIdentity == nil {
            store = try keys.open(with: .identity(me.boxKey))
        } else {
            store = try keys.open()
        }
        let references = try libraryCall("importing \(directory)") {
            try store.importCollection(
                from: URL(fileURLWithPath: directory, isDirectory: true), reader: me.boxKey, as: collection)
        }
        for reference in references { try StandardOutput.line(CanonicalJSON.serialize(reference.jsonValue)) }
    }
}
