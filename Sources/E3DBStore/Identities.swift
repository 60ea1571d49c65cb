public import E3DBKeys
public import E3DBPrimitives
import E3DBRows
public import Foundation
import GRDB

/// An E3DB client identity enrolled to open a store: the store holds its master key wrapped for the client's
/// Curve25519 public key (an EAK whose authorizer is the store's own key pair).
public struct StoreIdentity: Sendable, Hashable {
    /// The client's Curve25519 public key (the reader of the EAK).
    public let publicKey: Box.PublicKey
    /// The client's id, when it was given at enrollment.
    public let clientID: UUID?
    /// When the identity was enrolled (to the millisecond).
    public let enrolled: Date
}

/// The key header's `store_identities` row of one identity: the master key wrapped for its public key as an EAKInfo.
struct IdentityEnrollment: Sendable {
    let identity: StoreIdentity
    let info: EAKInfo

    init(
        publicKey: Box.PublicKey, clientID: UUID?, keys: StoreKeys, storeID: UUID, enrolled: Date = StoreTime.now()
    ) throws(E3DBError) {
        let eak = try EncryptedAccessKey.wrap(AccessKey(keys.master), for: publicKey, by: keys.boxKey)
        info = EAKInfo(eak: eak, authorizerID: storeID, authorizerPublicKey: keys.boxKey.publicKey)
        identity = StoreIdentity(publicKey: publicKey, clientID: clientID, enrolled: enrolled)
    }

    /// The enrollment of the identity a store is created for; nil for a passphrase or key.
    init?(credential: StoreCredential, clientID: UUID?, keys: StoreKeys, storeID: UUID) throws(E3DBError) {
        guard case .identity(let reader) = credential else { return nil }
        try self.init(publicKey: reader.publicKey, clientID: clientID, keys: keys, storeID: storeID)
    }

    /// Inserts the row, replacing an earlier enrollment of the same key (inside the caller's transaction).
    func insert(_ db: Database) throws {
        try db.execute(
            sql:
                "INSERT OR REPLACE INTO store_identities (public_key, client_id, eak_info, created) VALUES (?, ?, ?, ?)",
            arguments: [
                identity.publicKey.rawRepresentation, identity.clientID?.lowercasedString,
                String(decoding: info.jsonData(), as: UTF8.self), StoreTime.format(identity.enrolled),
            ])
    }
}

extension EncryptedStore {
    /// The store's keys from `credential`: a passphrase or key opens the master key sealed in the key header's
    /// `store_meta`; an identity opens the EAK enrolled for its public key.
    /// - Throws: `E3DBError.Code.wrongKey` when the credential does not open the store (an identity that is not
    ///   enrolled, or whose private key does not open its EAK); `storeCorrupted` when an enrollment is damaged;
    ///   `storeTampered` when the header's database file or encryption is not what the master key sealed.
    static func unlockKeys(_ keyHeader: DatabaseQueue, _ header: Header, with credential: StoreCredential)
        throws(E3DBError)
        -> StoreKeys
    {
        let keys = try keysFromCredential(keyHeader, header, with: credential)
        try header.checkBinding(keys)
        guard keys.boxKey.publicKey.rawRepresentation == header.boxPublicKey else {
            throw E3DBError(
                .storeCorrupted, "the store's box public key does not match its private key",
                context: .init(part: "store_meta.box_public"))
        }
        return keys
    }

    private static func keysFromCredential(
        _ keyHeader: DatabaseQueue, _ header: Header, with credential: StoreCredential
    ) throws(E3DBError) -> StoreKeys {
        guard case .identity(let reader) = credential else { return try StoreKeys.unlock(header, with: credential) }
        let publicKey = reader.publicKey
        let item = publicKey.base64URLEncoded
        let text = try databaseCall("reading the store's identities") {
            try keyHeader.read { db in
                try String.fetchOne(
                    db, sql: "SELECT eak_info FROM store_identities WHERE public_key = ?",
                    arguments: [publicKey.rawRepresentation])
            }
        }
        guard let text else {
            throw E3DBError(.wrongKey, "this identity is not enrolled in the store", context: .init(item: item))
        }
        let info: EAKInfo
        do {
            info = try EAKInfo(jsonData: Data(text.utf8))
        } catch {
            throw E3DBError(
                .storeCorrupted, "the enrollment of identity \(item) is damaged", context: .init(item: item))
        }
        guard info.authorizerPublicKey.rawRepresentation == header.boxPublicKey, info.authorizerID == header.storeID
        else {
            throw E3DBError(
                .storeCorrupted, "the enrollment of identity \(item) names another authorizer",
                context: .init(item: item))
        }
        let master: AccessKey
        do {
            master = try info.unwrap(with: reader)
        } catch {
            throw E3DBError(
                .wrongKey, "the identity's private key does not open its enrollment", context: .init(item: item))
        }
        return try StoreKeys(master: master.secretBoxKey, wrappedBoxKey: header.wrappedBoxKey)
    }

    /// Enrolls an E3DB client identity as another way to open the store: the master key is wrapped for
    /// `publicKey` with the store's key pair as authorizer (an EAKInfo), so that the client's private key opens
    /// the store (``StoreCredential/identity(_:)``). The passphrase or key, and other identities, keep working.
    /// Enrolling a key again replaces its enrollment (a new EAK and client id).
    /// - Parameters:
    ///   - publicKey: the client's Curve25519 public key (`ClientIdentity.publicKey`).
    ///   - clientID: the client's id, kept for `identities()`.
    /// - Throws: `storeLocked`, `databaseError`; `authenticationFailed` for a low-order public key.
    @discardableResult
    public func addIdentity(publicKey: Box.PublicKey, clientID: UUID? = nil) throws(E3DBError) -> StoreIdentity {
        try perform(enrolling(publicKey, clientID: clientID))
    }

    /// `addIdentity(publicKey:clientID:)` for async callers.
    @discardableResult
    public func addIdentity(publicKey: Box.PublicKey, clientID: UUID? = nil) async throws(E3DBError) -> StoreIdentity {
        try await perform(enrolling(publicKey, clientID: clientID))
    }

    /// The key header write of `addIdentity(publicKey:clientID:)`.
    private func enrolling(_ publicKey: Box.PublicKey, clientID: UUID?) throws(E3DBError) -> StoreAccess<StoreIdentity>
    {
        let enrollment = try IdentityEnrollment(
            publicKey: publicKey, clientID: clientID, keys: currentKeys(), storeID: storeID)
        return .headerWrite("enrolling an identity") { db in
            try enrollment.insert(db)
            return enrollment.identity
        }
    }

    /// Removes an identity's enrollment: its private key no longer opens the store. This does not change the
    /// master key: a client that opened the store before, or kept a copy of its file, still holds what it read.
    /// - Throws: `invalidParameter` when the identity is not enrolled, or when it is the only way left to open a
    ///   store that has no passphrase or key (nothing is changed then); `storeLocked`, `databaseError`.
    public func removeIdentity(publicKey: Box.PublicKey) throws(E3DBError) {
        try perform(unenrolling(publicKey))
    }

    /// `removeIdentity(publicKey:)` for async callers.
    public func removeIdentity(publicKey: Box.PublicKey) async throws(E3DBError) {
        try await perform(unenrolling(publicKey))
    }

    /// The key header write of `removeIdentity(publicKey:)`.
    private func unenrolling(_ publicKey: Box.PublicKey) throws(E3DBError) -> StoreAccess<Void> {
        _ = try currentKeys()
        let item = publicKey.base64URLEncoded
        return .headerWrite("removing an identity") { db in
            try db.execute(
                sql: "DELETE FROM store_identities WHERE public_key = ?", arguments: [publicKey.rawRepresentation])
            guard db.changesCount == 1 else {
                throw E3DBError(.invalidParameter, "identity \(item) is not enrolled", context: .init(item: item))
            }
            let kdf = try String.fetchOne(db, sql: "SELECT kdf FROM store_meta WHERE singleton = 1")
            let remaining = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM store_identities") ?? 0
            if kdf == "none" && remaining == 0 {
                throw E3DBError(
                    .invalidParameter,
                    "identity \(item) is the only way to open this store; set a passphrase or key, or enroll "
                        + "another identity first", context: .init(item: item))
            }
        }
    }

    /// The enrolled identities, in enrollment order (a key enrolled again moves to the end).
    /// - Throws: `storeLocked`, `storeCorrupted` for a damaged row, `databaseError`.
    public func identities() throws(E3DBError) -> [StoreIdentity] {
        try perform(identityRows())
    }

    /// `identities()` for async callers.
    public func identities() async throws(E3DBError) -> [StoreIdentity] {
        try await perform(identityRows())
    }

    /// The key header read of `identities()`.
    private func identityRows() throws(E3DBError) -> StoreAccess<[StoreIdentity]> {
        _ = try currentKeys()
        return .headerRead("listing identities") { db in
            try EncryptedStore.identities(
                Row.fetchAll(db, sql: "SELECT public_key, client_id, created FROM store_identities ORDER BY rowid"))
        }
    }

    /// The identities of the rows `identityRows()` reads.
    private static func identities(_ rows: [Row]) throws(E3DBError) -> [StoreIdentity] {
        var identities: [StoreIdentity] = []
        for row in rows {
            let row = UntrustedRow(store: row, table: "store_identities")
            guard let publicKey = try? Box.PublicKey(rawRepresentation: try row.value("public_key", as: Data.self)),
                let created = StoreTime.parse(try row.value("created", as: String.self))
            else {
                throw E3DBError(.storeCorrupted, "an identity row is damaged")
            }
            let clientID = try row.optional("client_id", as: String.self).flatMap(UUID.init(uuidString:))
            identities.append(StoreIdentity(publicKey: publicKey, clientID: clientID, enrolled: created))
        }
        return identities
    }
}

extension EncryptedStore {
    /// Creates a new, empty store that opens with `identity`'s private key only (its master key wrapped for the
    /// identity's public key); `changeCredential(to:kdf:)` can add a passphrase or key later.
    /// `databaseEncryption` chooses an encrypted (the default) or plain database file.
    /// - Throws: `E3DBError.Code.storeExists`, `databaseError`.
    public static func create(
        at directory: URL, identity: ClientIdentity, databaseEncryption: DatabaseEncryption = .encrypted
    ) throws(E3DBError) -> EncryptedStore {
        try create(
            at: directory, credential: .identity(identity.boxKey), kdfParameters: KDFPreset.moderate.parameters,
            clientID: identity.clientID, databaseEncryption: databaseEncryption)
    }

    /// `create(at:identity:databaseEncryption:)` for async callers: the whole creation runs on a thread of its own,
    /// as the async `create(at:credential:kdf:databaseEncryption:)`.
    public static func create(
        at directory: URL, identity: ClientIdentity, databaseEncryption: DatabaseEncryption = .encrypted
    ) async throws(E3DBError) -> EncryptedStore {
        try await blocking(named: "e3dbkit-store-open", permits: staticBlockingPermits) { _ throws(E3DBError) in
            try create(at: directory, identity: identity, databaseEncryption: databaseEncryption)
        }
    }
}
