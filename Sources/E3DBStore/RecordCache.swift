import Foundation

/// A bounded cache of decrypted records keyed by their binding MAC, evicting the least recently used.
///
/// Keyed by MAC rather than by id: a record is served from the cache only after its row's MAC has been checked,
/// and any change to the row (an update, a rotation, tampering) changes the MAC, so a stale entry can never be
/// returned. Decryption, the expensive part of a read, is what the cache saves.
struct RecordCache {
    let capacity: Int
    private var entries: [Data: (record: StoredRecord, tick: UInt64)] = [:]
    private var tick: UInt64 = 0

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    mutating func value(for mac: Data) -> StoredRecord? {
        guard let entry = entries[mac] else { return nil }
        tick += 1
        entries[mac] = (entry.record, tick)
        return entry.record
    }

    mutating func insert(_ record: StoredRecord, for mac: Data) {
        guard capacity > 0 else { return }
        tick += 1
        entries[mac] = (record, tick)
        if entries.count > capacity {
            // Evict the oldest quarter at once: one sort per capacity/4 inserts.
            let excess = entries.count - capacity * 3 / 4
            for key in entries.sorted(by: { $0.value.tick < $1.value.tick }).prefix(excess).map(\.key) {
                entries.removeValue(forKey: key)
            }
        }
    }

    mutating func removeAll() { entries.removeAll() }
}
