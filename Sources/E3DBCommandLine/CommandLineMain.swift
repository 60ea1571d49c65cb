package import ArgumentParser
import E3DBPrimitives
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A command group run without a subcommand: a usage error (exit 64), not a silent help page with exit 0.
package protocol SubcommandGroup: ParsableCommand {}

extension SubcommandGroup {
    package func run() throws {
        let program = CommandLineMain.program
        let name = Self.configuration.commandName ?? program
        let full = name == program ? name : "\(program) \(name)"
        throw CLIError("missing subcommand for '\(full)'; see '\(full) --help'", exitCode: ExitStatus.usage)
    }
}

/// The single exit path of `e3dbkit` and `e3dbkit-server`: commands throw, and only this turns an error into a
/// message and a code.
package enum CommandLineMain {
    /// The name the program was started as (`e3dbkit`, `e3dbkit-server`), the prefix of its error lines.
    package static var program: String {
        CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "e3dbkit"
    }

    /// Parses the arguments as `Root`, runs the command and exits with its status.
    package static func run<Root: ParsableCommand>(_ root: Root.Type) async -> Never {
        // A closed pipe is a write error (EPIPE), not a death by signal in the middle of a write; the exit path
        // then ends quietly with status 141 (closedPipeStatus).
        signal(SIGPIPE, SIG_IGN)
        // A parent may have started us with terminating signals blocked (a dispatch worker thread's mask is
        // inherited through fork/exec): unblock them, so that Ctrl-C, SIGTERM and SIGHUP work; threads started
        // later inherit this mask.
        var terminating = sigset_t()
        unsafe sigemptyset(&terminating)
        for signo in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] { unsafe sigaddset(&terminating, signo) }
        unsafe pthread_sigmask(SIG_UNBLOCK, &terminating, nil)
        let status: Int32
        do {
            var command = try Root.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            status = finishStandardOutput()
        } catch {
            status = report(error, root: Root.self)
        }
        exit(status)
    }

    /// The status of a command whose standard output's reader went away (`e3dbkit … | head -1`): 128 + SIGPIPE,
    /// what a shell reports for a program that SIGPIPE ended, without a message.
    package static let closedPipeStatus: Int32 = 128 + SIGPIPE

    /// Whether standard output is a pipe or socket whose reading end is closed. The one test for a closed pipe,
    /// whichever write (`StandardOutput`, a file sink, `fflush`) met EPIPE.
    static func standardOutputReaderIsGone() -> Bool {
        var status = stat()
        guard unsafe fstat(STDOUT_FILENO, &status) == 0 else { return false }
        let kind = status.st_mode & S_IFMT
        guard kind == S_IFIFO || kind == S_IFSOCK else { return false }
        var descriptor = pollfd(fd: STDOUT_FILENO, events: Int16(POLLOUT), revents: 0)
        guard unsafe poll(&descriptor, 1, 0) == 1 else { return false }
        return descriptor.revents & Int16(POLLERR | POLLHUP) != 0
    }

    /// Flushes what `print` may have buffered; a failure there is a lost output (exit 1), or a closed pipe
    /// (``closedPipeStatus``, quietly).
    static func finishStandardOutput() -> Int32 {
        if fflush(nil) != 0 {
            if standardOutputReaderIsGone() { return closedPipeStatus }
            StandardError.line("\(program): cannot write to standard output: \(Descriptor.message(errno))")
            return ExitStatus.failure.rawValue
        }
        return 0
    }

    /// Prints one line for `error` on stderr (help and version go to stdout) and returns its exit code; when
    /// standard output's reader has gone (a write met EPIPE), nothing is printed and the status is
    /// ``closedPipeStatus``.
    static func report<Root: ParsableCommand>(_ error: any Error, root: Root.Type) -> Int32 {
        _ = fflush(nil)
        if standardOutputReaderIsGone() { return closedPipeStatus }
        switch error {
        case let error as CLIError:
            StandardError.line("\(program): \(error.message)")
            return error.exitCode.rawValue
        case let error as E3DBError:
            let cli = CLIError(error, while: "error")
            StandardError.line("\(program): \(cli.message)")
            return cli.exitCode.rawValue
        case let error as ExitCode:
            return error.rawValue
        default:
            let message = Root.fullMessage(for: error)
            let code = Root.exitCode(for: error)
            if code == .success {
                do {
                    try StandardOutput.line(message)
                } catch let error as CLIError {
                    StandardError.line("\(program): \(error.message)")
                    return error.exitCode.rawValue
                } catch {
                    return ExitStatus.failure.rawValue
                }
            } else if !message.isEmpty {
                StandardError.line(message)
            }
            return code.rawValue
        }
    }
}
