import Dispatch
public import E3DBCanonicalJSON
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Batch mode for records: NDJSON in, NDJSON out, one output line per input line, in input order.

/// Options of a ``RecordBatch`` run.
public struct RecordBatchOptions: Sendable, Hashable {
    /// Worker threads (1: everything on the calling thread). Default 1.
    public var jobs: Int
    /// Stop after the first failed line (its error line is still written). Default false.
    public var failFast: Bool
    /// The longest accepted line (default `DocumentLimits.parse.maxInputBytes`).
    public var maxLineBytes: Int
    /// Lines handed to a worker at once (default 64).
    public var linesPerBatch: Int
    /// Input bytes in flight (read but not yet written) before reading waits for output (default 16 MiB; a
    /// single longer line is still accepted up to ``maxLineBytes``).
    public var maxBytesInFlight: Int

    /// Options.
    public init(
        jobs: Int = 1, failFast: Bool = false, maxLineBytes: Int = DocumentLimits.parse.maxInputBytes,
        linesPerBatch: Int = 64, maxBytesInFlight: Int = 16 << 20
    ) {
        self.jobs = jobs
        self.failFast = failFast
        self.maxLineBytes = maxLineBytes
        self.linesPerBatch = linesPerBatch
        self.maxBytesInFlight = maxBytesInFlight
    }
}

/// A line that failed.
public struct RecordBatchFailure: Sendable, Equatable {
    /// Its line number (from 1).
    public let line: Int
    /// Why.
    public let error: E3DBError
}

/// What a ``RecordBatch`` run did.
public struct RecordBatchSummary: Sendable, Equatable {
    /// Lines written (successes and error lines).
    public var lines = 0
    /// Lines that failed.
    public var failures = 0
    /// The first failure, if any.
    public var firstFailure: RecordBatchFailure?
    /// True when fail-fast stopped the run at a failed line: nothing after it was written and reading stopped.
    public var stoppedEarly = false

    /// An empty summary.
    public init() {}
}

/// Runs a ``RecordLineProcessor`` over NDJSON input: one output line per input line, in input order, with
/// `jobs` worker threads and bounded memory.
///
/// A line that fails becomes an error line `{"error":{"category":…,"code":…,"line":N,"message":…}}` in its place
/// (``errorLine(_:line:)``): the error's category and code, the line number and its non-secret message.
public enum RecordBatch {
    /// The error line for a failed input line (canonical JSON, without `\n`).
    /// - Parameters:
    ///   - error: why the line failed.
    ///   - line: its number.
    /// - Returns: the UTF-8 bytes.
    public static func errorLine(_ error: E3DBError, line: Int) -> [UInt8] {
        CanonicalJSON.serializedBytes(
            .object([
                "error": .object([
                    "category": .string(error.code.category.rawValue),
                    "code": .string(error.code.rawValue),
                    "line": .number(Double(line)),
                    "message": .string(error.message),
                ])
            ]))
    }

    /// Processes a whole input.
    /// - Parameters:
    ///   - processor: what to do with each line.
    ///   - options: workers, fail-fast and limits.
    ///   - read: fills the buffer with the next input bytes and returns their count, 0 at the end.
    ///   - write: writes output bytes (whole lines, each ending in `\n`), called on the calling thread, in order.
    ///   - failed: told about every failed line, in order, on the calling thread, before its error line is
    ///     written.
    /// - Returns: what was done.
    /// - Throws: the first error thrown by `read` or `write`; nothing is read or written after it.
    public static func run(
        processor: some RecordLineProcessor,
        options: RecordBatchOptions = RecordBatchOptions(),
        read: (UnsafeMutableRawBufferPointer) throws(E3DBError) -> Int,
        write: (UnsafeRawBufferPointer) throws(E3DBError) -> Void,
        failed: (RecordBatchFailure) -> Void = { _ in }
    ) throws(E3DBError) -> RecordBatchSummary {
        var runner = Runner(processor: processor, options: options)
        defer { runner.waitForAll() }
        var splitter = NDJSONLineSplitter(maxLineBytes: options.maxLineBytes)
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer { unsafe chunk.deallocate() }
        while !runner.summary.stoppedEarly {
            let count = try unsafe read(chunk)
            if count <= 0 { break }
            try unsafe splitter.append(UnsafeRawBufferPointer(rebasing: chunk[0..<min(count, chunk.count)])) {
                (line) throws(E3DBError) in try unsafe runner.add(line, write, failed)
            }
        }
        if !runner.summary.stoppedEarly {
            try splitter.finish { (line) throws(E3DBError) in try unsafe runner.add(line, write, failed) }
        }
        try unsafe runner.drainAll(write, failed)
        return runner.summary
    }

    /// Processes an input held in memory (tests, small inputs).
    /// - Returns: the output bytes and the summary.
    public static func process(
        _ input: [UInt8], processor: some RecordLineProcessor, options: RecordBatchOptions = RecordBatchOptions()
    ) -> (output: [UInt8], summary: RecordBatchSummary) {
        var offset = 0
        var output: [UInt8] = []
        let result = Result { () throws(E3DBError) -> RecordBatchSummary in
            try unsafe run(
                processor: processor, options: options,
                read: { buffer in
                    let n = min(buffer.count, input.count - offset)
                    unsafe input.withUnsafeBytes {
                        unsafe buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)]))
                    }
                    offset += n
                    return n
                },
                write: { unsafe output.append(contentsOf: $0) })
        }
        // Neither closure throws, so `run` cannot either.
        switch result {
        case .success(let summary): return (output, summary)
        case .failure: return (output, RecordBatchSummary())
        }
    }
}

/// A batch of lines and, once its worker is done, their output.
///
/// `@unchecked Sendable`: `lines` is set before the batch is handed to a worker queue; the worker alone writes
/// `output`, `ends` and `failures`, then signals `done`; the reading thread reads them only after `done.wait()`.
private final class LineBatch: @unchecked Sendable {
    let lines: [NDJSONLine]
    let inputBytes: Int
    var output: [UInt8] = []
    /// Output offset after each processed line.
    var ends: [Int] = []
    /// (index into `lines`, failure).
    var failures: [(Int, RecordBatchFailure)] = []
    let done = DispatchSemaphore(value: 0)

    init(lines: [NDJSONLine], inputBytes: Int) {
        self.lines = lines
        self.inputBytes = inputBytes
    }

    func work(_ processor: some RecordLineProcessor, failFast: Bool) {
        output.reserveCapacity(inputBytes + inputBytes / 2 + 64)
        for (index, line) in lines.enumerated() {
            let result: Result<[UInt8], E3DBError>
            switch line.content {
            case .success(let bytes): result = Result { () throws(E3DBError) in try processor.process(line: bytes) }
            case .failure(let error): result = .failure(error)
            }
            switch result {
            case .success(let bytes): output.append(contentsOf: bytes)
            case .failure(let error):
                output.append(contentsOf: RecordBatch.errorLine(error, line: line.number))
                failures.append((index, RecordBatchFailure(line: line.number, error: error)))
            }
            output.append(UInt8(ascii: "\n"))
            ends.append(output.count)
            if failFast, !failures.isEmpty { return }
        }
    }
}

/// The ordered pipeline behind ``RecordBatch/run(processor:options:read:write:failed:)``: batches go round-robin
/// to `jobs` serial queues and are written in submission order.
private struct Runner<Processor: RecordLineProcessor> {
    typealias Write = (UnsafeRawBufferPointer) throws(E3DBError) -> Void
    typealias Failed = (RecordBatchFailure) -> Void
    let processor: Processor
    let options: RecordBatchOptions
    let queues: [DispatchQueue]
    var summary = RecordBatchSummary()
    private var current: [NDJSONLine] = []
    private var currentBytes = 0
    private var pending: [LineBatch] = []
    private var pendingBytes = 0
    private var submitted = 0

    init(processor: Processor, options: RecordBatchOptions) {
        self.processor = processor
        self.options = options
        let jobs = max(1, options.jobs)
        queues = jobs == 1 ? [] : (0..<jobs).map { DispatchQueue(label: "e3dbkit.record-batch.\($0)") }
    }

    mutating func add(_ line: NDJSONLine, _ write: Write, _ failed: Failed) throws(E3DBError) {
        if summary.stoppedEarly { return }
        current.append(line)
        if case .success(let bytes) = line.content { currentBytes += bytes.count }
        if current.count >= max(1, options.linesPerBatch) || currentBytes >= (1 << 20) {
            try unsafe submit(write, failed)
        }
    }

    private mutating func submit(_ write: Write, _ failed: Failed) throws(E3DBError) {
        guard !current.isEmpty else { return }
        let batch = LineBatch(lines: current, inputBytes: currentBytes)
        current = []
        currentBytes = 0
        if queues.isEmpty {
            batch.work(processor, failFast: options.failFast)
            try unsafe emit(batch, write, failed)
            return
        }
        // Bounded: at most two batches per worker, and at most maxBytesInFlight of input unless that would
        // leave nothing in flight.
        while !pending.isEmpty,
            pending.count >= 2 * queues.count || pendingBytes + batch.inputBytes > options.maxBytesInFlight
        {
            try unsafe drainOne(write, failed)
            if summary.stoppedEarly { return }
        }
        let processor = self.processor
        let failFast = options.failFast
        queues[submitted % queues.count].async {
            batch.work(processor, failFast: failFast)
            batch.done.signal()
        }
        submitted += 1
        pending.append(batch)
        pendingBytes += batch.inputBytes
    }

    private mutating func drainOne(_ write: Write, _ failed: Failed) throws(E3DBError) {
        let batch = pending.removeFirst()
        pendingBytes -= batch.inputBytes
        batch.done.wait()
        try unsafe emit(batch, write, failed)
    }

    /// Submits what is left and writes every batch.
    mutating func drainAll(_ write: Write, _ failed: Failed) throws(E3DBError) {
        if !summary.stoppedEarly { try unsafe submit(write, failed) }
        while !pending.isEmpty {
            if summary.stoppedEarly {
                waitForAll()
                return
            }
            try unsafe drainOne(write, failed)
        }
    }

    /// Waits for batches still being processed (after a write error or fail-fast), without writing them, then
    /// for every worker queue to be idle, so that no worker still holds the processor (and its keys) or a batch
    /// once the run has returned.
    mutating func waitForAll() {
        for batch in pending { batch.done.wait() }
        pending = []
        pendingBytes = 0
        for queue in queues { queue.sync {} }
    }

    private mutating func emit(_ batch: LineBatch, _ write: Write, _ failed: Failed) throws(E3DBError) {
        for (index, failure) in batch.failures {
            summary.failures += 1
            if summary.firstFailure == nil { summary.firstFailure = failure }
            failed(failure)
            if options.failFast {
                try unsafe writeOutput(batch, upTo: batch.ends[index], write)
                summary.lines += index + 1
                summary.stoppedEarly = true
                return
            }
        }
        try unsafe writeOutput(batch, upTo: batch.output.count, write)
        summary.lines += batch.ends.count
    }

    private func writeOutput(_ batch: LineBatch, upTo end: Int, _ write: Write) throws(E3DBError) {
        guard end > 0 else { return }
        let result = unsafe batch.output.withUnsafeBytes { raw in
            Result { () throws(E3DBError) in try unsafe write(UnsafeRawBufferPointer(rebasing: raw[0..<end])) }
        }
        try result.get()
    }
}
