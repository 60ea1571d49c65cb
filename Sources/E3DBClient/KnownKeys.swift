import E3DBAPI
import E3DBFiles
public import E3DBPrimitives
public import Foundation
import Synchronization

/// The public keys this client has seen per client id, pinned on first use (TOFU).
///
/// The server answers `GET /v1/storage/clients/{id}` with a client's Curve25519 key (what `share` wraps access
/// keys for) and Ed25519 key (what `rec_sig` and notes are verified with). A server that answers with keys it holds
/// could read what is shared and forge what is read. The first keys seen for an id are kept here; a later answer
/// with other keys is refused with `.keyChanged` (naming the client id and both fingerprints), unless every key
/// that changed has a fingerprint listed for that id in ``acceptedChanges`` (the fingerprints checked with that
/// client over another channel; the keys are then replaced). Compare a fingerprint out of band
/// (``fingerprint(_:)``) to turn trust on first use into verified trust.
///
/// In memory (``init(acceptingChangesOf:)``), or kept in a JSON file (``init(path:acceptingChangesOf:)``):
/// `{"clients":{"<client id>":{"public_key":"<b64url>", "signing_key":"<b64url>"|null}},"version":1}`. The keys
/// are public; the file is still written with mode 0600 beside the credentials. Several processes may share the
/// file: each pin is made under an exclusive `flock` on `<path>.lock`, against the file as it is on disk then (a
/// key another process pinned meanwhile is checked like one pinned here), and the merged file is written
/// atomically (a temporary file of mode 0600, `fsync`, `rename`).
///
/// Whoever can write the file decides which keys count as verified, so it is trusted only as ssh's `StrictModes`
/// trusts `known_hosts`: the file must be a regular file owned by this user and not writable by group or others;
/// its directory must be owned by this user (or root) and not writable by group or others, unless it has the
/// sticky bit (as `/tmp`), where others cannot replace or remove this user's files. The lock file is opened
/// without following a symbolic link and must be a regular file of this user's too. Anything else is refused with
/// `.untrustedKnownKeys` naming the path; a file larger than ``maxFileBytes`` with `.invalidKnownKeys`, before it
/// is read.
public final class KnownKeys: Sendable {
    /// A client's public keys, base64url.
    public struct Keys: Sendable, Hashable, Codable {
        /// The Curve25519 public key.
        public var publicKey: String
        /// The Ed25519 signing key, or nil when the client registered none.
        public var signingKey: String?

        public init(publicKey: String, signingKey: String?) {
            self.publicKey = publicKey
            self.signingKey = signingKey
        }

        enum CodingKeys: String, CodingKey { case publicKey = "public_key", signingKey = "signing_key" }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(publicKey, forKey: .publicKey)
            try c.encode(signingKey, forKey: .signingKey)
        }
    }

    private struct FileBody: Codable {
        var version: Int
        var clients: [String: Keys]
    }

    /// The file the keys are kept in, or nil in memory.
    public let path: String?
    /// Per client id, the fingerprints (``fingerprint(_:)``, of the Curve25519 or the Ed25519 key) of the new keys
    /// to accept in place of the pinned ones. A change is accepted only when every key that changed has its
    /// fingerprint listed here.
    public let acceptedChanges: [UUID: Set<String>]
    private let pinned: Mutex<[UUID: Keys]>

    /// An empty store in memory (keys are pinned for the life of the object).
    /// - Parameter accepted: per client id, the fingerprints of new keys to accept (checked out of band).
    public init(acceptingChangesOf accepted: [UUID: Set<String>] = [:]) {
        path = nil
        acceptedChanges = Self.normalized(accepted)
        pinned = Mutex([:])
    }

    /// A store kept in the JSON file at `path` (read now if it exists, and again under the lock before each pin;
    /// created when the first key is pinned).
    /// - Parameters:
    ///   - path: the file.
    ///   - accepted: per client id, the fingerprints of new keys to accept (checked out of band).
    /// - Throws: `E3DBError` `.invalidKnownKeys` when the file is not a known-keys file, `.fileIOFailed` when it
    ///   cannot be read.
    public init(path: String, acceptingChangesOf accepted: [UUID: Set<String>] = [:]) throws(E3DBError) {
        self.path = path
        acceptedChanges = Self.normalized(accepted)
        pinned = Mutex(try Self.read(path))
    }

    private static func normalized(_ accepted: [UUID: Set<String>]) -> [UUID: Set<String>] {
        accepted.mapValues { Set($0.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }) }
    }

    /// The largest known-keys file read (16 MiB: about 100,000 pins).
    public static let maxFileBytes = 16 << 20

    /// The pins in the file at `path` (none when it does not exist), once the file and its directory checked out
    /// (``checkDirectory(of:)``, ``checkFile(_:path:)``); at most ``maxFileBytes`` read.
    private static func read(_ path: String) throws(E3DBError) -> [UUID: Keys] {
        try checkDirectory(of: path)
        let fd = unsafe open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return [:] }
            throw E3DBError(.fileIOFailed, "cannot read the known keys in \(path)", context: .init(item: path))
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        let size = try checkFile(fd, path: path)
        guard size <= maxFileBytes else { throw tooLarge(path) }
        let data: Data
        do { data = try handle.read(upToCount: maxFileBytes + 1) ?? Data() } catch {
            throw E3DBError(.fileIOFailed, "cannot read the known keys in \(path)", context: .init(item: path))
        }
        guard data.count <= maxFileBytes else { throw tooLarge(path) }  // it grew
        guard let body = try? API.decodeChecked(FileBody.self, from: data), body.version == 1 else {
            throw E3DBError(
                .invalidKnownKeys, "\(path) is not a known-keys file (version 1)",
                context: .init(item: path))
        }
        var keys: [UUID: Keys] = [:]
        for (id, entry) in body.clients {
            guard let uuid = UUID(uuidString: id) else {
                throw E3DBError(
                    .invalidKnownKeys, "\(path) names a client \(id.prefix(40)) that is not a UUID",
                    context: .init(field: "clients", item: path))
            }
            keys[uuid] = entry
        }
        return keys
    }

    private static func tooLarge(_ path: String) -> E3DBError {
        E3DBError(
            .invalidKnownKeys, "\(path) is larger than the 16 MiB a known-keys file may hold",
            context: .init(item: path))
    }

    private static func untrusted(_ path: String, _ why: String) -> E3DBError {
        E3DBError(.untrustedKnownKeys, "\(path) \(why)", context: .init(item: path))
    }

    /// Refuses the directory of `path` when someone else could replace the files in it: another owner than this
    /// user or root, or group or other write permission without the sticky bit.
    static func checkDirectory(of path: String) throws(E3DBError) {
        let directory =
            (path as NSString).deletingLastPathComponent.isEmpty
            ? "." : (path as NSString).deletingLastPathComponent
        var st = stat()
        guard unsafe stat(directory, &st) == 0 else {
            if errno == ENOENT { return }  // nothing in it to read or replace; a pin then fails to create the lock
            throw E3DBError(
                .fileIOFailed, "cannot inspect the directory \(directory) of the known keys",
                context: .init(item: directory))
        }
        guard st.st_uid == geteuid() || st.st_uid == 0 else {
            throw untrusted(directory, "is owned by another user (uid \(st.st_uid)), who could replace the known keys")
        }
        guard st.st_mode & (S_IWGRP | S_IWOTH) == 0 || st.st_mode & S_ISVTX != 0 else {
            throw untrusted(
                directory, "may be written by group or others, who could replace the known keys (chmod go-w)")
        }
    }

    /// Refuses the open file `fd` (at `path`) unless it is a regular file owned by this user that group and others
    /// cannot write; returns its size.
    @discardableResult
    static func checkFile(_ fd: Int32, path: String) throws(E3DBError) -> Int {
        var st = stat()
        guard unsafe fstat(fd, &st) == 0 else {
            throw E3DBError(.fileIOFailed, "cannot inspect \(path)", context: .init(item: path))
        }
        guard st.st_mode & S_IFMT == S_IFREG else { throw untrusted(path, "is not a regular file") }
        guard st.st_uid == geteuid() else {
            throw untrusted(path, "is owned by another user (uid \(st.st_uid)), who decides which keys are trusted")
        }
        guard st.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
            throw untrusted(path, "may be written by group or others, who could pin their keys (chmod go-w)")
        }
        return Int(st.st_size)
    }

    /// The keys pinned for `id`, if any.
    public func keys(of id: UUID) -> Keys? { pinned.withLock { $0[id] } }

    /// Pins `keys` for `id` if none are pinned; otherwise checks that they are the pinned ones. With a file, the
    /// pins are those on disk now (read under the file's lock, which another process pinning meanwhile holds);
    /// the lock and the file are handled on a thread of their own.
    /// - Throws: `E3DBError` `.keyChanged` (context `item`: the client id; `field`: `public_key` or `signing_key`)
    ///   when they differ and the new keys are not accepted (``acceptedChanges``); `.fileIOFailed` when the file
    ///   cannot be locked, read or written; `.invalidKnownKeys` when it is not a known-keys file.
    public func check(_ keys: Keys, for id: UUID) async throws(E3DBError) {
        if pinned.withLock({ $0[id] }) == keys { return }
        guard let path else {
            let failure: E3DBError? = pinned.withLock { map in
                if let failure = decide(keys, for: id, pinned: map[id]) { return failure }
                map[id] = keys
                return nil
            }
            if let failure { throw failure }
            return
        }
        let merged = try await onOwnThread { [self] () throws(E3DBError) -> [UUID: Keys] in
            try self.pinLocked(keys, for: id, path: path)
        }
        pinned.withLock { $0 = merged }
    }

    /// Under an exclusive lock on `<path>.lock`: reads the pins on disk, decides, merges and writes them. Blocks.
    /// - Returns: the pins now on disk.
    private func pinLocked(_ keys: Keys, for id: UUID, path: String) throws(E3DBError) -> [UUID: Keys] {
        let lockPath = path + ".lock"
        try Self.checkDirectory(of: path)
        let fd = unsafe open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == ELOOP { throw Self.untrusted(lockPath, "is a symbolic link; it is not followed") }
            throw E3DBError(.fileIOFailed, "cannot open the lock file \(lockPath)", context: .init(item: lockPath))
        }
        defer { close(fd) }  // also releases the lock
        try Self.checkFile(fd, path: lockPath)
        guard FileIO.retryingInterrupted({ flock(fd, LOCK_EX) }) == 0 else {
            throw E3DBError(.fileIOFailed, "cannot lock \(lockPath)", context: .init(item: lockPath))
        }
        // What is on disk now wins over what this object read before: another process may have pinned or
        // accepted a key since. Pins only this object has (a file removed meanwhile) are kept.
        var map = pinned.withLock { $0 }
        map.merge(try Self.read(path)) { _, disk in disk }
        if map[id] == keys { return map }
        if let failure = decide(keys, for: id, pinned: map[id]) { throw failure }
        map[id] = keys
        try Self.store(map, to: path)
        return map
    }

    /// Nil when `keys` may be pinned for `id` (none pinned, or every changed key's fingerprint accepted); the
    /// `.keyChanged` error otherwise.
    private func decide(_ keys: Keys, for id: UUID, pinned old: Keys?) -> E3DBError? {
        guard let old, old != keys else { return nil }
        let accepted = acceptedChanges[id] ?? []
        func matches(_ key: String?) -> Bool { key.map { accepted.contains(Self.fingerprint(base64URL: $0)) } ?? false }
        if old.publicKey != keys.publicKey, !matches(keys.publicKey) {
            return Self.changed(id, from: old, to: keys, field: "public_key")
        }
        if old.signingKey != keys.signingKey, !matches(keys.signingKey) {
            return Self.changed(id, from: old, to: keys, field: "signing_key")
        }
        return nil
    }

    static func changed(_ id: UUID, from old: Keys, to new: Keys, field: String? = nil) -> E3DBError {
        let client = id.lowercasedString
        let name = field ?? (old.publicKey != new.publicKey ? "public_key" : "signing_key")
        let (before, after) =
            name == "public_key"
            ? (Optional(old.publicKey), Optional(new.publicKey))
            : (old.signingKey, new.signingKey)
        func print(_ key: String?) -> String { key.map { fingerprint(base64URL: $0) } ?? "none" }
        return E3DBError(
            .keyChanged,
            "the server gives client \(client) another \(name) than the one pinned: fingerprint \(print(before)) "
                + "before, \(print(after)) now; accept the new key (e3dbkit: --accept-new-key \(client)=FINGERPRINT) "
                + "only with the fingerprint that client gives you over another channel",
            context: .init(field: name, item: client))
    }

    /// Writes the file atomically (`AtomicFile`: a temporary file beside it of mode 0600, written, `fsync`ed,
    /// renamed over it, the directory synced; the caller holds the lock).
    private static func store(_ map: [UUID: Keys], to path: String) throws(E3DBError) {
        var clients: [String: Keys] = [:]
        for (id, keys) in map { clients[id.lowercasedString] = keys }
        guard let data = try? JSONEncoders.sorted().encode(FileBody(version: 1, clients: clients)) else {
            throw E3DBError(.fileIOFailed, "cannot write the known keys to \(path)", context: .init(item: path))
        }
        do throws(FileIOError) {
            let file = try AtomicFile(path: path)
            try file.write(contentsOf: data)
            try file.commit()
        } catch {
            throw E3DBError(
                .fileIOFailed, "cannot write the known keys to \(path): \(error)", context: .init(item: path))
        }
    }

    /// A key's fingerprint: the first 16 bytes of the SHA-256 of its raw bytes (32 for Curve25519 and Ed25519
    /// public keys), in lower-case hex, in eight groups of four digits joined by `:`, e.g.
    /// `3f1c:09ab:77d0:e2c4:5b61:aa90:0e4f:c2d8`.
    public static func fingerprint(_ rawKey: some DataProtocol) -> String {
        let digest = Hashes.sha256(rawKey).prefix(16)
        let hex = Hex.encode(digest)
        var groups: [Substring] = []
        var rest = Substring(hex)
        while !rest.isEmpty {
            groups.append(rest.prefix(4))
            rest = rest.dropFirst(4)
        }
        return groups.joined(separator: ":")
    }

    /// ``fingerprint(_:)`` of a base64url key; the text itself when it is not base64url.
    public static func fingerprint(base64URL key: String) -> String {
        (try? Base64URL.decode(key)).map { fingerprint($0) } ?? "(not base64url)"
    }
}
