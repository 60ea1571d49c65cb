import E3DBCanonicalJSON
public import E3DBPrimitives
import Foundation
import GRDB

// The store's authenticated state (docs/store.md, "Collection state and the write counter").
//
// Per collection, a `collection_state` row holds the number of its records and a digest of the set of its records:
// the XOR of one element per record, a keyed BLAKE2b-256 of the record's (collection, id, version, binding MAC)
// under a key derived from the master key. Someone without the master key cannot compute any element, so they cannot
// delete a record row, put a deleted one back or replace a row by an older version (whose MAC is its own) and keep
// the digest: the digest changes by the XOR of the elements that came and went, which is zero only with probability
// 2^-256 (record ids are unique, so no element occurs twice and cancels). XOR makes the digest independent of order
// and lets a write update it in O(1): XOR out the elements it removes, XOR in those it adds.
//
// Each state row is MACed with the store id, the collection, the count, the digest and the store's write counter at
// its last change. One `store_state` row holds the write counter (one for the store, one more in every write
// transaction) and the XOR of a keyed element of every collection state row's MAC (so a state row cannot be deleted,
// or taken from an older copy of the file, without the store row), MACed with the store id.

/// 32 bytes combined by XOR: a set digest, or an element of one.
struct StateDigest: Equatable, Sendable {
    private(set) var bytes: [UInt8]

    static let byteCount = 32
    static var zero: StateDigest { StateDigest(bytes: [UInt8](repeating: 0, count: byteCount)) }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    /// A keyed hash's output (32 bytes).
    fileprivate init(hash: Data) { bytes = Array(hash) }

    /// A stored digest (nil unless it is 32 bytes).
    init?(data: Data?) {
        guard let data, data.count == StateDigest.byteCount else { return nil }
        bytes = Array(data)
    }

    var data: Data { Data(bytes) }

    mutating func formXOR(_ other: StateDigest) {
        for index in 0..<StateDigest.byteCount { bytes[index] ^= other.bytes[index] }
    }
}

/// The keyed hashes of the store's state, under the subkey `collection-state` of the master key.
struct StateAuthenticator: Sendable {
    let storeID: String
    let key: SecureBytes

    init(storeID: String, keys: StoreKeys) {
        self.storeID = storeID
        self.key = keys.stateMACKey
    }

    /// Keyed BLAKE2b-256 of a JSON array of labelled fields, a newline, and trailing bytes of the caller's (fixed
    /// length or last, so the input is unambiguous).
    private func keyedHash(_ label: String, strings: [String], integers: [Int], tail: Data) throws(E3DBError) -> Data {
        // The canonical JSON array [label, strings…, integers…] (the one canonical serializer), then a newline.
        var head = CanonicalJSON.serializedBytes(
            .array([.string(label)] + strings.map(JSONValue.string) + integers.map { .number(Double($0)) }))
        head.append(0x0A)
        var hasher = try BLAKE2b(outputByteCount: StateDigest.byteCount, key: key)
        hasher.update(data: head)
        hasher.update(data: tail)
        return hasher.finalize()
    }

    /// The element of a record in its collection's digest.
    func recordElement(collection: String, id: String, version: Int, mac: Data) throws(E3DBError) -> StateDigest {
        StateDigest(
            hash: try keyedHash(
                "E3DBStore record element v1", strings: [storeID, collection, id], integers: [version], tail: mac))
    }

    /// The MAC of a collection's state row.
    func collectionMAC(collection: String, count: Int, digest: StateDigest, counter: Int) throws(E3DBError) -> Data {
        try keyedHash(
            "E3DBStore collection state v1", strings: [storeID, collection], integers: [count, counter],
            tail: digest.data)
    }

    /// The element of a collection state row (by its MAC) in the store row's digest.
    func collectionElement(collection: String, mac: Data) throws(E3DBError) -> StateDigest {
        StateDigest(
            hash: try keyedHash(
                "E3DBStore collection element v1", strings: [storeID, collection], integers: [], tail: mac))
    }

    /// The MAC of the store row.
    func storeMAC(counter: Int, statesDigest: StateDigest) throws(E3DBError) -> Data {
        try keyedHash("E3DBStore store state v1", strings: [storeID], integers: [counter], tail: statesDigest.data)
    }
}

/// What one write transaction does to one collection's records: how many it gains or loses, and the XOR of the
/// elements of the records it adds and removes. Applied by `commitState`.
struct CollectionStateChange {
    let collection: String
    let authenticator: StateAuthenticator
    /// The transaction creates the collection: its state row is inserted.
    var creating = false
    private(set) var countDelta = 0
    private(set) var digestDelta = StateDigest.zero

    init(collection: String, authenticator: StateAuthenticator, creating: Bool = false) {
        self.collection = collection
        self.authenticator = authenticator
        self.creating = creating
    }

    /// A record row (id as stored, lowercase) is added.
    mutating func add(id: String, version: Int, mac: Data) throws(E3DBError) {
        countDelta += 1
        digestDelta.formXOR(try authenticator.recordElement(collection: collection, id: id, version: version, mac: mac))
    }

    /// A record row is removed (or replaced: remove the old, add the new).
    mutating func remove(id: String, version: Int, mac: Data) throws(E3DBError) {
        countDelta -= 1
        digestDelta.formXOR(try authenticator.recordElement(collection: collection, id: id, version: version, mac: mac))
    }
}

/// A collection's state as stored, MAC checked.
struct CollectionStateRow {
    let count: Int
    let digest: StateDigest
    let counter: Int
    let mac: Data
}

extension EncryptedStore {
    func stateAuthenticator(_ keys: StoreKeys) -> StateAuthenticator {
        StateAuthenticator(storeID: storeIDText, keys: keys)
    }

    /// The error of a state row that is missing or does not authenticate (`storeTampered`, naming the collection, or
    /// `store` for the store row).
    static func stateTampered(_ item: String, _ what: String) -> E3DBError {
        E3DBError(
            .storeTampered, "\(item == "store" ? "the store" : "collection \(item)"): \(what)",
            context: .init(item: item))
    }

    /// The store row: write counter and collections digest, its MAC checked (`storeTampered` when missing or edited).
    func storeStateRow(_ db: Database, _ authenticator: StateAuthenticator) throws -> (
        counter: Int, statesDigest: StateDigest
    ) {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM store_state WHERE singleton = 1") else {
            throw EncryptedStore.stateTampered("store", "its state row (write counter) is missing")
        }
        guard let counter = Int.fromDatabaseValue(row["write_counter"] as DatabaseValue),
            let digest = StateDigest(data: Data.fromDatabaseValue(row["states_digest"] as DatabaseValue)),
            let mac = Data.fromDatabaseValue(row["mac"] as DatabaseValue),
            ConstantTime.equals(try authenticator.storeMAC(counter: counter, statesDigest: digest), mac)
        else {
            throw EncryptedStore.stateTampered("store", "its state row (write counter) does not authenticate")
        }
        return (counter, digest)
    }

    /// A collection's state row, its MAC checked (nil when there is none).
    func collectionStateRow(_ db: Database, _ authenticator: StateAuthenticator, collection: String) throws
        -> CollectionStateRow?
    {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT * FROM collection_state WHERE collection = ?", arguments: [collection])
        else { return nil }
        return try EncryptedStore.checkedCollectionState(row, authenticator, collection: collection)
    }

    static func checkedCollectionState(_ row: Row, _ authenticator: StateAuthenticator, collection: String) throws
        -> CollectionStateRow
    {
        guard let count = Int.fromDatabaseValue(row["record_count"] as DatabaseValue), count >= 0,
            let digest = StateDigest(data: Data.fromDatabaseValue(row["digest"] as DatabaseValue)),
            let counter = Int.fromDatabaseValue(row["write_counter"] as DatabaseValue),
            let mac = Data.fromDatabaseValue(row["mac"] as DatabaseValue),
            ConstantTime.equals(
                try authenticator.collectionMAC(collection: collection, count: count, digest: digest, counter: counter),
                mac)
        else {
            throw stateTampered(collection, "its state row (record count and digest) does not authenticate")
        }
        return CollectionStateRow(count: count, digest: digest, counter: counter, mac: mac)
    }

    /// The one way a write transaction changes the store's authenticated state, inside the caller's transaction:
    /// applies `change` (if any) to its collection's state row (inserted when the change creates the collection),
    /// advances the store's write counter by one and MACs both rows again. Both rows are authenticated before they
    /// are changed, so a write never re-MACs an edited state.
    func commitState(_ db: Database, _ keys: StoreKeys, _ change: CollectionStateChange?) throws {
        let authenticator = stateAuthenticator(keys)
        var (counter, statesDigest) = try storeStateRow(db, authenticator)
        counter += 1
        if let change {
            let collection = change.collection
            var count = change.countDelta
            var digest = change.digestDelta
            if change.creating {
                guard try collectionStateRow(db, authenticator, collection: collection) == nil else {
                    throw EncryptedStore.stateTampered(collection, "a new collection already has a state row")
                }
            } else {
                guard let old = try collectionStateRow(db, authenticator, collection: collection) else {
                    throw EncryptedStore.stateTampered(collection, "its state row (record count and digest) is missing")
                }
                count += old.count
                digest.formXOR(old.digest)
                statesDigest.formXOR(try authenticator.collectionElement(collection: collection, mac: old.mac))
            }
            guard count >= 0 else {
                throw EncryptedStore.stateTampered(collection, "a write removes more records than its state counts")
            }
            let mac = try authenticator.collectionMAC(
                collection: collection, count: count, digest: digest, counter: counter)
            statesDigest.formXOR(try authenticator.collectionElement(collection: collection, mac: mac))
            try db.execute(
                sql: """
                    INSERT INTO collection_state (collection, record_count, digest, write_counter, mac)
                    VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (collection) DO UPDATE SET record_count = excluded.record_count,
                        digest = excluded.digest, write_counter = excluded.write_counter, mac = excluded.mac
                    """,
                arguments: [collection, count, digest.data, counter, mac])
        }
        try db.execute(
            sql: "UPDATE store_state SET write_counter = ?, states_digest = ?, mac = ? WHERE singleton = 1",
            arguments: [
                counter, statesDigest.data, try authenticator.storeMAC(counter: counter, statesDigest: statesDigest),
            ])
    }

    /// Runs `body`, which writes `collection`'s records (inside the caller's transaction) and notes each record row
    /// it adds or removes in its argument, then commits the change with `commitState`: every transaction
    /// that writes records goes through here.
    func writingRecords<T>(
        _ db: Database, _ keys: StoreKeys, collection: String, creating: Bool = false,
        _ body: (inout CollectionStateChange) throws -> T
    ) throws -> T {
        var change = CollectionStateChange(
            collection: collection, authenticator: stateAuthenticator(keys), creating: creating)
        let result = try body(&change)
        try commitState(db, keys, change)
        return result
    }

    /// The count and digest that `collection`'s record rows give: over the rows whose binding MAC authenticates them
    /// in place (a row that does not is `verify`'s `recordTampered`, and counts for nothing here).
    func computedState(_ db: Database, _ keys: StoreKeys, collection: String) throws -> (
        count: Int, digest: StateDigest
    ) {
        let authenticator = stateAuthenticator(keys)
        var count = 0
        var digest = StateDigest.zero
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT seq, id, version, key_version, created, updated, document, mac FROM records WHERE collection = ?
                """, arguments: [collection])
        while let row = try rows.next() {
            let stored = StoredRow(row)
            guard let id = stored.id, UUID(uuidString: id)?.lowercasedString == id,
                let version = stored.version, let keyVersion = stored.keyVersion, let created = stored.created,
                let updated = stored.updated, let document = stored.document, let mac = stored.mac,
                try bindingMACMatches(
                    keys, mac, collection: collection, idText: id, version: version, keyVersion: keyVersion,
                    created: created, updated: updated, document: document)
            else { continue }
            count += 1
            digest.formXOR(try authenticator.recordElement(collection: collection, id: id, version: version, mac: mac))
        }
        return (count, digest)
    }

    /// The state rows' problems, O(collections): the store row missing or not authenticating, a collection without a
    /// state row, a state row that does not authenticate or belongs to no collection, and a set of state rows that
    /// is not the one the store row authenticates (a row deleted, or put back from an older copy). Each is
    /// `storeTampered` naming the collection (or `store`). Also returns the authenticated write counter.
    func stateRowProblems(_ db: Database, _ keys: StoreKeys) throws -> (counter: Int?, problems: [E3DBError]) {
        let authenticator = stateAuthenticator(keys)
        var problems: [E3DBError] = []
        var store: (counter: Int, statesDigest: StateDigest)?
        do {
            store = try storeStateRow(db, authenticator)
        } catch let error as E3DBError {
            problems.append(error)
        }
        var names = Set(try String.fetchAll(db, sql: "SELECT name FROM collections"))
        var statesDigest = StateDigest.zero
        for row in try Row.fetchAll(db, sql: "SELECT * FROM collection_state ORDER BY collection") {
            let collection = String.fromDatabaseValue(row["collection"] as DatabaseValue) ?? ""
            guard names.remove(collection) != nil else {
                problems.append(EncryptedStore.stateTampered(collection, "it has a state row but no collection row"))
                continue
            }
            do {
                let state = try EncryptedStore.checkedCollectionState(row, authenticator, collection: collection)
                statesDigest.formXOR(try authenticator.collectionElement(collection: collection, mac: state.mac))
                if let store, state.counter > store.counter {
                    problems.append(
                        EncryptedStore.stateTampered(
                            collection, "its state row is newer than the store's write counter"))
                }
            } catch let error as E3DBError {
                problems.append(error)
            }
        }
        for collection in names.sorted() {
            problems.append(
                EncryptedStore.stateTampered(collection, "its state row (record count and digest) is missing"))
        }
        if let store, problems.isEmpty, store.statesDigest != statesDigest {
            problems.append(
                EncryptedStore.stateTampered(
                    "store", "its collections' state rows are not the set it authenticates (a row deleted or restored)")
            )
        }
        return (store?.counter, problems)
    }

    /// At open and unlock, O(collections): checks the state rows (the first problem is thrown) and the write counter
    /// against the caller's minimum (`storeRolledBack`). A store without any state row gets it here, computed from
    /// its authenticated records in one transaction, when it is being created or was made before the state existed
    /// (its sealed box key makes no state promise); any other is `storeTampered` (its state rows were deleted).
    /// - Returns: the authenticated write counter.
    @discardableResult
    func checkState(_ keys: StoreKeys, minimumWriteCounter: Int?, creating: Bool = false) throws(E3DBError) -> Int {
        let counter = try databaseCall("checking the store's state") { () throws -> Int in
            // A read, unless the store has no state yet (then one write transaction, which checks again).
            func check(_ db: Database) throws -> Int? {
                let stateRows = try Int.fetchOne(
                    db, sql: "SELECT (SELECT COUNT(*) FROM store_state) + (SELECT COUNT(*) FROM collection_state)")
                if stateRows == 0 { return nil }
                let (counter, problems) = try stateRowProblems(db, keys)
                if let problem = problems.first { throw problem }
                guard let counter else { throw EncryptedStore.stateTampered("store", "its state row is missing") }
                return counter
            }
            if let counter = try pool.read(check) { return counter }
            return try pool.write { db -> Int in
                if let counter = try check(db) { return counter }
                // No state rows: a store made before the collection state, unless its sealed box key promises
                // one (then they were deleted, to hide what the state would report).
                guard creating || !keys.promisesState else {
                    throw EncryptedStore.stateTampered(
                        "store", "its state rows are missing, though its keys say it has an authenticated state")
                }
                try buildState(db, keys)
                return try check(db) ?? 0
            }
        }
        if !keys.promisesState || keys.binding == nil {
            // A store upgraded to the collection state or to the header binding: its sealed box key now promises a
            // state and names the database file (after the state is written and the file authenticated under the
            // master key, so a crash in between only repeats this).
            let promised = StoreKeys.wrap(keys.boxKey, under: keys.master, binding: headerBinding)
            try databaseCall("sealing the store's box key with its state promise and database file") {
                try keyHeader.write { db in
                    try db.execute(sql: "UPDATE store_meta SET wrapped_box_private = ?", arguments: [promised])
                }
            }
        }
        if let minimumWriteCounter, counter < minimumWriteCounter {
            throw E3DBError(
                .storeRolledBack,
                "the store's write counter is \(counter), lower than the \(minimumWriteCounter) expected: this is an "
                    + "older copy of the store",
                context: .init(expected: minimumWriteCounter, actual: counter))
        }
        return counter
    }

    /// Writes the state of a store that has none: every collection's count and digest from its authenticated
    /// records, and the store row with write counter `counter` + 1 (inside the caller's transaction).
    func buildState(_ db: Database, _ keys: StoreKeys, counter: Int = 0) throws {
        let authenticator = stateAuthenticator(keys)
        var statesDigest = StateDigest.zero
        for collection in try String.fetchAll(db, sql: "SELECT name FROM collections ORDER BY name") {
            let (count, digest) = try computedState(db, keys, collection: collection)
            let mac = try authenticator.collectionMAC(collection: collection, count: count, digest: digest, counter: 0)
            try db.execute(
                sql: """
                    INSERT INTO collection_state (collection, record_count, digest, write_counter, mac)
                    VALUES (?, ?, ?, 0, ?)
                    """, arguments: [collection, count, digest.data, mac])
            statesDigest.formXOR(try authenticator.collectionElement(collection: collection, mac: mac))
        }
        try db.execute(
            sql: "INSERT INTO store_state (singleton, write_counter, states_digest, mac) VALUES (1, ?, ?, ?)",
            arguments: [
                counter, statesDigest.data, try authenticator.storeMAC(counter: counter, statesDigest: statesDigest),
            ])
        try commitState(db, keys, nil)
    }

    /// The count and digest problems of `collection` for `verify`: its rows against its authenticated state (one
    /// `storeTampered` naming the collection), in one read transaction; a file too damaged to read them all is one
    /// problem about the database.
    func collectionStateProblems(_ collection: String, _ keys: StoreKeys) -> [E3DBError] {
        do {
            return try databaseCall("verifying the state of \(collection)") { () throws -> [E3DBError] in
                try pool.read { db -> [E3DBError] in
                    guard let state = try? collectionStateRow(db, stateAuthenticator(keys), collection: collection)
                    else { return [] }  // Reported by stateRowProblems.
                    let (count, digest) = try computedState(db, keys, collection: collection)
                    if count != state.count {
                        return [
                            EncryptedStore.stateTampered(
                                collection,
                                "it has \(count) authenticated records where its state counts \(state.count) "
                                    + "(a record row deleted or put back)")
                        ]
                    }
                    if digest != state.digest {
                        return [
                            EncryptedStore.stateTampered(
                                collection,
                                "its records are not the set its state authenticates (an older version of a row "
                                    + "restored, or a row deleted and another put back)")
                        ]
                    }
                    return []
                }
            }
        } catch {
            // A damaged page: the records that cannot be read are reported by id, the damage under `database`.
            return [
                onDatabase(E3DBError(error.code, "collection \(collection): \(error.message)", context: error.context))
            ]
        }
    }

    /// The store's write counter: one more in every write transaction, authenticated under the master key. An app
    /// that keeps the value it last saw outside the file (keychain, server) and passes it to
    /// `open(at:credential:expectedMinimumWriteCounter:)` detects an older copy of the whole store.
    /// - Throws: `storeLocked`, `storeTampered` when the counter does not authenticate.
    public var writeCounter: Int {
        get throws(E3DBError) { try run(readingWriteCounter()) }
    }

    /// `writeCounter` for async callers: the read goes through GRDB's async access (the caller's task is suspended,
    /// no thread is held).
    /// - Throws: `storeLocked`, `storeTampered` when the counter does not authenticate.
    public func writeCounter() async throws(E3DBError) -> Int {
        try await run(readingWriteCounter())
    }

    /// The read of `writeCounter`, one access.
    private func readingWriteCounter() throws(E3DBError) -> SingleAccess<Int> {
        let keys = try currentKeys()
        return SingleAccess(
            access: .read("reading the write counter") { [self] db in
                try storeStateRow(db, stateAuthenticator(keys)).counter
            })
    }
}
