import GRDB

extension EncryptedStore {
    /// The records of `query` now and after every committed change that can affect them (GRDB's
    /// `ValueObservation` on the tables the query reads), decrypted. Each element is the whole result; it comes
    /// after the transaction commits, and results equal to the previous one are skipped. Ends with an error when
    /// a record does not authenticate or the store is locked.
    ///
    /// - Important: as with GRDB, only changes made through this `EncryptedStore` instance are observed; another
    ///   instance or process writing the same store is not seen until this one writes.
    ///
    /// Keep observed queries small (a `limit`, `plain` or type conditions): each change reads the whole result
    /// again, although the record cache spares the decryption of records that did not change.
    public func observe(_ query: RecordQuery) -> AsyncThrowingStream<[StoredRecord], any Error> {
        let statement: (String, StatementArguments)
        do {
            statement = try querySQL(query, after: nil, count: query.fields.isEmpty ? query.limit : nil)
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
        let observation = ValueObservation.tracking { db -> [StoredRow] in
            try Row.fetchAll(db, sql: statement.0, arguments: statement.1).map(StoredRow.init)
        }.removeDuplicates()
        let values = observation.values(in: pool)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await rows in values {
                        var records: [StoredRecord] = []
                        for row in rows {
                            let record = try decode(row, collection: query.collection)
                            if query.fields.allSatisfy({ $0.matches(record.data) }) { records.append(record) }
                            if let limit = query.limit, records.count >= limit { break }
                        }
                        continuation.yield(records)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
