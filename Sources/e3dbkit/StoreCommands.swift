import ArgumentParser
import E3DBKit
import E3DBStore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `e3dbkit store …`: the embedded encrypted store.
struct StoreCommand: CommandGroup {
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
            StoreInitCommand.self, StorePutCommand.self, StoreGetCommand.self, StoreFindCommand.self, StoreIndexCommand.self,
            StoreDeleteCommand.self, StorePasswdCommand.self, StoreRotateCommand.self, StoreExportCommand.self, StoreImportCommand.self,
            StoreVerifyCommand.self, StoreStatsCommand.self, StoreIdentityCommand.self, StoreAttachCommand.self,
            StoreCatCommand.self, StoreListFilesCommand.self, StoreMoveFileCommand.self, StoreRemoveFileCommand.self,
            StoreRemoveOrphansCommand.self,
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

    @Option(help: "An E3DB client identity JSON file (client_id, public_key, private_key, …) enrolled in the store ('-' for stdin).")
    var identity: String?

    static let onlyOne = "pass only one of --passphrase-file, --key-file and --identity"

    func validate() throws {
        // `store import` also takes --identity as the reader beside another key source; `credential()` checks the rest.
        if passphraseFile != nil && keyFile != nil { throw ValidationError(StoreKeyOptions.onlyOne) }
    }

    var url: URL { URL(fileURLWithPath: store, isDirectory: true) }

    /// The credential: from the file given, or typed at the terminal.
    func credential(confirm: Bool = false) throws -> StoreCredential {
        if let identity {
            guard passphraseFile == nil && keyFile == nil else { throw CLIError(StoreKeyOptions.onlyOne, exitCode: ExitStatus.usage) }
            return .identity(try DocumentCLI.identity(identity).boxKey)
        }
        return try StoreKeyOptions.credential(passphraseFile: passphraseFile, keyFile: keyFile, confirm: confirm, what: "passphrase")
    }

    static func credential(passphraseFile: String?, keyFile: String?, confirm: Bool, what: String) throws -> StoreCredential {
        if let keyFile { return .key(try DocumentCLI.keyFile(keyFile, what: "key file", key: "store key")) }
        if let passphraseFile { return .passphrase(try CLIIO.readSecret(passphraseFile, what: "passphrase file")) }
        let first = try TerminalPrompt.secret("\(what): ")
        if confirm {
            let second = try TerminalPrompt.secret("\(what) again: ")
            guard first.constantTimeEquals(second) else { throw CLIError("the two entries differ", exitCode: ExitStatus.usage) }
        }
        return .passphrase(first)
    }

    func open() throws -> EncryptedStore {
        try open(with: credential())
    }

    func open(with credential: StoreCredential) throws -> EncryptedStore {
        do {
            return try EncryptedStore.open(at: url, credential: credential)
        } catch {
            throw CLIError(error, while: "opening the store \(store)")
        }
    }
}

/// A passphrase typed at the terminal without echo, read into wiped storage.
enum TerminalPrompt {
    static func secret(_ prompt: String) throws -> SecureBytes {
        // Only when standard input is a terminal: a script without --passphrase-file fails instead of waiting.
        let fd = isatty(STDIN_FILENO) == 1 ? open("/dev/tty", O_RDWR | O_CLOEXEC) : -1
        guard fd >= 0 else {
            throw CLIError("no --passphrase-file or --key-file, and no terminal to ask on", exitCode: ExitStatus.usage)
        }
        defer { close(fd) }
        var saved = termios()
        let isTerminal = tcgetattr(fd, &saved) == 0
        if isTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer {
            if isTerminal {
                _ = tcsetattr(fd, TCSAFLUSH, &saved)
                _ = write(fd, "\n", 1)
            }
        }
        _ = prompt.withCString { write(fd, $0, strlen($0)) }
        let limit = 4096
        var length = 0
        var failed = false
        let buffer = SecureBytes(count: limit) { raw in
            guard let base = raw.baseAddress else { return }
            while length < limit {
                var byte: UInt8 = 0
                let n = read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { failed = length == 0; return }
                if byte == 0x0A || byte == 0x0D { return }
                base.storeBytes(of: byte, toByteOffset: length, as: UInt8.self)
                length += 1
            }
        }
        if failed { throw CLIError("no passphrase was typed", exitCode: ExitStatus.usage) }
        return buffer.withUnsafeBytes { raw in
            SecureBytes(count: length) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[0..<length])) }
        }
    }
}

/// Turns library errors of a store command into CLI errors.
func storeCall<T>(_ doing: String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as E3DBError {
        throw CLIError(error, while: doing)
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

struct StoreInitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init", abstract: "Create a store; prints {\"kdf\":…,\"store_id\":…}.")

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "Argon2id cost for a passphrase: interactive, moderate (default) or sensitive.")
    var kdf: KDFOption = .moderate

    func run() throws {
        let store: EncryptedStore
        let kdfName: String
        if let identity = keys.identity {
            guard keys.passphraseFile == nil && keys.keyFile == nil else {
                throw CLIError(StoreKeyOptions.onlyOne, exitCode: ExitStatus.usage)
            }
            let me = try DocumentCLI.identity(identity)
            store = try storeCall("creating the store \(keys.store)") { try EncryptedStore.create(at: keys.url, identity: me) }
            kdfName = "identity"
        } else {
            let credential = try keys.credential(confirm: true)
            store = try storeCall("creating the store \(keys.store)") {
                try EncryptedStore.create(at: keys.url, credential: credential, kdf: kdf.preset)
            }
            if case .key = credential { kdfName = "raw-key" } else { kdfName = "argon2id-\(kdf.rawValue)" }
        }
        try StandardOutput.line(CanonicalJSON.serialize(.object([
            "store_id": .string(store.storeID.uuidString.lowercased()), "kdf": .string(kdfName),
        ])))
    }
}

struct StorePutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Encrypt and store a record; prints {\"id\":…,\"version\":1}.",
        discussion: """
            DATA is a file holding a JSON object of strings ('-' for stdin). With --ndjson it holds one such object \
            per line; they are stored in one transaction and one {"id":…,"version":1} line is printed per record.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection (created on first use).")
    var collection: String

    @Option(help: "The record type.")
    var type: String = "record"

    @Option(help: "A file holding a JSON object of strings for meta.plain ('-' for stdin).")
    var plain: String?

    @Flag(help: "DATA holds one JSON object of strings per line.")
    var ndjson = false

    @Argument(help: "The data file ('-' for stdin).")
    var data: String = "-"

    func run() throws {
        let store = try keys.open()
        let plainValues = try plain.map { try DocumentCLI.recordData($0, what: "plain") } ?? RecordData()
        var records: [(type: String, data: RecordData, plain: RecordData)] = []
        if ndjson {
            let bytes = try CLIIO.readAll(data, what: "NDJSON data")
            var lineNumber = 0
            for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
                lineNumber += 1
                var text = Data(line)
                if text.last == 0x0D { text.removeLast() }
                if text.isEmpty { continue }
                do {
                    let value = try CanonicalJSON.parse(text)
                    records.append((type, try RecordData(jsonValue: value), plainValues))
                } catch let error as E3DBError {
                    throw CLIError(error, while: "reading \(data) line \(lineNumber)")
                } catch {
                    throw CLIError("\(data) line \(lineNumber) is not valid JSON: \(error)", exitCode: ExitStatus.dataError)
                }
            }
        } else {
            records.append((type, try DocumentCLI.recordData(data, what: "data"), plainValues))
        }
        let references = try storeCall("storing in \(collection)") { try store.put(collection: collection, records: records) }
        for reference in references { try StandardOutput.line(CanonicalJSON.serialize(reference.jsonValue)) }
    }
}

func parseRecordID(_ text: String) throws -> UUID {
    guard let id = UUID(uuidString: text) else { throw CLIError("\(text) is not a record id (a UUID)", exitCode: ExitStatus.usage) }
    return id
}

struct StoreGetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Read, authenticate and decrypt a record; prints {\"data\":…,\"meta\":…}.")

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection.")
    var collection: String

    @Argument(help: "The record id.")
    var id: String

    func run() throws {
        let recordID = try parseRecordID(id)
        let store = try keys.open()
        let record = try storeCall("reading \(id)") { try store.get(collection: collection, id: recordID) }
        try StandardOutput.line(CanonicalJSON.serialize(record.jsonValue))
    }
}

struct StoreFindCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find",
        abstract: "Print the matching records as NDJSON ({\"data\":…,\"meta\":…} per line), in write order.",
        discussion: """
            --plain KEY=VALUE matches plaintext metadata through the store's index; --where FIELD=VALUE matches an \
            encrypted field after decryption. Records are read in pages, so memory stays bounded.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection.")
    var collection: String

    @Option(help: "Only records of this type (repeatable).")
    var type: [String] = []

    @Option(name: .customLong("plain"), help: ArgumentHelp("plain[KEY] must equal VALUE (repeatable).", valueName: "key=value"))
    var plainConditions: [Assignment] = []

    @Option(name: .customLong("where"), help: ArgumentHelp("data[FIELD] must equal VALUE (repeatable).", valueName: "field=value"))
    var whereConditions: [Assignment] = []

    @Option(help: "At most this many records.")
    var limit: Int?

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be 1 or more") }
    }

    func run() async throws {
        let store = try keys.open()
        let query = RecordQuery(
            collection: collection, types: type, plain: plainConditions.map { .equals($0.name, $0.value) },
            fields: whereConditions.map { .equals($0.name, $0.value) }, limit: limit)
        do {
            for try await record in store.records(matching: query) {
                try StandardOutput.line(CanonicalJSON.serialize(record.jsonValue))
            }
        } catch let error as E3DBError {
            throw CLIError(error, while: "reading \(collection)")
        }
    }
}

struct StoreIndexCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "Create a blind index on encrypted fields and fill it; prints {\"bits\":…,\"name\":…,\"records\":N}.",
        discussion: """
            'store find --where FIELD=VALUE' then reads only the records whose token matches. Tokens are keyed \
            BLAKE2b truncated to --bits: fewer bits reveal less to someone holding the file and give more false \
            positives, which are removed after decryption. Repeat --field for a compound index.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection.")
    var collection: String

    @Option(help: "A field to index (repeat for a compound index).")
    var field: [String]

    @Option(help: "The token length in bits (1...256).")
    var bits: Int = 32

    @Option(help: "The index's name (default: the fields joined with '+').")
    var name: String?

    func validate() throws {
        guard (1...256).contains(bits) else { throw ValidationError("--bits must be 1...256") }
        guard !field.isEmpty else { throw ValidationError("pass at least one --field") }
    }

    func run() throws {
        let store = try keys.open()
        let (index, records) = try storeCall("indexing \(collection)") {
            try store.createIndex(collection: collection, fields: field, name: name, bits: bits)
        }
        try StandardOutput.line(CanonicalJSON.serialize(.object([
            "name": .string(index.name), "bits": .number(Double(index.bits)), "records": .number(Double(records)),
        ])))
    }
}

struct StoreDeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a record.")

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection.")
    var collection: String

    @Option(help: "Delete only if the record is at this version (exit 64 with a version conflict otherwise).")
    var version: Int?

    @Argument(help: "The record id.")
    var id: String

    func run() throws {
        let recordID = try parseRecordID(id)
        let store = try keys.open()
        try storeCall("deleting \(id)") { try store.delete(collection: collection, id: recordID, expectedVersion: version) }
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
        try storeCall("changing the key of \(keys.store)") { try store.changeCredential(to: credential, kdf: kdf.preset) }
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
        let result = try storeCall("rotating \(collection)") {
            try store.rotateKey(collection: collection) { progress in
                if !quiet { StandardError.line("rotate: \(progress.recordsDone)/\(progress.recordsTotal)") }
            }
        }
        try StandardOutput.line(CanonicalJSON.serialize(.object([
            "key_version": .number(Double(result.keyVersion)), "records": .number(Double(result.recordsDone)),
        ])))
    }
}

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
        let export = try storeCall("exporting \(collection)") {
            try store.export(collection: collection, to: URL(fileURLWithPath: out, isDirectory: true), readerPublicKey: reader)
        }
        try StandardOutput.line(CanonicalJSON.serialize(.object([
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
            throw CLIError("pass --reader-identity or --identity (the reader the EAKInfo was written for)", exitCode: ExitStatus.usage)
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
        let references = try storeCall("importing \(directory)") {
            try store.importCollection(
                from: URL(fileURLWithPath: directory, isDirectory: true), reader: me.boxKey, as: collection)
        }
        for reference in references { try StandardOutput.line(CanonicalJSON.serialize(reference.jsonValue)) }
    }
}

struct StoreVerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Authenticate and decrypt every record and file; report each problem by id or path (exit 2 if any).")

    @OptionGroup var keys: StoreKeyOptions

    func run() throws {
        let store = try keys.open()
        let report = try storeCall("verifying \(keys.store)") { try store.verify() }
        for problem in report.problems {
            StandardError.line("e3dbkit: \(problem.context.item ?? "?"): \(problem.code.rawValue): \(problem.message)")
        }
        try StandardOutput.line(CanonicalJSON.serialize(.object([
            "checked": .number(Double(report.recordsChecked)), "files": .number(Double(report.filesChecked)),
            "problems": .number(Double(report.problems.count)),
        ])))
        if !report.problems.isEmpty { throw ExitStatus.authentication }
    }
}

struct StoreStatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats", abstract: "Print record counts per collection and the database size.")

    @OptionGroup var keys: StoreKeyOptions

    func run() throws {
        let store = try keys.open()
        let stats = try storeCall("reading \(keys.store)") { try store.statistics() }
        var collections = JSONObject()
        for (name, count) in stats.recordsPerCollection.sorted(by: { $0.key < $1.key }) {
            collections[name] = .number(Double(count))
        }
        try StandardOutput.line(CanonicalJSON.serialize(.object([
            "collections": .object(collections), "database_bytes": .number(Double(stats.databaseBytes)),
            "store_id": .string(store.storeID.uuidString.lowercased()),
        ])))
    }
}
