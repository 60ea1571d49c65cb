import ArgumentParser
import E3DBCommandLine
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
        let (fd, owned) = try CLIInput.open(input, what: "NDJSON input")
        defer { if owned { close(fd) } }
        let summary: RecordBatchSummary
        do {
            summary = try unsafe RecordBatch.run(
                processor: processor, options: flags.options,
                read: { buffer throws(E3DBError) in try unsafe readSome(fd, into: buffer, name: input) },
                write: { bytes throws(E3DBError) in try unsafe writeAll(STDOUT_FILENO, bytes) },
                failed: { failure in
                    let cli = CLIError(failure.error, while: "line \(failure.line): \(doing)")
                    StandardError.line("e3dbkit: \(cli.message)")
                })
        } catch {
            throw CLIError(error, while: doing)
        }
        if let first = summary.firstFailure {
            // Each failure already has its stderr line; output went out unbuffered with write(2).
            throw CLIError.exitCode(for: first.error.code.category)
        }
    }

    /// One read(2), retried on EINTR; 0 at the end of the input.
    static func readSome(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, name: String) throws(E3DBError) -> Int
    {
        do throws(FileIOError) {
            return try unsafe FileIO.read(fd, into: buffer)
        } catch {
            let what = name == "-" ? "stdin" : name
            throw E3DBError(.fileIOFailed, "cannot read \(what): \(error.reason)")
        }
    }

    /// Every byte to `fd` (`Descriptor.writeAll`); EPIPE, ENOSPC and the rest throw.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(E3DBError) {
        let failure = unsafe Descriptor.writeAll(fd, bytes)
        if failure != 0 {
            throw E3DBError(.fileIOFailed, "cannot write to standard output: \(Descriptor.message(failure))")
        }
    }
}
