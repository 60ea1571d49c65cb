import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
import Foundation
import Synchronization

extension EncryptedStore {
    /// Keys and nonces of new records: OS-seeded ChaCha20 output, one system call per 64 KiB (shared, thread-safe).
    static let reservoir = RandomReservoir()

    /// A random (version 4) UUID from ``reservoir``: Foundation's `UUID()` reads the OS for each one.
    static func randomID() -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        bytes.withUnsafeMutableBytes { reservoir.fill($0) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// Batches smaller than this are encrypted on the calling thread (a thread hop costs more than it saves).
    static let parallelBatchThreshold = 32

    /// Encrypts, binds and indexes new records (version 1) before the write transaction, split across the
    /// processors: each record gets a fresh id, its `EncryptedDocument` (fresh data key and nonces per field, from
    /// ``reservoir``), its binding MAC and its blind-index tokens for `indexes`.
    func encryptNewRecords(
        _ records: [(type: String, data: RecordData, plain: RecordData)], collection: String, keys: StoreKeys,
        access: (key: AccessKey, version: Int), indexes: [(index: BlindIndex, key: SecureBytes)]
    ) throws(E3DBError) -> [NewRecordRow] {
        let now = StoreTime.format(StoreTime.now())
        let encryptOne: @Sendable ((type: String, data: RecordData, plain: RecordData)) throws(E3DBError) -> NewRecordRow = {
            record throws(E3DBError) in
            let id = EncryptedStore.randomID()
            let document = EncryptedDocument(
                meta: ClientMeta(writerID: self.storeID, userID: self.storeID, type: record.type, plain: record.plain),
                data: FieldCipher.encrypt(record.data, accessKey: access.key, reservoir: EncryptedStore.reservoir),
                recordSignature: nil)
            let bytes = document.jsonData()
            let mac = try self.bindingMAC(
                keys, collection: collection, id: id, version: 1, keyVersion: access.version, created: now, updated: now,
                document: bytes)
            var row = NewRecordRow(
                reference: RecordReference(id: id, version: 1), type: record.type, keyVersion: access.version, time: now,
                document: bytes, mac: mac, plain: record.plain, data: record.data)
            row.tokens = try BlindIndex.tokens(record.data, indexes: indexes)
            return row
        }
        let jobs = min(ProcessInfo.processInfo.activeProcessorCount, records.count / EncryptedStore.parallelBatchThreshold)
        guard jobs > 1 else {
            var rows: [NewRecordRow] = []
            rows.reserveCapacity(records.count)
            for record in records { rows.append(try encryptOne(record)) }
            return rows
        }
        // Each job encrypts one contiguous slice into its own array; the first error wins.
        let slices = Mutex([[NewRecordRow]](repeating: [], count: jobs))
        let failure = Mutex<E3DBError?>(nil)
        let per = (records.count + jobs - 1) / jobs
        DispatchQueue.concurrentPerform(iterations: jobs) { job in
            var rows: [NewRecordRow] = []
            rows.reserveCapacity(per)
            do throws(E3DBError) {
                for record in records[(job * per)..<min(records.count, (job + 1) * per)] {
                    if failure.withLock({ $0 != nil }) { return }
                    rows.append(try encryptOne(record))
                }
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
                return
            }
            slices.withLock { $0[job] = rows }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return slices.withLock { $0.flatMap { $0 } }
    }
}
