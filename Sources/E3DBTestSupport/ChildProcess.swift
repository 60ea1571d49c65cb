public import Foundation

/// Child processes for tests: the `e3dbkit` binary (``CLIRunner``), the server, the Python peers and system tools.
///
/// Every wait happens off Swift concurrency's cooperative pool (``offCooperativePool(_:)``): a test awaits a child
/// process, it never blocks one of the pool's threads on it. On a 2-core machine the pool has two threads, and tests
/// run in parallel, so one blocking wait would stall half of the run.
public enum ChildProcess {
    /// Runs `executable` with `arguments`, feeding `stdin`, and returns its status and output once it has exited.
    /// - Parameters:
    ///   - environment: extra variables, added to this process's environment.
    public static func run(
        _ executable: URL, _ arguments: [String], stdin: Data? = nil, in directory: URL? = nil,
        environment: [String: String] = [:]
    ) async throws -> CLIRunner.Result {
        try await offCooperativePool {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            if let directory { process.currentDirectoryURL = directory }
            if !environment.isEmpty {
                process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            }
            let outPipe = Pipe(), errPipe = Pipe(), inPipe = Pipe()
            process.standardOutput = outPipe
            process.standardError = errPipe
            process.standardInput = inPipe
            try process.run()
            // Both pipes are read at once (stderr on a thread of its own), so a large output on one cannot block
            // the child while this thread waits on the other; stdin is written after the readers run for the same
            // reason.
            let errData = ThreadResult { errPipe.fileHandleForReading.readDataToEndOfFile() }
            let writer = ThreadResult { () -> Void in
                if let stdin { inPipe.fileHandleForWriting.write(stdin) }
                try? inPipe.fileHandleForWriting.close()
            }
            let outData = outPipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            writer.wait()
            return CLIRunner.Result(
                status: process.terminationStatus, stdout: outData,
                stderr: String(decoding: errData.wait(), as: UTF8.self))
        }
    }

    /// The project's Python (`.venv`, made by scripts/python-env.sh) with the peers, or nil when it is missing.
    public static var projectPython: URL? {
        let venv = VectorLocations.projectRoot.appendingPathComponent(".venv/bin/python")
        return FileManager.default.isExecutableFile(atPath: venv.path) ? venv : nil
    }
}

/// A child process that keeps running while the test talks to it (a server, a writer killed mid-flight).
/// One of its output streams is read through ``readOutput(until:)``; its end is awaited with ``exit()``.
public final class RunningProcess: @unchecked Sendable {
    /// Which of the child's output streams ``readOutput(until:)`` reads.
    public enum Stream: Sendable { case standardOutput, standardError }

    private let process = Process()
    private let output = Pipe()
    private let lock = NSLock()
    private var seen = Data()

    /// Starts `executable`; `stdin` is written and closed at once.
    /// - Parameters:
    ///   - reading: the stream that ``readOutput(until:)`` reads.
    ///   - other: where the other stream goes (discarded by default).
    public init(
        _ executable: URL, _ arguments: [String], stdin: Data? = nil, reading: Stream = .standardOutput,
        other: FileHandle? = nil, environment: [String: String] = [:]
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let input = Pipe()
        process.standardInput = input
        switch reading {
        case .standardOutput:
            process.standardOutput = output
            process.standardError = other ?? FileHandle.nullDevice
        case .standardError:
            process.standardError = output
            process.standardOutput = other ?? FileHandle.nullDevice
        }
        try process.run()
        let writer = input.fileHandleForWriting
        // Written on a thread of its own: a large input must not block the caller while the child has not read it.
        Thread.detachNewThread {
            if let stdin { writer.write(stdin) }
            try? writer.close()
        }
    }

    public var processIdentifier: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// Reads the stream until `done` holds for everything read so far, or the stream ends; returns all of it.
    public func readOutput(until done: @escaping @Sendable (Data) -> Bool = { _ in false }) async throws -> Data {
        try await offCooperativePool { [self] in
            while true {
                let current = lock.withLock { seen }
                if done(current) { return current }
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { return current }
                lock.withLock { seen.append(chunk) }
            }
        }
    }

    /// Sends `signal` (SIGKILL by default) if the process still runs. Does not wait.
    public func signal(_ signal: Int32 = SIGKILL) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Waits for the process to end and returns its termination status.
    @discardableResult
    public func exit() async throws -> Int32 {
        try await offCooperativePool { [process] in
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    /// Sends `signal` and runs `cleanup` once the process has ended, on a thread of its own, without waiting: for
    /// `defer` blocks, which cannot await.
    public func signal(_ signal: Int32, thenWhenEnded cleanup: @escaping @Sendable () -> Void) {
        self.signal(signal)
        Thread.detachNewThread { [process] in
            process.waitUntilExit()
            cleanup()
        }
    }
}

/// The result of a closure run on a thread of its own, for blocking work done beside other blocking work.
private final class ThreadResult<T>: @unchecked Sendable {
    private let done = NSCondition()
    private var value: T?

    init(_ body: @escaping @Sendable () -> T) {
        Thread.detachNewThread { [self] in
            let result = body()
            done.lock()
            value = result
            done.signal()
            done.unlock()
        }
    }

    func wait() -> T {
        done.lock()
        defer { done.unlock() }
        while true {
            if let value { return value }
            done.wait()
        }
    }
}
