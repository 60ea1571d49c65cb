import E3DBKeys
public import E3DBPrimitives
import Foundation

/// What opens a store: a passphrase (stretched with Argon2id), a raw 32-byte key, or an enrolled E3DB client
/// identity's Curve25519 private key. All stay in wiped storage.
public enum StoreCredential: Sendable {
    /// A passphrase, stretched with Argon2id under the store's salt and parameters.
    case passphrase(SecureBytes)
    /// A raw 32-byte key-encryption key (no KDF: an app that keeps its key in a keychain or an HSM).
    case key(SecureBytes)
    /// An E3DB client's Curve25519 private key (`ClientIdentity.boxKey`): opens the master key from the EAK the
    /// store holds for that client (see `EncryptedStore.addIdentity(publicKey:clientID:)`).
    case identity(Box.PrivateKey)
}

/// Argon2id cost presets, libsodium's `crypto_pwhash` constants (measured open times in docs/store.md).
public enum KDFPreset: String, Sendable, CaseIterable {
    /// 2 passes over 64 MiB.
    case interactive
    /// 3 passes over 256 MiB.
    case moderate
    /// 4 passes over 1 GiB.
    case sensitive

    /// The Argon2id parameters of this preset.
    public var parameters: Argon2id.Parameters {
        switch self {
        case .interactive: .interactive
        case .moderate: .moderate
        case .sensitive: .sensitive
        }
    }
}

/// The store's key hierarchy: the credential's key (KEK) wraps the master key; the master key wraps one access
/// key per collection and derives the record-binding MAC key and the collection-state MAC key.
struct StoreKeys: Sendable {
    let master: SecretBox.Key
    let recordMACKey: SecureBytes
    /// Authenticates the per-collection state and the write counter (`CollectionState.swift`).
    let stateMACKey: SecureBytes
    /// The raw SQLCipher 4 key of an encrypted database file's pages (see ``DatabaseEncryption``).
    let databaseKey: SecureBytes
    /// The store's Curve25519 key: the authorizer of the EAKs it writes when it shares a collection.
    let boxKey: Box.PrivateKey
    /// Whether the sealed box key carries ``statePromise``: the store has an authenticated state, so a store
    /// without state rows was stripped of them (false only for a store made before the collection state).
    let promisesState: Bool
    /// The database file and encryption the sealed box key names after its state promise (nil for a store made
    /// before the binding): the key header's plain `database_file` and `database_encryption` must say the same.
    let binding: HeaderBinding?

    /// Sealed after the box private key (under the master key) by every store with a collection state: a promise
    /// that someone who can edit the files cannot take back by deleting the state rows (they cannot seal anew).
    static let statePromise = Array("E3DBStore state v1".utf8)

    /// The key header's values that say which file is the database and how to open it, sealed under the master key
    /// after ``statePromise``: `"E3DBStore header v1"`, one byte for the encryption (`e` or `p`), then the file
    /// name's UTF-8. Someone who can edit the key header cannot point the store at another file or flip its
    /// encryption without the master key.
    struct HeaderBinding: Equatable {
        let databaseFile: String
        let encryption: DatabaseEncryption

        static let tag = Array("E3DBStore header v1".utf8)

        var bytes: [UInt8] { HeaderBinding.tag + [encryption == .encrypted ? 0x65 : 0x70] + Array(databaseFile.utf8) }

        /// The binding in `bytes` (what follows the state promise), nil when it is not one.
        init?(_ bytes: some Collection<UInt8>) {
            let tag = HeaderBinding.tag
            guard bytes.count > tag.count + 1, bytes.prefix(tag.count).elementsEqual(tag) else { return nil }
            let rest = bytes.dropFirst(tag.count)
            switch rest.first {
            case 0x65: encryption = .encrypted
            case 0x70: encryption = .plain
            default: return nil
            }
            guard let name = String(validating: rest.dropFirst(), as: UTF8.self),
                KeyHeader.isDatabaseFileName(name)
            else { return nil }
            databaseFile = name
        }

        init(databaseFile: String, encryption: DatabaseEncryption) {
            self.databaseFile = databaseFile
            self.encryption = encryption
        }
    }

    init(master: SecretBox.Key, wrappedBoxKey: Data) throws(E3DBError) {
        self.master = master
        self.recordMACKey = try StoreKeys.derive(from: master, label: "record-binding")
        self.stateMACKey = try StoreKeys.derive(from: master, label: "collection-state")
        self.databaseKey = try StoreKeys.derive(from: master, label: "database-pages")
        let failure = E3DBError(.storeCorrupted, "the store's box key does not authenticate under its master key")
        let opened: SecureBytes
        do {
            opened = try SecretBox.openSecret(try SecretBox.SealedBox(combined: wrappedBoxKey), using: master)
        } catch {
            throw failure
        }
        let keyCount = SecretBox.keyByteCount
        let promise = StoreKeys.statePromise
        // What follows the key: nothing (a store made before the collection state), the state promise, or the state
        // promise and the header binding (neither is secret; the key stays in `opened`).
        // Safety: `raw` is only read inside the closure and at indexes `keyCount...` that the count check keeps
        // inside it; what leaves is a copy.
        let following = unsafe opened.withUnsafeBytes { raw in
            unsafe raw.count >= keyCount ? Array(unsafe raw[keyCount...]) : nil
        }
        let trailer: (promised: Bool, binding: HeaderBinding?)?
        switch following {
        case .some(let bytes) where bytes.isEmpty: trailer = (false, nil)
        case .some(let bytes) where bytes.count == promise.count && bytes.elementsEqual(promise): trailer = (true, nil)
        case .some(let bytes) where bytes.starts(with: promise):
            trailer = HeaderBinding(bytes.dropFirst(promise.count)).map { (true, $0) }
        default: trailer = nil
        }
        guard let trailer else { throw failure }
        self.promisesState = trailer.promised
        self.binding = trailer.binding
        self.boxKey = try Box.PrivateKey(
            unsafe SecureBytes(count: keyCount) { destination in
                unsafe opened.withUnsafeBytes { source in
                    unsafe destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[..<keyCount]))
                }
            })
    }

    /// Seals a box private key under the master key, followed by ``statePromise`` unless `promisingState` is false
    /// (the form of a store made before the collection state, for its tests), and by `binding` when given (a
    /// promise always comes with it).
    static func wrap(
        _ key: Box.PrivateKey, under master: SecretBox.Key, promisingState: Bool = true, binding: HeaderBinding?
    ) -> Data {
        let trailer = promisingState ? StoreKeys.statePromise + (binding?.bytes ?? []) : []
        let bytes = unsafe key.withUnsafeBytes { raw in
            unsafe SecureBytes(count: raw.count + trailer.count) { destination in
                unsafe destination.copyMemory(from: raw)
                unsafe UnsafeMutableRawBufferPointer(rebasing: destination[raw.count...]).copyBytes(from: trailer)
            }
        }
        return SecretBox.seal(bytes, using: master).combined
    }

    /// The highest Argon2id cost a store is created or opened with: libsodium's `sensitive` preset.
    static var maximumKDFParameters: Argon2id.Parameters { .sensitive }

    /// Whether Argon2id `parameters` are within libsodium's minimums and ``maximumKDFParameters``.
    static func isAllowed(_ parameters: Argon2id.Parameters) -> Bool {
        let ceiling = maximumKDFParameters
        let floor = Argon2id.Parameters.minimum
        return (floor.opsLimit...ceiling.opsLimit).contains(parameters.opsLimit)
            && (floor.memoryLimit...ceiling.memoryLimit).contains(parameters.memoryLimit)
    }

    /// A 32-byte subkey: keyed BLAKE2b-256 of a fixed, labelled context under the master key.
    static func derive(from master: SecretBox.Key, label: String) throws(E3DBError) -> SecureBytes {
        let context = Array("E3DBStore v1 subkey \(label)".utf8)
        var hasher = try BLAKE2b(outputByteCount: 32, key: master.secureBytes)
        hasher.update(data: context)
        return hasher.finalizeSecret()
    }

    /// The key-encryption key for `credential`, with the store's KDF parameters.
    static func keyEncryptionKey(
        _ credential: StoreCredential, salt: Data, parameters: Argon2id.Parameters?
    ) throws(E3DBError) -> SecretBox.Key {
        switch credential {
        case .key(let bytes):
            guard bytes.count == SecretBox.keyByteCount else {
                throw E3DBError(
                    .invalidKeyLength, "a store key is 32 bytes",
                    context: .init(expected: SecretBox.keyByteCount, actual: bytes.count))
            }
            return try SecretBox.Key(bytes)
        case .passphrase(let passphrase):
            guard let parameters else {
                throw E3DBError(.wrongKey, "this store is opened with a raw key, not a passphrase")
            }
            guard passphrase.count > 0 else {
                throw E3DBError(.invalidParameter, "the passphrase is empty")
            }
            let derived = try unsafe passphrase.withUnsafeBytes { (raw) throws(E3DBError) in
                try unsafe Argon2id.deriveKey(
                    password: UnsafeRawBufferPointer(raw), salt: salt, outputByteCount: 32, parameters: parameters)
            }
            return try SecretBox.Key(derived)
        case .identity:
            throw E3DBError(
                .invalidParameter, "an identity opens the master key through its EAK, not a key-encryption key")
        }
    }

    /// The columns that store the master key under a new credential: a fresh salt, the KDF parameters (nil for a
    /// raw key) and the master key sealed under the credential's key.
    /// A store created for an identity has no passphrase or key: its KDF is `none` and its wrapped master key empty.
    struct CredentialWrapping {
        let salt: Data
        let parameters: Argon2id.Parameters?
        let wrappedMaster: Data
        var kdfName: String { parameters != nil ? "argon2id13" : wrappedMaster.isEmpty ? "none" : "raw" }
    }

    static func wrapping(
        _ master: SecretBox.Key, for credential: StoreCredential, kdfParameters: Argon2id.Parameters
    ) throws(E3DBError) -> CredentialWrapping {
        let salt = SecureRandom.bytes(count: Argon2id.saltByteCount)
        if case .identity = credential { return CredentialWrapping(salt: salt, parameters: nil, wrappedMaster: Data()) }
        var parameters: Argon2id.Parameters?
        if case .passphrase = credential {
            guard isAllowed(kdfParameters) else {
                throw E3DBError(
                    .invalidParameter,
                    "the Argon2id cost must be between libsodium's minimum and \(maximumKDFParameters.opsLimit) "
                        + "passes over \(maximumKDFParameters.memoryLimit >> 20) MiB (the sensitive preset)")
            }
            parameters = kdfParameters
        }
        let kek = try keyEncryptionKey(credential, salt: salt, parameters: parameters)
        return CredentialWrapping(salt: salt, parameters: parameters, wrappedMaster: wrap(master, under: kek))
    }

    /// Opens the master key of a store header with `credential` (wrongKey when it does not open).
    static func unlock(_ header: EncryptedStore.Header, with credential: StoreCredential) throws(E3DBError) -> StoreKeys
    {
        guard !header.wrappedMaster.isEmpty else {
            throw E3DBError(.wrongKey, "this store has no passphrase or key: it opens with an enrolled identity")
        }
        let kek = try keyEncryptionKey(credential, salt: header.salt, parameters: header.parameters)
        let master = try unwrap(
            header.wrappedMaster, under: kek,
            failure: E3DBError(.wrongKey, "the passphrase or key does not open this store"))
        return try StoreKeys(master: master, wrappedBoxKey: header.wrappedBoxKey)
    }

    /// Seals the master key under a key-encryption key.
    static func wrap(_ key: SecretBox.Key, under kek: SecretBox.Key) -> Data {
        SecretBox.seal(key.secureBytes, using: kek).combined
    }

    /// Opens a wrapped key; a MAC failure is `failure` (wrongKey for the master key, recordTampered elsewhere).
    static func unwrap(_ wrapped: Data, under kek: SecretBox.Key, failure: E3DBError) throws(E3DBError) -> SecretBox.Key
    {
        let box: SecretBox.SealedBox
        do {
            box = try SecretBox.SealedBox(combined: wrapped)
        } catch {
            throw E3DBError(.storeCorrupted, "a wrapped key is not a sealed box (\(wrapped.count) bytes)")
        }
        let opened: SecureBytes
        do {
            opened = try SecretBox.openSecret(box, using: kek)
        } catch {
            throw failure
        }
        guard opened.count == SecretBox.keyByteCount else {
            throw E3DBError(.storeCorrupted, "a wrapped key does not hold 32 bytes")
        }
        return try SecretBox.Key(opened)
    }
}
