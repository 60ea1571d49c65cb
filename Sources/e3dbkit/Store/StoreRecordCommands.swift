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

struct StorePutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Encrypt and store a record; prints {\"id\":…,\"version\":1}.",
        discussion: """
            DATA is a file holding a JSON object of strings ('-' for stdin). With --ndjson it holds one such object \
            per line; they are stored in one transaction and one {"id":…,"version":1} line is printed per record. \
            With --key the record is named by your key: the first put creates it, later ones replace it (a new \
            version); 'store get --key' and 'store delete --key' find it by the key.
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

    @Option(help: "A key naming the record in its collection (create or replace it).")
    var key: String?

    func validate() throws {
        if key != nil && ndjson { throw ValidationError("--key names one record: it does not go with --ndjson") }
        if key == "" { throw ValidationError("--key cannot be empty") }
    }

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
                    throw CLIError(
                        "\(data) line \(lineNumber) is not valid JSON: \(error)", exitCode: ExitStatus.dataError)
                }
            }
        } else if let key {
            let fields = try DocumentCLI.recordData(data, what: "data")
            let reference = try libraryCall("storing \(key) in \(collection)") {
                try store.put(collection: collection, key: key, type: type, data: fields, plain: plainValues)
            }
            return try StandardOutput.line(CanonicalJSON.serialize(reference.jsonValue))
        } else {
            records.append((type, try DocumentCLI.recordData(data, what: "data"), plainValues))
        }
        let references = try libraryCall("storing in \(collection)") {
            try store.put(collection: collection, records: records)
        }
        for reference in references { try StandardOutput.line(CanonicalJSON.serialize(reference.jsonValue)) }
    }
}

/// A record named by its id (the argument) or by the key it was put with (`--key`).
struct RecordNameOptions: ParsableArguments {
    enum Name: CustomStringConvertible {
        case id(UUID)
        case key(String)
        var description: String {
            switch self {
            case .id(let id): id.lowercasedString
            case .key(let key): "key \(key)"
            }
        }
    }

    @Option(help: "The key the record was put with (instead of its id).")
    var key: String?

    @Argument(help: "The record id.")
    var id: String?

    func name() throws -> Name {
        switch (id, key) {
        case (let id?, nil): return .id(try parseRecordID(id))
        case (nil, let key?): return .key(key)
        default: throw CLIError("give the record's id or --key, not both", exitCode: ExitStatus.usage)
        }
    }
}

func parseRecordID(_ text: String) throws -> UUID {
    guard let id = UUID(uuidString: text) else {
        throw CLIError("\(text) is not a record id (a UUID)", exitCode: ExitStatus.usage)
    }
    return id
}

struct StoreGetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Read, authenticate and decrypt a record; prints {\"data\":…,\"meta\":…}.")

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection.")
    var collection: String

    @OptionGroup var record: RecordNameOptions

    func run() throws {
        let name = try record.name()
        let store = try keys.open()
        let found = try libraryCall("reading \(name)") {
            switch name {
            case .id(let id): try store.get(collection: collection, id: id)
            case .key(let key): try store.get(collection: collection, key: key)
            }
        }
        try StandardOutput.line(CanonicalJSON.serialize(found.jsonValue))
    }
}

struct StoreUpdateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Replace a record's data (and type or plain); prints {\"id\":…,\"version\":N+1}.",
        discussion: """
            --version is the version you read (from 'store get' or 'store find'): when the record has moved on, \
            nothing changes and the command exits 64 with a version conflict. Without --type or --plain the \
            record keeps its type and plain metadata.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The collection.")
    var collection: String

    @Option(help: "The version you read: the update applies only to it.")
    var version: Int

    @Option(help: "A new record type.")
    var type: String?

    @Option(help: "A file holding a JSON object of strings for meta.plain ('-' for stdin), replacing it.")
    var plain: String?

    @Argument(help: "The record id.")
    var id: String

    @Argument(help: "The data file: a JSON object of strings ('-' for stdin).")
    var data: String = "-"

    func validate() throws {
        if plain == "-" && data == "-" { throw ValidationError("--plain and DATA cannot both be standard input") }
    }

    func run() throws {
        let recordID = try parseRecordID(id)
        let fields = try DocumentCLI.recordData(data, what: "data")
        let store = try keys.open()
        let plainValues =
            try plain.map { try DocumentCLI.recordData($0, what: "plain") }
            ?? libraryCall("reading \(id)") { try store.get(collection: collection, id: recordID).meta.plain }
        let reference = try libraryCall("updating \(id)") {
            try store.update(
                collection: collection, id: recordID, expectedVersion: version, type: type, data: fields,
                plain: plainValues)
        }
        try StandardOutput.line(CanonicalJSON.serialize(reference.jsonValue))
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

    @Option(
        name: .customLong("plain"),
        help: ArgumentHelp("plain[KEY] must equal VALUE (repeatable).", valueName: "key=value"))
    var plainConditions: [Assignment] = []

    @Option(
        name: .customLong("where"),
        help: ArgumentHelp("data[FIELD] must equal VALUE (repeatable).", valueName: "field=value"))
    var whereConditions: [Assignment] = []

    @Option(help: "At most this many records.")
    var limit: Int?

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be 1 or more") }
    }

    func run() async throws {
        let store = try await keys.open()
        let query = RecordQuery(
            collection: collection, types: type, plain: plainConditions.map { .equals($0.name, $0.value) },
            fields: whereConditions.map { .equals($0.name, $0.value) }, limit: limit)
        try await libraryCall("reading \(collection)") {
            for try await record in store.records(matching: query) {
                try StandardOutput.line(CanonicalJSON.serialize(record.jsonValue))
            }
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
        let (index, records) = try libraryCall("indexing \(collection)") {
            try store.createIndex(collection: collection, fields: field, name: name, bits: bits)
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "name": .string(index.name), "bits": .number(Double(index.bits)),
                    "records": .number(Double(records)),
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

    @OptionGroup var record: RecordNameOptions

    func run() throws {
        let name = try record.name()
        let store = try keys.open()
        try libraryCall("deleting \(name)") {
            switch name {
            case .id(let id): try store.delete(collection: collection, id: id, expectedVersion: version)
            case .key(let key): try store.delete(collection: collection, key: key, expectedVersion: version)
            }
        }
    }
}
