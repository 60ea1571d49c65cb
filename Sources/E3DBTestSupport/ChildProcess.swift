package import Foundation

/// Child processes for tests: the `e3dbkit` binary (``CLIRunner``), the server, the Python peers and system tools.
///
/// Every wait happens off Swift concurrency's cooperative pool (``offCooperativePool(_:)``): a test awaits a child
/// process, it never blocks one of the pool's threads on it. On a 2-core machine the pool has two threads, and tests
/// run in parallel, so one blocking wait would stall half of the run.
package enum ChildProcess {
    /// Runs `executable` with `arguments`, feeding `stdin`, and returns its status and output once it has exited.
    /// - Parameters:
    ///   - environment: extra variables, added to this process's environment.
    ///   - removingEnvironment: variables of this process's environment the child does not inherit (proxies, say).
    ///   - standardOutput: where the child's standard output goes instead of a pipe (`/dev/full`, a pipe whose
    ///     reading end is closed); the result's `stdout` is then empty.
    ///   - mergingStandardError: sends standard error into standard output (in the order written), for tools whose
    ///     report is both; the result's `stderr` is then empty.
    package static func run(
        _ executable: URL, _ arguments: [String], stdin: Data? = nil, in directory: URL? = nil,
        environment: [String: String] = [:], removingEnvironment: Set<String> = [],
        standardOutput: FileHandle? = nil, mergingStandardError: Bool = false
    ) async throws -> CLIRunner.Result {
        try await offCooperativePool {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            if let directory { process.currentDirectoryURL = directory }
            process.environment = childEnvironment(adding: environment, removing: removingEnvironment)
            let outPipe = Pipe()
            let errPipe = Pipe()
            let inPipe = Pipe()
            process.standardOutput = standardOutput ?? outPipe
            process.standardError = mergingStandardError ? (standardOutput ?? outPipe) : errPipe
            process.standardInput = inPipe
            try process.run()
            if standardOutput != nil { try? outPipe.fileHandleForWriting.close() }
            if mergingStandardError { try? errPipe.fileHandleForWriting.close() }
            // Both pipes are read at once (stderr on a thread of its own), so a large output on one cannot block
            // the child while this thread waits on the other; stdin is written after the readers run for the same
            // reason.
            let errData = ThreadResult { errPipe.fileHandleForReading.readDataToEndOfFile() }
            let writer = ThreadResult { () -> Void in
                if let stdin { try? writeInput(stdin, to: inPipe.fileHandleForWriting) }
                try? inPipe.fileHandleForWriting.close()
            }
            let outData = outPipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            writer.wait()
            return CLIRunner.Result(
                status: process.terminationStatus, uncaughtSignal: process.terminationReason == .uncaughtSignal,
                stdout: outData, stderr: String(decoding: errData.wait(), as: UTF8.self))
        }
    }

    /// The writing end of a pipe whose reading end is closed: a child writing to it gets EPIPE (or SIGPIPE).
    package static func brokenPipe() throws -> FileHandle {
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        return pipe.fileHandleForWriting
    }

    /// This process's environment with `added` set and `removed` unset; nil (inherit it) when both are empty.
    static func childEnvironment(adding added: [String: String], removing removed: Set<String>) -> [String: String]? {
        if added.isEmpty && removed.isEmpty { return nil }
        return ProcessInfo.processInfo.environment.filter { !removed.contains($0.key) }.merging(added) { $1 }
    }

    /// Writes `data` to a child's standard input, from a thread of test support's own, with SIGPIPE blocked on that
    /// thread: when the child has ended before reading all of it (killed, or done early), the write throws (EPIPE)
    /// instead of raising a SIGPIPE that would end the test process. SIGPIPE's disposition stays the default, which
    /// children inherit: a test that a command survives a closed output pipe must see the command's own handling.
    static func writeInput(_ data: Data, to handle: FileHandle) throws {
        var pipeSignal = sigset_t()
        unsafe sigemptyset(&pipeSignal)
        unsafe sigaddset(&pipeSignal, SIGPIPE)
        unsafe pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
        try handle.write(contentsOf: data)
    }

    /// The project's Python (`.venv`, made by scripts/python-env.sh) with the peers, or nil when it is missing.
    package static var projectPython: URL? {
        let venv = VectorLocations.projectRoot.appendingPathComponent(".venv/bin/python")
        return FileManager.default.isExecutableFile(atPath: venv.path) ? venv : nil
    }

    /// The project's Python with the peers, made or brought up to date first by scripts/python-env.sh (which prints
    /// its path; quick when it is up to date).
    /// - Throws: ``PythonEnvironmentFailure`` when the script fails (no python3, the peers cannot be installed).
    package static func makeProjectPython() async throws -> URL {
        let script = VectorLocations.projectRoot.appendingPathComponent("scripts/python-env.sh")
        let setup = try await run(URL(fileURLWithPath: "/bin/bash"), [script.path])
        let path = setup.stdoutText.split(separator: "\n").last.map(String.init) ?? ""
        guard setup.status == 0, FileManager.default.isExecutableFile(atPath: path) else {
            throw PythonEnvironmentFailure(
                description: "scripts/python-env.sh failed: \(setup.stdoutText)\(setup.stderr)")
        }
        return URL(fileURLWithPath: path)
    }

    package struct PythonEnvironmentFailure: Error, CustomStringConvertible {
        package let description: String
    }
}

/// A child process that keeps running while the test talks to it (a server, a writer killed mid-flight).
/// One of its output streams is read through ``readOutput(until:)``; its end is awaited with ``exit()``.
package final class RunningProcess: @unchecked Sendable {
    /// Which of the child's output streams ``readOutput(until:)`` reads.
    package enum Stream: Sendable { case standardOutput, standardError }

    private let process = Process()
    private let output = Pipe()
    private let input = Pipe()
    private let lock = NSLock()
    private var seen = Data()
    private var started = ContinuousClock.now
    private var runTime: Duration?

    /// Starts `executable`; `stdin` is written and, unless `keepingInputOpen`, closed at once.
    /// - Parameters:
    ///   - reading: the stream that ``readOutput(until:)`` reads; nil discards both.
    ///   - other: where the other stream goes (discarded by default).
    ///   - keepingInputOpen: leaves standard input open after `stdin`, for ``writeInput(_:)`` and ``closeInput()``
    ///     (a child interrupted while it still waits for input).
    package init(
        _ executable: URL, _ arguments: [String], stdin: Data? = nil, reading: Stream? = .standardOutput,
        other: FileHandle? = nil, environment: [String: String] = [:], keepingInputOpen: Bool = false
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ChildProcess.childEnvironment(adding: environment, removing: [])
        process.standardInput = input
        switch reading {
        case .standardOutput:
            process.standardOutput = output
            process.standardError = other ?? FileHandle.nullDevice
        case .standardError:
            process.standardError = output
            process.standardOutput = other ?? FileHandle.nullDevice
        case nil:
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try? output.fileHandleForWriting.close()
        }
        started = ContinuousClock.now
        try process.run()
        let writer = input.fileHandleForWriting
        // Written on a thread of its own: a large input must not block the caller while the child has not read it.
        // A child that ends before reading all of it makes the write fail, which is not an error here.
        Thread.detachNewThread {
            if let stdin { try? ChildProcess.writeInput(stdin, to: writer) }
            if !keepingInputOpen { try? writer.close() }
        }
    }

    /// Writes `data` to the child's standard input (opened with `keepingInputOpen`); returns once the child has
    /// taken all but at most a pipe buffer of it.
    package func writeInput(_ data: Data) async throws {
        try await offCooperativePool { [input] in try ChildProcess.writeInput(data, to: input.fileHandleForWriting) }
    }

    /// Closes the child's standard input (opened with `keepingInputOpen`): it reads the end of its input.
    package func closeInput() { try? input.fileHandleForWriting.close() }

    package var processIdentifier: Int32 { process.processIdentifier }
    package var isRunning: Bool { process.isRunning }

    /// Reads the stream until `done` holds for everything read so far, or the stream ends; returns all of it.
    package func readOutput(until done: @escaping @Sendable (Data) -> Bool = { _ in false }) async throws -> Data {
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
    package func signal(_ signal: Int32 = SIGKILL) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Whether a signal ended the process (then ``exit()`` returned the signal's number); read after ``exit()``.
    package var uncaughtSignal: Bool { !process.isRunning && process.terminationReason == .uncaughtSignal }

    /// Waits for the process to end and returns its exit status, or the signal's number (``uncaughtSignal``).
    @discardableResult
    package func exit() async throws -> Int32 {
        try await offCooperativePool { [self] in
            process.waitUntilExit()
            let ended = ContinuousClock.now
            lock.withLock { if runTime == nil { runTime = started.duration(to: ended) } }
            return process.terminationStatus
        }
    }

    /// How long the process ran, measured when ``exit()`` saw it end on a thread of its own (not when the awaiting
    /// task resumed, which parallel tests can delay); nil before.
    package var runningTime: Duration? { lock.withLock { runTime } }

    /// Sends `signal` `delay` from now unless the process has ended by then; returns whether it was still running (and
    /// got the signal). Timed by a dispatch timer, not by a task's sleep: parallel tests can keep the cooperative pool
    /// busy past the moment, and a kill at a random moment must come at that moment.
    package func signal(_ signal: Int32 = SIGKILL, after delay: Duration) async -> Bool {
        let nanoseconds = Int(delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in
                let running = process.isRunning
                if running { kill(process.processIdentifier, signal) }
                continuation.resume(returning: running)
            }
        }
    }

    /// Sends `signal` and runs `cleanup` once the process has ended, on a thread of its own, without waiting: for
    /// `defer` blocks, which cannot await.
    package func signal(_ signal: Int32, thenWhenEnded cleanup: @escaping @Sendable () -> Void) {
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
