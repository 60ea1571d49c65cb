public import E3DBFiles
public import E3DBPrimitives
public import Foundation

// The async forms of the calls whose work is not only database accesses: file bodies (the file cipher's reads,
// writes and fsyncs, its checksum queue), directory walks (verify, export, import, removing orphan bodies or stale
// database files) and Argon2id (a new credential, rekey). Each runs its one synchronous body on a thread of its own
// (`onOwnThread`), so that no thread of Swift concurrency's cooperative pool waits for it. A thread costs 55 to 330 µs
// to start and resume from (measured under load, docs/store.md), against the milliseconds of a put's fsyncs or a KDF,
// so there is no shared executor to size; what is bounded is how many such threads run at once (`blockingLimit`).
// Calls that are database accesses only are `StoreAccess`es or `StoreProcedure`s beside their synchronous forms
// (StoreProcedure.swift); the async setting calls are here, beside Settings.swift's synchronous ones.

extension EncryptedStore {
    /// How many blocking calls run at once: per store for its instance calls (`blockingPermits`), and once more for
    /// the static ones (`open`, `create`, `rekey`): E3DBPrimitives' `blockingThreadLimit`, twice the processors, at
    /// least 8. The work is mostly waiting for the disk (fsyncs of bodies, `files/` and the WAL), which more threads
    /// than cores overlap, and otherwise CPU (the file cipher, Argon2id), of which two threads a core keep every core
    /// busy without thousands of threads and their descriptors (a thread per call, uncapped, was 10,000 threads for
    /// 10,000 concurrent reads). The calls beyond it wait, suspended, for a permit.
    static let blockingLimit = blockingThreadLimit

    /// The permits of the static blocking calls (`open`, `create`, `rekey`).
    static let staticBlockingPermits = AsyncPermits<Never>(blockingLimit)

    /// `blocking(named:permits:_:)` with this store's permits.
    func blocking<T: Sendable>(
        named name: String, _ body: @escaping @Sendable (FileCancellation) throws(E3DBError) -> T
    ) async throws(E3DBError) -> T {
        try await Self.blocking(named: name, permits: blockingPermits, body)
    }

    /// Runs `body` on a thread of its own (see the top of this file), once a permit of `permits` is free: a caller
    /// beyond `blockingLimit` waits for one, suspended, and a caller whose task is cancelled before it gets one (or
    /// before the call) ends with `cancelled` and starts no thread. Cancelling the caller's task later sets the
    /// `FileCancellation` `body` is given: the file cipher checks it between chunks and stops with `cancelled`.
    /// Work that does not check it runs to its end; its result is then returned to the cancelled caller, which
    /// should drop it. Nothing is left behind: `body` is released on the thread before the caller resumes, the
    /// thread then ends, and the permit is given back.
    static func blocking<T: Sendable>(
        named name: String, permits: AsyncPermits<Never>,
        _ body: @escaping @Sendable (FileCancellation) throws(E3DBError) -> T
    ) async throws(E3DBError) -> T {
        let cancellation = FileCancellation()
        return try await onOwnThread(named: name, permits: permits, onCancel: { cancellation.cancel() }) {
            () throws(E3DBError) -> T in try body(cancellation)
        }
    }

    /// Throws `cancelled` once `cancellation` is set: what a long synchronous body run by `blocking(named:_:)`
    /// checks between its batches.
    static func stopIfCancelled(_ cancellation: FileCancellation?, _ what: String) throws(E3DBError) {
        if cancellation?.isCancelled == true { throw E3DBError(.cancelled, "\(what) was cancelled") }
    }

    /// `blocking(named:_:)` for a call that takes `value` (a byte source or sink) `inout`: the value goes to the
    /// thread and comes back, also when the call throws.
    func blocking<Value: Sendable, T: Sendable>(
        named name: String, _ value: inout Value,
        _ body: @escaping @Sendable (inout Value, FileCancellation) throws(E3DBError) -> T
    ) async throws(E3DBError) -> T {
        let given = value
        let (outcome, after) = try await blocking(named: name) { cancellation in
            var value = given
            let outcome = Result { () throws(E3DBError) -> T in try body(&value, cancellation) }
            return (outcome, value)
        }
        value = after
        return try outcome.get()
    }

    // MARK: Files

    /// `putFile(at:from:attachedTo:replace:)` for async callers: the encryption and the write run on a thread of
    /// their own. Cancelling the task stops the encryption between chunks with `cancelled` (nothing is stored);
    /// once the file's row is being committed, the call finishes.
    @discardableResult
    public func putFile<Source: FileByteSource & Sendable>(
        at path: String, from source: inout Source, attachedTo recordID: UUID? = nil, replace: Bool = false
    ) async throws(E3DBError) -> StoredFile {
        try await blocking(named: "e3dbkit-store-file", &source) { [self] source, cancellation throws(E3DBError) in
            try putFile(at: path, from: &source, attachedTo: recordID, replace: replace, cancellation: cancellation)
        }
    }

    /// `putFile(at:data:attachedTo:replace:)` for async callers; see the async `putFile(at:from:attachedTo:replace:)`.
    @discardableResult
    public func putFile(at path: String, data: Data, attachedTo recordID: UUID? = nil, replace: Bool = false)
        async throws(E3DBError) -> StoredFile
    {
        var source = MemoryByteSource(data)
        return try await putFile(at: path, from: &source, attachedTo: recordID, replace: replace)
    }

    /// `readFile(at:to:)` for async callers: the decryption runs on a thread of its own. Cancelling the task stops
    /// it between chunks with `cancelled`, the sink aborted.
    @discardableResult
    public func readFile<S: FileByteSink & Sendable>(at path: String, to sink: inout S) async throws(E3DBError)
        -> StoredFile
    {
        try await blocking(named: "e3dbkit-store-file", &sink) { [self] sink, cancellation throws(E3DBError) in
            try readFile(at: path, to: &sink, in: nil, cancellation: cancellation)
        }
    }

    /// `readFile(at:)` for async callers; see the async `readFile(at:to:)`.
    public func readFile(at path: String) async throws(E3DBError) -> Data {
        var sink = MemoryByteSink()
        try await readFile(at: path, to: &sink)
        return sink.committed ?? Data()
    }

    /// `readFile(at:range:to:)` for async callers: the decryption runs on a thread of its own, to the end of the
    /// range (a range read has no cancellation points; a cancelled caller drops its result).
    public func readFile<S: FileByteSink & Sendable>(at path: String, range: ClosedRange<Int>, to sink: inout S)
        async throws(E3DBError)
    {
        try await blocking(named: "e3dbkit-store-file", &sink) { [self] sink, _ throws(E3DBError) in
            try readFile(at: path, range: range, to: &sink)
        }
    }

    /// `readFile(at:range:)` for async callers; see the async `readFile(at:range:to:)`.
    public func readFile(at path: String, range: ClosedRange<Int>) async throws(E3DBError) -> Data {
        var sink = MemoryByteSink()
        try await readFile(at: path, range: range, to: &sink)
        return sink.committed ?? Data()
    }

    /// `removeOrphanFiles()` for async callers: the listing and unlinking of `files/` run on a thread of their own.
    @discardableResult
    public func removeOrphanFiles() async throws(E3DBError) -> [String] {
        try await blocking(named: "e3dbkit-store-files") { [self] _ throws(E3DBError) in try removeOrphanFiles() }
    }

    // MARK: Settings

    /// `setSetting(_:forKey:)` for async callers: the value is encoded and sealed on the caller's task, the write
    /// transaction awaited.
    public func setSetting(_ value: some Encodable, forKey key: String) async throws(E3DBError) {
        try await perform(settingWrite(value, forKey: key))
    }

    /// `setting(_:forKey:)` for async callers.
    public func setting<T: Decodable>(_ type: T.Type, forKey key: String) async throws(E3DBError) -> T? {
        try await decodedSetting(perform(settingRead(key)), as: type, forKey: key)
    }

    /// `removeSetting(forKey:)` for async callers.
    public func removeSetting(forKey key: String) async throws(E3DBError) {
        try await perform(settingRemoval(key))
    }

    /// `settingKeys()` for async callers.
    public func settingKeys() async throws(E3DBError) -> [String] {
        try await perform(settingKeysRead())
    }

    // MARK: Credentials

    /// `changeCredential(to:kdf:)` for async callers: Argon2id and the key header write run on a thread of their
    /// own (a cancelled caller's change still completes).
    public func changeCredential(to credential: StoreCredential, kdf: KDFPreset = .moderate) async throws(E3DBError) {
        try await changeCredential(to: credential, kdfParameters: kdf.parameters)
    }

    /// `changeCredential(to:kdfParameters:)` for async callers; see the async `changeCredential(to:kdf:)`.
    public func changeCredential(to credential: StoreCredential, kdfParameters: Argon2id.Parameters)
        async throws(E3DBError)
    {
        try await blocking(named: "e3dbkit-store-credential") { [self] _ throws(E3DBError) in
            try changeCredential(to: credential, kdfParameters: kdfParameters)
        }
    }

    /// `rekey(at:credential:newCredential:kdfParameters:batchSize:progress:)` for async callers: it runs on a thread
    /// of its own; cancelling the task stops it between batches with `cancelled` (resumable, as in the synchronous
    /// form).
    @discardableResult
    public static func rekey(
        at directory: URL, credential: StoreCredential, newCredential: StoreCredential? = nil,
        kdfParameters: Argon2id.Parameters? = nil, batchSize: Int = 500,
        progress: (@Sendable (RekeyProgress) -> Void)? = nil
    ) async throws(E3DBError) -> EncryptedStore {
        try await Self.blocking(named: "e3dbkit-store-rekey", permits: staticBlockingPermits) {
            cancellation throws(E3DBError) in
            try rekey(
                at: directory, credential: credential, newCredential: newCredential, kdfParameters: kdfParameters,
                batchSize: batchSize, progress: progress, cancellation: cancellation)
        }
    }

    /// `removeStaleDatabaseFiles()` for async callers: the directory listing and unlinking run on a thread of their
    /// own.
    @discardableResult
    public func removeStaleDatabaseFiles() async throws(E3DBError) -> [String] {
        try await blocking(named: "e3dbkit-store-files") { [self] _ throws(E3DBError) in
            try removeStaleDatabaseFiles()
        }
    }

    // MARK: Verification, export and import

    /// `verify()` for async callers: it runs on a thread of its own; cancelling the task stops it with `cancelled`
    /// before the next collection or page of records.
    public func verify() async throws(E3DBError) -> StoreVerificationReport {
        try await blocking(named: "e3dbkit-store-verify") { [self] cancellation throws(E3DBError) in
            try verify(cancellation: cancellation)
        }
    }

    /// `export(collection:to:readerPublicKey:)` for async callers: it runs on a thread of its own; cancelling the
    /// task stops it with `cancelled` before the next page of records, and nothing is published.
    @discardableResult
    public func export(collection: String, to directory: URL, readerPublicKey: Box.PublicKey) async throws(E3DBError)
        -> StoreExport
    {
        try await blocking(named: "e3dbkit-store-export") { [self] cancellation throws(E3DBError) in
            try export(
                collection: collection, to: directory, readerPublicKey: readerPublicKey, cancellation: cancellation)
        }
    }

    /// `importCollection(from:reader:as:)` for async callers: it runs on a thread of its own, to its end (a
    /// cancelled caller drops the result; the records are imported all the same).
    @discardableResult
    public func importCollection(from directory: URL, reader: Box.PrivateKey, as collection: String)
        async throws(E3DBError) -> [RecordReference]
    {
        try await blocking(named: "e3dbkit-store-import") { [self] _ throws(E3DBError) in
            try importCollection(from: directory, reader: reader, as: collection)
        }
    }
}
