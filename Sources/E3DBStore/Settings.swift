public import E3DBPrimitives
import E3DBRows
import Foundation
import GRDB

extension E3DBError.Code {
    /// A setting's value does not decode as the type asked for.
    public static let settingTypeMismatch = Self("settingTypeMismatch", category: .invalidArgument)
}

extension EncryptedStore {
    /// Stores `value` (any `Encodable`, as JSON) under `key`, sealed with a key derived from the master key; the
    /// key name is sealed with the value, so a value moved to another key does not open there.
    public func setSetting(_ value: some Encodable, forKey key: String) throws(E3DBError) {
        try perform(settingWrite(value, forKey: key))
    }

    /// The write transaction of `setSetting(_:forKey:)`, its value encoded and sealed.
    func settingWrite(_ value: some Encodable, forKey key: String) throws(E3DBError) -> StoreAccess<Void> {
        let keys = try currentKeys()
        var payload: Data
        do {
            payload = try JSONEncoders.storeSettings().encode(SettingEnvelope(key: key, value: AnyEncodable(value)))
        } catch {
            throw E3DBError(
                .invalidParameter, "the value of setting \(key) does not encode as JSON: \(error)",
                context: .init(item: key))
        }
        defer { payload.wipe() }
        let sealed = try EncryptedStore.sealSetting(SecureBytes(copying: payload), keys: keys)
        return .write("writing setting \(key)") { [self] db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO settings (key, sealed, updated) VALUES (?, ?, ?)",
                arguments: [key, sealed, StoreTime.format(StoreTime.now())])
            try commitState(db, keys, nil)
        }
    }

    /// The value stored under `key`, decoded as `type`, or nil when there is none.
    /// - Throws: `recordTampered` when the sealed value does not open under this key name,
    ///   `settingTypeMismatch` when it is not a `T`.
    public func setting<T: Decodable>(_ type: T.Type, forKey key: String) throws(E3DBError) -> T? {
        try decodedSetting(perform(settingRead(key)), as: type, forKey: key)
    }

    /// The read of `setting(_:forKey:)`: the sealed value, and the keys that were current before it.
    func settingRead(_ key: String) throws(E3DBError) -> StoreAccess<SealedSetting> {
        let keys = try currentKeys()
        return .read("reading setting \(key)") { db in
            let row = try Row.fetchOne(db, sql: "SELECT sealed FROM settings WHERE key = ?", arguments: [key])
            return SealedSetting(
                sealed: try row.map { row throws(E3DBError) in
                    try UntrustedRow(store: row, table: "settings").value("sealed", as: Data.self)
                }, keys: keys)
        }
    }

    /// A setting's sealed value, opened and decoded as `type`; nil when there is none.
    func decodedSetting<T: Decodable>(_ read: SealedSetting, as type: T.Type, forKey key: String) throws(E3DBError)
        -> T?
    {
        let keys = read.keys
        guard let sealed = read.sealed else { return nil }
        let opened = try EncryptedStore.openSetting(sealed, key: key, keys: keys)
        return try opened.withTemporaryData { (json) throws(E3DBError) -> T in
            do {
                return try JSONDecoder().decode(SettingEnvelope<T>.self, from: json).value
            } catch {
                throw E3DBError(.settingTypeMismatch, "setting \(key) is not a \(T.self)", context: .init(item: key))
            }
        }
    }

    /// Seals a setting's JSON envelope under the settings key derived from the master key.
    static func sealSetting(_ payload: SecureBytes, keys: StoreKeys) throws(E3DBError) -> Data {
        let sealingKey = try SecretBox.Key(StoreKeys.derive(from: keys.master, label: "settings"))
        return SecretBox.seal(payload, using: sealingKey).combined
    }

    /// Opens a sealed setting and checks that it names `key`.
    /// - Throws: `recordTampered` when it does not open, or was moved from another key.
    static func openSetting(_ sealed: Data, key: String, keys: StoreKeys) throws(E3DBError) -> SecureBytes {
        let sealingKey = try SecretBox.Key(StoreKeys.derive(from: keys.master, label: "settings"))
        let tampered = E3DBError(.recordTampered, "setting \(key) does not authenticate", context: .init(item: key))
        let box: SecretBox.SealedBox
        do { box = try SecretBox.SealedBox(combined: sealed) } catch { throw tampered }
        let opened: SecureBytes
        do { opened = try SecretBox.openSecret(box, using: sealingKey) } catch { throw tampered }
        // The key name first: a value moved from another key is tampering, whatever its type.
        let named = opened.withTemporaryData { json in try? JSONDecoder().decode(SettingName.self, from: json) }
        guard named?.key == key else { throw tampered }
        return opened
    }

    /// Removes the setting under `key` (nothing happens when there is none).
    public func removeSetting(forKey key: String) throws(E3DBError) {
        try perform(settingRemoval(key))
    }

    /// The write transaction of `removeSetting(forKey:)`.
    func settingRemoval(_ key: String) throws(E3DBError) -> StoreAccess<Void> {
        let keys = try currentKeys()
        return .write("removing setting \(key)") { [self] db in
            try db.execute(sql: "DELETE FROM settings WHERE key = ?", arguments: [key])
            try commitState(db, keys, nil)
        }
    }

    /// The names of the stored settings, sorted.
    public func settingKeys() throws(E3DBError) -> [String] {
        try perform(settingKeysRead())
    }

    /// The read of `settingKeys()`.
    func settingKeysRead() throws(E3DBError) -> StoreAccess<[String]> {
        _ = try currentKeys()  // a locked store refuses every call
        return .read("listing settings") { db in
            try UntrustedRow.storeColumn(db, "SELECT key FROM settings ORDER BY key", table: "settings", column: "key")
        }
    }

    /// `verify()`'s check of the settings: every row's sealed value opens under the settings key and names its key,
    /// one problem (`recordTampered` or `storeCorrupted`, item the key) per row that does not.
    func settingProblems() -> [E3DBError] {
        let rows: [Row]
        let keys: StoreKeys
        do {
            keys = try currentKeys()
            rows = try databaseCall("verifying the settings") {
                try pool.read { db in try Row.fetchAll(db, sql: "SELECT key, sealed FROM settings ORDER BY rowid") }
            }
        } catch {
            return [error]
        }
        var problems: [E3DBError] = []
        for fetched in rows {
            let row = UntrustedRow(store: fetched, table: "settings")
            do throws(E3DBError) {
                let key = try row.value("key", as: String.self)
                _ = try EncryptedStore.openSetting(try row.value("sealed", as: Data.self), key: key, keys: keys)
            } catch {
                problems.append(error)
            }
        }
        return problems
    }
}

/// A setting's sealed value (nil when there is none) and the keys that open it.
struct SealedSetting: Sendable {
    let sealed: Data?
    let keys: StoreKeys
}

struct SettingName: Decodable {
    let key: String
}

struct SettingEnvelope<Value> {
    let key: String
    let value: Value
}

extension SettingEnvelope: Encodable where Value: Encodable {}
extension SettingEnvelope: Decodable where Value: Decodable {}

struct AnyEncodable: Encodable {
    let base: any Encodable
    init(_ base: any Encodable) { self.base = base }
    func encode(to encoder: any Encoder) throws { try base.encode(to: encoder) }
}
