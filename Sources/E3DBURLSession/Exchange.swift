import E3DBClient
import E3DBFiles
import E3DBPrimitives
import Foundation
import HTTPTypes
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One task's response as the session delegate delivers it and the transport consumes it: the response, then the
/// body's pieces in order (up to `URLSessionTransport.memoryAhead` bytes in memory, the rest in an unlinked
/// temporary file), then the end. The delegate never waits; the consumer awaits the next event.
final class Exchange: Sendable {
    struct State {
        var response: HTTPURLResponse?
        var pieces: [Data] = []
        var inMemory = 0
        var spill: Spill?
        /// Bytes handed to the consumer.
        var delivered = 0
        /// nil while the task runs; then success, or the error it ended with.
        var end: Result<Void, any Error>?
        /// Whether the task completed (the delegate's last call came): it must not be cancelled then, since
        /// swift-corelibs-foundation stops the process when a completed task is cancelled (its task registry no
        /// longer knows the task).
        var completed = false
        var waiter: CheckedContinuation<Void, Never>?

        /// Whether the consumer has something to take (or learn).
        var ready: Bool { !pieces.isEmpty || (spill?.unread ?? 0) > 0 || end != nil }
    }

    /// The file where the body goes while the consumer lags.
    struct Spill {
        let writer: FileHandle
        let reader: FileHandle
        var written = 0
        var read = 0
        var unread: Int { written - read }

        init() throws {
            let directory = FileManager.default.temporaryDirectory.path
            let path = URL(fileURLWithPath: directory).appendingPathComponent("e3dbkit-urlsession-\(UUID().uuidString)")
                .path
            guard
                FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
                let writer = FileHandle(forWritingAtPath: path)
            else { throw E3DBError(.fileIOFailed, "cannot create the download's spill file in \(directory)") }
            defer { try? FileManager.default.removeItem(atPath: path) }
            guard let reader = FileHandle(forReadingAtPath: path) else {
                try? writer.close()
                throw E3DBError(.fileIOFailed, "cannot read the download's spill file in \(directory)")
            }
            self.writer = writer
            self.reader = reader
        }

        func close() {
            try? writer.close()
            try? reader.close()
        }
    }

    let state = Mutex(State())
    let task: URLSessionTask
    /// Where the most bytes held in memory at once is noted.
    unowned let owner: SessionOwner

    init(task: URLSessionTask, owner: SessionOwner) {
        self.task = task
        self.owner = owner
    }

    // MARK: the delegate's side

    func received(_ response: URLResponse) {
        signal { state in
            if let http = response as? HTTPURLResponse {
                state.response = http
            } else if state.end == nil {
                state.end = .failure(URLError(.badServerResponse))
            }
        }
    }

    /// Appends a piece: to memory while the consumer is less than `URLSessionTransport.memoryAhead` behind and
    /// nothing waits in the file, else to the file.
    func append(_ data: Data) {
        var failed = false
        signal { state in
            guard state.end == nil, !data.isEmpty else { return }
            if state.spill == nil, state.inMemory + data.count <= URLSessionTransport.memoryAhead {
                state.pieces.append(data)
                state.inMemory += data.count
                owner.bufferedHighWater.max(state.inMemory)
                return
            }
            do {
                if state.spill == nil { state.spill = try Spill() }
                try state.spill?.writer.write(contentsOf: data)
                state.spill?.written += data.count
            } catch {
                state.end = .failure(error)
                failed = true
            }
        }
        if failed { cancelTask() }
    }

    /// The task completed without an error.
    func finish(_ response: URLResponse?) {
        signal { state in
            state.completed = true
            if state.response == nil, let http = response as? HTTPURLResponse { state.response = http }
            if state.end == nil {
                state.end = state.response == nil ? .failure(URLError(.badServerResponse)) : .success(())
            }
        }
    }

    /// Ends the exchange with `error` (the first end wins) and cancels the task unless it completed.
    func fail(_ error: any Error) {
        signal { state in if state.end == nil { state.end = .failure(error) } }
        cancelTask()
    }

    /// The task completed with `error` (the delegate's last call): ends the exchange with it, cancelling nothing.
    func failed(_ error: any Error) {
        signal { state in
            state.completed = true
            if state.end == nil { state.end = .failure(error) }
        }
    }

    /// Cancels the task if it has not completed.
    private func cancelTask() {
        if !state.withLock({ $0.completed }) { task.cancel() }
    }

    /// Drops what is left (the spill file closes, and so disappears).
    func close() {
        state.withLock { state in
            state.spill?.close()
            state.spill = nil
            state.pieces = []
        }
    }

    private func signal(_ change: (inout State) -> Void) {
        let waiter = state.withLock { state in
            change(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    // MARK: the consumer's side

    /// Awaits until the consumer has something to take.
    private func wait(until ready: @escaping @Sendable (State) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if ready(state) { return true }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// The response's status and headers, once they arrived.
    func response() async throws -> HTTPURLResponse {
        while true {
            let (response, end) = state.withLock { ($0.response, $0.end) }
            if let response { return response }
            if case .failure(let error) = end { throw error }
            await wait { $0.response != nil || $0.end != nil }
        }
    }

    /// The next piece of the body, or nil at its end; throws what ended the task. A piece from the spill file (up to
    /// `spillBatch` bytes) is read on a thread of file work (`FileWork`'s I/O steps), never on the caller's cooperative thread.
    func next() async throws -> Data? {
        enum Step {
            case taken(Result<Data?, any Error>)
            case readSpill(FileHandle, Int)
            case wait
        }
        while true {
            let step: Step = state.withLock { state in
                if !state.pieces.isEmpty {
                    let piece = state.pieces.removeFirst()
                    state.inMemory -= piece.count
                    state.delivered += piece.count
                    return .taken(.success(piece))
                }
                if let spill = state.spill, spill.unread > 0 {
                    return .readSpill(spill.reader, min(spill.unread, Self.spillBatch))
                }
                switch state.end {
                case .success: return .taken(.success(nil))
                case .failure(let error): return .taken(.failure(error))
                case nil: return .wait
                }
            }
            switch step {
            case .taken(let outcome): return try outcome.get()
            case .readSpill(let reader, let count):
                // Only this consumer reads the spill file, through its own descriptor: the delegate may append
                // meanwhile, and the bytes read were written before.
                let piece = try await FileWork.run("download", kind: .io) { _ throws -> Data in
                    let piece = try reader.read(upToCount: count) ?? Data()
                    guard !piece.isEmpty else {
                        throw E3DBError(.fileIOFailed, "the download's spill file ended early")
                    }
                    return piece
                }
                state.withLock { state in
                    state.spill?.read += piece.count
                    state.delivered += piece.count
                }
                return piece
            case .wait: await wait { $0.ready }
            }
        }
    }

    /// The most bytes one read of the spill file takes (one thread of file work each).
    static let spillBatch = 1 << 20

    /// The whole body (any status), refused once it exceeds `limit` bytes, which ends the transfer.
    func collect(_ response: HTTPURLResponse, upTo limit: Int) async throws -> (Data, HTTPResponse) {
        let head = try URLSessionTransport.head(response)
        var body = Data()
        while let piece = try await next() {
            guard body.count + piece.count <= limit else {
                fail(CancellationError())
                throw E3DBError(
                    .invalidResponse, "the response body is larger than the \(limit) bytes accepted",
                    context: .init(expected: limit))
            }
            body.append(piece)
        }
        try checkComplete(response)
        return (body, head)
    }

    /// Throws when fewer bytes came than the response's `Content-Length` (unless URLSession decoded a
    /// `Content-Encoding`, when the length is the encoded one).
    func checkComplete(_ response: HTTPURLResponse) throws {
        let expected = response.expectedContentLength
        let delivered = state.withLock { $0.delivered }
        let encoded = (response.value(forHTTPHeaderField: "Content-Encoding") ?? "identity") != "identity"
        if expected >= 0, !encoded, delivered < expected { throw URLError(.networkConnectionLost) }
    }
}

extension Atomic where Value == Int {
    /// Raises the value to `candidate` when it is larger.
    func max(_ candidate: Int) {
        var current = load(ordering: .relaxed)
        while candidate > current {
            let (exchanged, original) = compareExchange(
                expected: current, desired: candidate, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}
