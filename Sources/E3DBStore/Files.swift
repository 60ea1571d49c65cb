public import E3DBCanonicalJSON
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import E3DBRows
public import Foundation
import GRDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension E3DBError.Code {
    /// No file at this path in the store's file tree. `context.item` names the path.
    public static let fileNotFound = Self("fileNotFound", category: .invalidArgument)
    /// A file (or a directory of files) already exists where one was to be written or moved.
    public static let fileExists = Self("fileExists", category: .invalidArgument)
    /// A stored file does not authenticate: its row was edited, or its body (`files/<id>.e3f`) is missing, cut,
    /// edited, belongs to another row or is not a regular file (a symbolic link, FIFO, directory or device, which
    /// is never followed or waited on). `context.item` names the path, `context.part` the body file.
    public static let fileTampered = Self("fileTampered", category: .verification)
    /// A body in the store's `files/` directory that no file row names (left by a crash between writing it and
    /// committing its row, or after deleting a row). `EncryptedStore.removeOrphanFiles()` removes them.
    public static let fileBodyOrphaned = Self("fileBodyOrphaned", category: .verification)
}

/// A file of the store's encrypted file tree (an attachment when ``recordID`` is set), authenticated in its
/// place. Its contents are read with `EncryptedStore.readFile(at:to:)`.
public struct StoredFile: Sendable, Hashable {
    /// The file's path in the virtual tree: `/` followed by `/`-separated names (NFC, no `.` or `..`).
    public let path: String
    /// The id of its current body: `files/<id>.e3f` in the store directory (a new id on every write).
    public let id: UUID
    /// The record it is attached to, if any.
    public let recordID: UUID?
    /// The plaintext size in bytes.
    public let size: Int
    /// The body's size in bytes (E3DB file format v3).
    public let encryptedSize: Int
    /// BLAKE2b-512 of the body, checked on every full read.
    public let checksum: Data
    /// When the path was first written (kept when the file is replaced).
    public let created: Date
    /// When the file last changed: written, replaced or moved.
    public let updated: Date

    /// The body's path relative to the store directory.
    public var bodyName: String { "\(EncryptedStore.filesDirectoryName)/\(id.lowercasedString).e3f" }

    /// `{"path":…,"size":…,…}` as `e3dbkit store ls` prints it.
    public var jsonValue: JSONValue {
        var object: JSONObject = [
            "path": .string(path), "id": .string(id.lowercasedString), "size": .number(Double(size)),
            "encrypted_size": .number(Double(encryptedSize)),
            "blake2b512": .string(Hex.encode(checksum)),
            "created": .string(StoreTime.format(created)), "updated": .string(StoreTime.format(updated)),
        ]
        if let recordID { object["record_id"] = .string(recordID.lowercasedString) }
        return .object(object)
    }
}

/// Paths of the virtual file tree.
enum StorePath {
    static let maxBytes = 1024

    /// `/a/b` for `a/b`, `/a//b/` or `/a/b` (NFC); `.`, `..`, control characters and empty paths are refused.
    static func normalize(_ text: String) throws(E3DBError) -> String {
        let names = text.precomposedStringWithCanonicalMapping.split(separator: "/", omittingEmptySubsequences: true)
        for name in names
        where name == "." || name == ".."
            || name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        {
            throw E3DBError(
                .invalidParameter, "a file path may not contain '.', '..' or control characters",
                context: .init(item: text))
        }
        let path = "/" + names.joined(separator: "/")
        guard !names.isEmpty else {
            throw E3DBError(
                .invalidParameter, "a file path needs at least one name (not only '/')", context: .init(item: text))
        }
        guard path.utf8.count <= maxBytes else {
            throw E3DBError(
                .invalidParameter, "a file path is at most \(maxBytes) bytes",
                context: .init(item: String(text.prefix(64))))
        }
        return path
    }

    /// `/` or a normalized directory path.
    static func normalizeDirectory(_ text: String) throws(E3DBError) -> String {
        text.split(separator: "/").isEmpty ? "/" : try normalize(text)
    }

    /// The proper ancestors of a normalized path (`/a`, `/a/b` for `/a/b/c`).
    static func ancestors(_ path: String) -> [String] {
        let names = path.split(separator: "/")
        return (1..<max(1, names.count)).map { "/" + names.prefix($0).joined(separator: "/") }
    }

    /// SQL bounds of the paths under a directory: `dir/` <= path < `dir0` ('0' follows '/').
    static func bounds(under directory: String) -> (String, String) {
        directory == "/" ? ("/", "0") : (directory + "/", directory + "0")
    }
}

/// The columns of a `files` row, read without trusting them: each through ``UntrustedRow``; a value of the wrong type
/// becomes nil and ``damage`` names the first such column, so the row is a typed error where it is decoded, never a
/// trap. (`record_id` may be NULL: a file attached to no record.)
struct FileRow: Sendable {
    let id: String?
    let path: String?
    let recordID: String?
    let size: Int64?
    let encryptedSize: Int64?
    let checksum: Data?
    let wrappedKey: Data?
    let created: String?
    let updated: String?
    let mac: Data?
    /// The first column of the wrong type, if any (`storeCorrupted` naming `files.<column>`).
    let damage: E3DBError?

    init(_ row: Row) {
        let reader = UntrustedRow(store: row, table: "files")
        var damage: E3DBError?
        func read<Value: DatabaseValueConvertible>(_ column: String) -> Value? {
            reader.lenient(column, required: false, damage: &damage)
        }
        id = read("id")
        path = read("path")
        recordID = read("record_id")
        size = read("size")
        encryptedSize = read("encrypted_size")
        checksum = read("checksum")
        wrappedKey = read("wrapped_key")
        created = read("created")
        updated = read("updated")
        mac = read("mac")
        self.damage = damage
    }
}

/// A file row's values (authenticated once decoded).
struct FileEntry: Sendable {
    var id: String
    var path: String
    var recordID: String?
    var size: Int
    var encryptedSize: Int
    var checksum: Data
    var wrappedKey: Data
    var created: String
    var updated: String

    var bodyName: String { "\(EncryptedStore.filesDirectoryName)/\(id).e3f" }

    func stored() throws(E3DBError) -> StoredFile {
        guard let uuid = UUID(uuidString: id), let createdDate = StoreTime.parse(created),
            let updatedDate = StoreTime.parse(updated)
        else {
            throw E3DBError(
                .fileTampered, "the row of file \(path) is damaged", context: .init(part: bodyName, item: path))
        }
        var record: UUID?
        if let recordID {
            guard let parsed = UUID(uuidString: recordID) else {
                throw E3DBError(
                    .fileTampered, "the row of file \(path) names no valid record", context: .init(item: path))
            }
            record = parsed
        }
        return StoredFile(
            path: path, id: uuid, recordID: record, size: size, encryptedSize: encryptedSize, checksum: checksum,
            created: createdDate, updated: updatedDate)
    }

    /// The file's own access key, unsealed from the row.
    func accessKey(_ filesKey: SecretBox.Key) throws(E3DBError) -> AccessKey {
        AccessKey(try StoreKeys.unwrap(wrappedKey, under: filesKey, failure: tampered("its key does not open")))
    }

    func tampered(_ why: String) -> E3DBError {
        E3DBError(.fileTampered, "file \(path) (\(bodyName)): \(why)", context: .init(part: bodyName, item: path))
    }

    /// Runs a file-layer call on this file's body: verification and format errors become `fileTampered`, others
    /// keep their code; all name the path and body.
    func naming<T>(_ body: () throws(E3DBError) -> T) throws(E3DBError) -> T {
        do {
            return try body()
        } catch {
            var context = error.context
            context.item = path
            context.part = bodyName
            switch error.code.category {
            case .verification, .malformedInput:
                throw E3DBError(
                    .fileTampered,
                    "file \(path) (\(bodyName)) does not authenticate: \(error.code.rawValue): \(error.message)",
                    context: context)
            default:
                throw E3DBError(error.code, "file \(path): \(error.message)", context: context)
            }
        }
    }
}
