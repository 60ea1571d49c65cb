import Dispatch
import E3DBFiles
import E3DBPrimitives
import Foundation
import Synchronization

/// A bounded hand-over of a response body from the download (an async task) to the file cipher (a blocking reader
/// on its own thread), so that the body is decrypted as it arrives.
///
/// The writer awaits room once `limit` bytes are waiting; the reader blocks until bytes arrive or the body ends.
/// Either side can stop the other: ``finish(failing:)`` ends the body (normally, or with the error the reader then
/// throws at once, dropping what was waiting), ``closeReading()`` makes later writes throw. Pieces are kept as the
/// transport delivered them: the only copy is the reader's, into the cipher's chunk buffer.
final class DownloadPipe: Sendable {
    /// The writer's error after the reader has stopped (its own error is the one that counts).
    struct ReaderClosed: Error {}

    private enum Ending {
        case complete
        case failed(E3DBError)
    }

    private struct State: Sendable {
        var pieces: [Data] = []
        var head = 0
        var offset = 0
        var buffered = 0
        var ending: Ending?
        var readerClosed = false
        var readerWaiting = false
        var writerWaiting: CheckedContinuation<Void, Never>?

        var stopped: Bool { readerClosed || ending != nil }

        /// Takes the waiting writer, if the reader wants it woken.
        mutating func takeWriter() -> CheckedContinuation<Void, Never>? {
            defer { writerWaiting = nil }
            return writerWaiting
        }

        /// Clears the reader's waiting flag; true if it was waiting (it must then be signalled once).
        mutating func takeReader() -> Bool {
            defer { readerWaiting = false }
            return readerWaiting
        }
    }

    private let state = Mutex(State())
    private let readable = DispatchSemaphore(value: 0)
    private let limit: Int

    /// A pipe that holds at most about `limit` bytes (plus one piece).
    init(limit: Int) { self.limit = limit }

    /// Appends a piece of the body, awaiting room first.
    /// - Throws: ``ReaderClosed`` once the reader stopped or the body was ended.
    func write(_ piece: Data) async throws {
        guard !piece.isEmpty else { return }
        while true {
            let (accepted, wake) = state.withLock { s -> (Bool?, Bool) in
                if s.stopped { return (nil, false) }
                guard s.buffered < limit else { return (false, false) }
                s.pieces.append(piece)
                s.buffered += piece.count
                return (true, s.takeReader())
            }
            if wake { readable.signal() }
            switch accepted {
            case true?: return
            case false?: await roomOrStop()
            case nil: throw ReaderClosed()
            }
        }
    }

    /// Returns when there is room, or the pipe stopped.
    private func roomOrStop() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.stopped || s.buffered < limit { return true }
                s.writerWaiting = waiter
                return false
            }
            if now { waiter.resume() }
        }
    }

    /// Ends the body: normally (`nil`: the reader gets what is waiting, then the end), or with `error`, which the
    /// reader throws at once. Only the first call counts.
    func finish(failing error: E3DBError?) {
        let (writer, wake) = state.withLock { s -> (CheckedContinuation<Void, Never>?, Bool) in
            guard s.ending == nil else { return (nil, false) }
            if let error {
                s.ending = .failed(error)
                s.pieces = []
                s.head = 0
                s.offset = 0
                s.buffered = 0
            } else {
                s.ending = .complete
            }
            return (s.takeWriter(), s.takeReader())
        }
        writer?.resume()
        if wake { readable.signal() }
    }

    /// The reader has stopped: drops what is waiting and makes the writer's next write throw.
    func closeReading() {
        let writer = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.readerClosed = true
            s.pieces = []
            s.head = 0
            s.offset = 0
            s.buffered = 0
            return s.takeWriter()
        }
        writer?.resume()
    }

    /// Copies up to `buffer.count` waiting bytes into `buffer`, blocking until some arrive.
    /// - Returns: the count, 0 at the end of the body.
    /// - Throws: the error the body was ended with.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(E3DBError) -> Int {
        while true {
            let (count, writer) = try state.withLock {
                s throws(E3DBError) -> (Int?, CheckedContinuation<Void, Never>?) in
                if case .failed(let error) = s.ending { throw error }
                guard s.head < s.pieces.count else {
                    if s.ending != nil { return (0, nil) }
                    s.readerWaiting = true
                    return (nil, nil)
                }
                let piece = s.pieces[s.head]
                let start = piece.startIndex + s.offset
                let n = min(buffer.count, piece.count - s.offset)
                unsafe piece.copyBytes(to: buffer, from: start..<(start + n))
                s.offset += n
                s.buffered -= n
                if s.offset == piece.count {
                    s.pieces[s.head] = Data()
                    s.head += 1
                    s.offset = 0
                    if s.head == s.pieces.count || s.head >= 64 {
                        s.pieces.removeFirst(s.head)
                        s.head = 0
                    }
                }
                return (n, s.buffered < limit ? s.takeWriter() : nil)
            }
            writer?.resume()
            if let count { return count }
            readable.wait()
        }
    }

    /// The pipe's bytes as the file cipher's input.
    struct Source: FileByteSource {
        let pipe: DownloadPipe
        /// The body's expected size (`FileMeta.size`), for progress.
        let totalByteCount: Int?

        mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
            let pipe = pipe
            return try unsafe buffer.withUnsafeMutableBytes { (bytes) throws(E3DBError) in
                try unsafe pipe.read(into: bytes)
            }
        }
    }
}
