import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
import E3DBPrimitives
import Foundation
import Synchronization

/// How a store gives data keys to the fields of the records it writes.
public enum FieldKeyMode: Sendable, Hashable {
    /// A fresh data key for every field, sealed under the collection's access key: what every E3DB SDK writes
    /// (the default).
    case perField
    /// One data key per record, sealed once; every field carries the same `edk.edkN` and its own random nonce.
    /// Each field is still a complete `edk.edkN.ef.efN` quad, so the records decrypt like any other, in this
    /// library and in the SDKs (checked against Tozny's Python SDK); readers open the shared key once per record.
    case perRecord
}

extension EncryptedStore {
    /// How records written from now on by this instance get their data keys (``FieldKeyMode/perField`` unless
    /// changed; not stored in the file, so every open starts with the default). Reads handle both.
    public var fieldKeyMode: FieldKeyMode {
        get { keyMode.withLock { $0 } }
        set { keyMode.withLock { $0 = newValue } }
    }

    /// Encrypts a record's fields in the current ``fieldKeyMode``, with keys and nonces from ``reservoir``.
    func encryptFields(_ data: RecordData, accessKey: AccessKey) -> RecordData {
        switch fieldKeyMode {
        case .perField: FieldCipher.encrypt(data, accessKey: accessKey, reservoir: EncryptedStore.reservoir)
        case .perRecord:
            FieldCipher.encryptSharingDataKey(data, accessKey: accessKey, reservoir: EncryptedStore.reservoir)
        }
    }

    /// Keys and nonces of new records: OS-seeded ChaCha20 output, one system call per 64 KiB (shared, thread-safe).
    static let reservoir = RandomReservoir()

    /// A random (version 4) UUID from ``reservoir``: Foundation's `UUID()` reads the OS for each one.
    static func randomID() -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        unsafe bytes.withUnsafeMutableBytes { unsafe reservoir.fill($0) }
        return uuid(bytes, version: 4)
    }

    /// An RFC 9562 UUID of `version` from 16 bytes (random or a hash): the version and variant bits set.
    static func uuid(_ source: [UInt8], version: UInt8) -> UUID {
        var bytes = source
        bytes[6] = bytes[6] & 0x0F | version << 4
        bytes[8] = bytes[8] & 0x3F | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// Records per chunk of a large batch; batches smaller than this are encrypted on the calling thread.
    static let bulkChunkSize = 256

    /// Encrypts, binds and indexes new records (version 1), before any transaction opens: the rows returned, in
    /// order, are what the write transaction inserts, so that no crypto runs while it holds the writer. Each record
    /// gets a fresh id (or its entry of `ids`, one per record), its `EncryptedDocument` (fresh data key and nonces
    /// per field, from ``reservoir``), its binding MAC and its blind-index tokens for `indexes`.
    ///
    /// A batch of more than one chunk is encrypted on every processor, chunk by chunk; the first failure stops the
    /// chunks not started yet, and nothing runs on after this returns or throws.
    func encryptNewRecords(
        _ records: [(type: String, data: RecordData, plain: RecordData)], collection: String, keys: StoreKeys,
        access: (key: AccessKey, version: Int), indexes: [(index: BlindIndex, key: SecureBytes)],
        ids: [UUID]? = nil
    ) throws(E3DBError) -> [NewRecordRow] {
        let now = StoreTime.format(StoreTime.now())
        let storeID = self.storeID
        let encryptOne: @Sendable (Int) throws(E3DBError) -> NewRecordRow = { offset throws(E3DBError) in
            let record = records[offset]
            let id = ids?[offset] ?? EncryptedStore.randomID()
            let document = EncryptedDocument(
                meta: ClientMeta(writerID: storeID, userID: storeID, type: record.type, plain: record.plain),
                data: self.encryptFields(record.data, accessKey: access.key),
                recordSignature: nil)
            let bytes = document.jsonData()
            let mac = try self.bindingMAC(
                keys, collection: collection, id: id, version: 1, keyVersion: access.version, created: now,
                updated: now,
                document: bytes)
            var row = NewRecordRow(
                reference: RecordReference(id: id, version: 1), type: record.type, keyVersion: access.version,
                time: now,
                document: bytes, mac: mac, plain: record.plain, data: record.data)
            row.tokens = try BlindIndex.tokens(record.data, indexes: indexes)
            return row
        }
        let size = EncryptedStore.bulkChunkSize
        let chunkCount = (records.count + size - 1) / size
        guard chunkCount > 1, ProcessInfo.processInfo.activeProcessorCount > 1 else {
            var rows: [NewRecordRow] = []
            rows.reserveCapacity(records.count)
            for offset in records.indices { rows.append(try encryptOne(offset)) }
            return rows
        }
        let chunks = BulkChunks(count: chunkCount)
        // Returns once every chunk is done (or skipped after a failure).
        DispatchQueue.concurrentPerform(iterations: chunkCount) { c in
            guard !chunks.stopped.load(ordering: .relaxed) else { return }
            var rows: [NewRecordRow] = []
            rows.reserveCapacity(size)
            do throws(E3DBError) {
                for offset in (c * size)..<min(records.count, (c + 1) * size) {
                    rows.append(try encryptOne(offset))
                }
                chunks.rows.withLock { $0[c] = rows }
            } catch {
                chunks.failure.withLock { if $0 == nil { $0 = error } }
                chunks.stopped.store(true, ordering: .relaxed)
            }
        }
        if let error = chunks.failure.withLock({ $0 }) { throw error }
        let done = chunks.rows.withLock { slots in
            defer { slots = [] }
            return slots
        }
        var rows: [NewRecordRow] = []
        rows.reserveCapacity(records.count)
        for chunk in done {
            guard let chunk else { throw E3DBError(.cancelled, "encrypting the batch for \(collection) stopped") }
            rows.append(contentsOf: chunk)
        }
        return rows
    }
}

/// The chunks of a bulk write: encrypted rows by chunk, the first error, a stop flag.
final class BulkChunks: Sendable {
    let rows: Mutex<[[EncryptedStore.NewRecordRow]?]>
    let failure = Mutex<E3DBError?>(nil)
    let stopped = Atomic<Bool>(false)

    init(count: Int) {
        rows = Mutex(Array(repeating: nil, count: count))
    }
}
