public import Foundation

/// Child processes for tests: the `e3dbkit` binary (``CLIRunner``) and the Python peers. Blocking: from async tests,
/// call through ``offCooperativePool(_:)``.
public enum ChildProcess {
    /// Runs `executable` with `arguments`, feeding `stdin`; waits for it to exit and returns its status and output.
    public static func run(
        _ executable: URL, _ arguments: [String], stdin: Data? = nil, in directory: URL? = nil
    ) throws -> CLIRunner.Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        let outPipe = Pipe(), errPipe = Pipe(), inPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        process.standardInput = inPipe
        try process.run()
        if let stdin { inPipe.fileHandleForWriting.write(stdin) }
        try inPipe.fileHandleForWriting.close()
        // Read both pipes concurrently so a large output on one cannot block the child.
        nonisolated(unsafe) var errData = Data()
        let errReader = Thread { errData = errPipe.fileHandleForReading.readDataToEndOfFile() }
        errReader.start()
        let outData = outPipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errReader.isFinished { usleep(1000) }
        return CLIRunner.Result(status: process.terminationStatus, stdout: outData, stderr: String(decoding: errData, as: UTF8.self))
    }

    /// The project's Python (`.venv`, made by scripts/python-env.sh) with the peers, or nil when it is missing.
    public static var projectPython: URL? {
        let venv = VectorLocations.projectRoot.appendingPathComponent(".venv/bin/python")
        return FileManager.default.isExecutableFile(atPath: venv.path) ? venv : nil
    }
}
