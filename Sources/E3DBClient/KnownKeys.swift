public import Foundation
public import E3DBPrimitives
import E3DBFiles
import Synchronization

/// The public keys this client has seen per client id, pinned on first use (TOFU).
///
/// The server answers `GET /v1/storage/clients/{id}` with a client's Curve25519 key (what `share` wraps access
/// keys for) and Ed25519 key (what `rec_sig` and notes are verified with). A server that answers with keys it holds
/// could read what is shared and forge what is read. The first keys seen for an id are kept here; a later answer
/// with other keys is refused with `.keyChanged` (naming the client id and both fingerprints), unless the id is
/// in ``acceptedChanges`` (the keys are then replaced). Compare a fingerprint out of band (``fingerprint(_:)``) to
/// turn trust on first use into verified trust.
///
/// In memory (``init(acceptingChangesOf:)``), or kept in a JSON file (``init(path:acceptingChangesOf:)``),
/// written whenever a key is pinned or replaced: `{"clients":{"<client id>":{"public_key":"<b64url>",
/// "signing_key":"<b64url>"|null}},"version":1}`. The keys are public; the file is still written with mode 0600
/// beside the credentials.
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
    /// Client ids whose changed keys are accepted (and pinned in place of the old ones).
    public let acceptedChanges: Set<UUID>
    private let pinned: Mutex<[UUID: Keys]>

    /// An empty store in memory (keys are pinned for the life of the object).
    /// - Parameter accepted: client ids whose changed keys are accepted.
    public init(acceptingChangesOf accepted: Set<UUID> = []) {
        path = nil
        acceptedChanges = accepted
        pinned = Mutex([:])
    }

    /// A store kept in the JSON file at `path` (read now if it exists; created when the first key is pinned).
    /// - Parameters:
    ///   - path: the file.
    ///   - accepted: client ids whose changed keys are accepted.
    /// - Throws: `E3DBError` `.invalidKnownKeys` when the file is not a known-keys file, `.fileIOFailed` when it
    ///   cannot be read.
    public init(path: String, acceptingChangesOf accepted: Set<UUID> = []) throws(E3DBError) {
        self.path = path
        acceptedChanges = accepted
        var keys: [UUID: Keys] = [:]
        if FileManager.default.fileExists(atPath: path) {
            let data: Data
            do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
                throw E3DBError(.fileIOFailed, "cannot read the known keys in \(path)", context: .init(item: path))
            }
            guard let body = try? JSONDecoder().decode(FileBody.self, from: data), body.version == 1 else {
                throw E3DBError(.invalidKnownKeys, "\(path) is not a known-keys file (version 1)",
                                context: .init(item: path))
            }
            for (id, entry) in body.clients {
                guard let uuid = UUID(uuidString: id) else {
                    throw E3DBError(.invalidKnownKeys, "\(path) names a client \(id.prefix(40)) that is not a UUID",
                                    context: .init(field: "clients", item: path))
                }
                keys[uuid] = entry
            }
        }
        pinned = Mutex(keys)
    }

    /// The keys pinned for `id`, if any.
    public func keys(of id: UUID) -> Keys? { pinned.withLock { $0[id] } }

    /// Pins `keys` for `id` if none are pinned; otherwise checks that they are the pinned ones.
    /// - Throws: `E3DBError` `.keyChanged` (context `item`: the client id; `field`: `public_key` or `signing_key`)
    ///   when they differ and `id` is not in ``acceptedChanges``; `.fileIOFailed` when the file cannot be written.
    public func check(_ keys: Keys, for id: UUID) throws(E3DBError) {
        // Saved under the lock, so that the file always holds the latest pins; kept in memory only once saved.
        let failure: E3DBError? = pinned.withLock { map in
            if let old = map[id] {
                if old == keys { return nil }
                guard acceptedChanges.contains(id) else { return Self.changed(id, from: old, to: keys) }
            }
            var updated = map
            updated[id] = keys
            if let failure = save(updated) { return failure }
            map = updated
            return nil
        }
        if let failure { throw failure }
    }

    static func changed(_ id: UUID, from old: Keys, to new: Keys) -> E3DBError {
        let client = id.uuidString.lowercased()
        let (field, before, after) = old.publicKey != new.publicKey
            ? ("public_key", Optional(old.publicKey), Optional(new.publicKey))
            : ("signing_key", old.signingKey, new.signingKey)
        func print(_ key: String?) -> String { key.map { fingerprint(base64URL: $0) } ?? "none" }
        return E3DBError(
            .keyChanged,
            "the server gives client \(client) another \(field) than the one pinned: fingerprint \(print(before)) "
                + "before, \(print(after)) now; accept the new key (e3dbkit: --accept-new-key \(client)) only after "
                + "checking its fingerprint with that client over another channel",
            context: .init(field: field, item: client))
    }

    /// Writes the file (atomically, mode 0600); the failure, if any.
    private func save(_ map: [UUID: Keys]) -> E3DBError? {
        guard let path else { return nil }
        var clients: [String: Keys] = [:]
        for (id, keys) in map { clients[id.uuidString.lowercased()] = keys }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let data = try encoder.encode(FileBody(version: 1, clients: clients))
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            return nil
        } catch {
            return E3DBError(.fileIOFailed, "cannot write the known keys to \(path)", context: .init(item: path))
        }
    }

    /// A key's fingerprint: the first 16 bytes of the SHA-256 of its raw bytes (32 for Curve25519 and Ed25519
    /// public keys), in lower-case hex, in eight groups of four digits joined by `:`, e.g.
    /// `3f1c:09ab:77d0:e2c4:5b61:aa90:0e4f:c2d8`.
    public static func fingerprint(_ rawKey: some DataProtocol) -> String {
        let digest = Hashes.sha256(rawKey).prefix(16)
        let hex = digest.map { String(format: "%02x", $0) }.joined()
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
