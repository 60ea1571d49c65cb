import ArgumentParser
import E3DBKit
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `--ndjson`, `--fail-fast`, `--jobs` of `record encrypt` and `record decrypt`.
struct RecordBatchFlags: ParsableArguments {
    @Flag(help: "Batch mode: one record per input line (NDJSON), one output line per input line, in order.")
    var ndjson = false

    @Flag(help: "With --ndjson: stop after the first line that fails (lines before it are still written).")
    var failFast = false

    @Option(help: "With --ndjson: worker threads (default: the number of processors).")
    var jobs: Int?

    func validate() throws {
        if !ndjson, failFast || jobs != nil { throw ValidationError("--fail-fast and --jobs need --ndjson") }
        if let jobs, !(1...256).contains(jobs) { throw ValidationError("--jobs must be from 1 to 256") }
    }

    var options: RecordBatchOptions {
        RecordBatchOptions(jobs: jobs ?? max(1, ProcessInfo.processInfo.activeProcessorCount), failFast: failFast)
    }
}

/// The I/O of batch mode: input with read(2) from a file or stdin, output with checked write(2) to stdout, one
/// stderr line per failed line, and the exit code of the first failure's category.
enum RecordBatchCLI {
    /// Runs `processor` over `input` ('-' for stdin) and exits: 0 when every line succeeded, otherwise the exit
    /// code of the first failure's category; 1 when reading or writing fails.
    static func run(
        _ processor: some RecordLineProcessor, input: String, flags: RecordBatchFlags, doing: String
    ) throws {
        // A closed pipe must be an error we report, not a signal that kills the process.
        signal(SIGPIPE, SIG_IGN)
        let fd: Int32
        if input == "-" {
            fd = STDIN_FILENO
        } else {
            fd = open(input, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw CLIError("cannot read \(input): \(String(cString: strerror(errno)))", exitCode: ExitStatus.noInput)
            }
        }
        defer { if fd != STDIN_FILENO { close(fd) } }
        let summary: RecordBatchSummary
        do {
            summary = try RecordBatch.run(
                processor: processor, options: flags.options,
                read: { buffer throws(E3DBError) in try readSome(fd, into: buffer, name: input) },
                write: { bytes throws(E3DBError) in try writeAll(STDOUT_FILENO, bytes) },
                failed: { failure in
                    let cli = CLIError(failure.error, while: "line \(failure.line): \(doing)")
                    writeStderr("e3dbkit: \(cli.message)\n")
                })
        } catch {
            exitWithError(CLIError(error, while: doing))
        }
        if let first = summary.firstFailure {
            // Each failure already has its stderr line; output went out unbuffered with write(2).
            exit(CLIError.exitCode(for: first.error.code.category).rawValue)
        }
    }

    /// One read(2), retried on EINTR; 0 at the end of the input.
    static func readSome(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, name: String) throws(E3DBError) -> Int {
        while true {
            let n = read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            let what = name == "-" ? "stdin" : name
            throw E3DBError(.fileIOFailed, "cannot read \(what): \(String(cString: strerror(errno)))")
        }
    }

    /// write(2) until every byte is written, retried on EINTR; EPIPE, ENOSPC and the rest throw.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(E3DBError) {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
            if n > 0 {
                offset += n
            } else if n < 0, errno == EINTR {
                continue
            } else {
                let reason = n < 0 ? String(cString: strerror(errno)) : "nothing written"
                throw E3DBError(.fileIOFailed, "cannot write to stdout: \(reason)")
            }
        }
    }

    /// Best effort: a failing stderr has nowhere to report to.
    static func writeStderr(_ text: String) {
        var text = text
        let result = text.withUTF8 { utf8 in
            Result { () throws(E3DBError) in try writeAll(STDERR_FILENO, UnsafeRawBufferPointer(utf8)) }
        }
        _ = result
    }
}
