import ArgumentParser
import E3DBKit
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct E3DBKitCommand: CommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "e3dbkit",
        abstract: "End-to-end encrypted E3DB data: keys, records, documents, notes and files.",
        discussion: """
            Exit codes, the same for every command: 0 success; 1 an I/O or system failure (an output that cannot \
            be written or created, a full disk, a closed pipe); 2 a MAC, signature or checksum did not verify; 64 \
            a usage error; 65 malformed input; 66 an input that cannot be opened or read; 77 a store's or database's passphrase or \
            key is wrong.
            """,
        version: "0.1.0",
        subcommands: [
            FileCommand.self,
            HashCommand.self,
            CanonicalizeCommand.self,
            VectorsCommand.self,
            KeygenCommand.self,
            EAKCommand.self,
            RecordCommand.self,
            SignCommand.self,
            VerifyCommand.self,
            NoteCommand.self,
            StoreCommand.self,
            SQLiteCommand.self,
            ServerCommand.self,
            ClientCommand.self,
        ]
    )
}

/// A command group run without a subcommand: a usage error (exit 64), not a silent help page with exit 0.
protocol CommandGroup: ParsableCommand {}

extension CommandGroup {
    func run() throws {
        let name = Self.configuration.commandName ?? "e3dbkit"
        let full = name == "e3dbkit" ? name : "e3dbkit \(name)"
        throw CLIError("missing subcommand for '\(full)'; see '\(full) --help'", exitCode: ExitStatus.usage)
    }
}

/// The single exit path of the CLI: commands throw, and only this turns an error into a message and a code.
@main
enum CLIMain {
    static func main() async {
        // A closed pipe is a write error (EPIPE) that the commands report, not a silent death by signal.
        signal(SIGPIPE, SIG_IGN)
        // A parent may have started us with terminating signals blocked (a dispatch worker thread's mask is
        // inherited through fork/exec): unblock them, so that Ctrl-C, SIGTERM and SIGHUP work; threads started
        // later inherit this mask.
        var terminating = sigset_t()
        sigemptyset(&terminating)
        for signo in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] { sigaddset(&terminating, signo) }
        pthread_sigmask(SIG_UNBLOCK, &terminating, nil)
        let status: Int32
        do {
            var command = try E3DBKitCommand.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            status = finishStandardOutput()
        } catch {
            status = report(error)
        }
        exit(status)
    }

    /// Flushes what `print` may have buffered; a failure there is a lost output (exit 1).
    static func finishStandardOutput() -> Int32 {
        if fflush(nil) != 0 {
            StandardError.line("e3dbkit: cannot write to standard output: \(Descriptor.message(errno))")
            return ExitStatus.failure.rawValue
        }
        return 0
    }

    /// Prints one line for `error` on stderr (help and version go to stdout) and returns its exit code.
    static func report(_ error: any Error) -> Int32 {
        _ = fflush(nil)
        switch error {
        case let error as CLIError:
            StandardError.line("e3dbkit: \(error.message)")
            return error.exitCode.rawValue
        case let error as E3DBError:
            let cli = CLIError(error, while: "error")
            StandardError.line("e3dbkit: \(cli.message)")
            return cli.exitCode.rawValue
        case let error as ExitCode:
            return error.rawValue
        default:
            let message = E3DBKitCommand.fullMessage(for: error)
            let code = E3DBKitCommand.exitCode(for: error)
            if code == .success {
                do {
                    try StandardOutput.line(message)
                } catch let error as CLIError {
                    StandardError.line("e3dbkit: \(error.message)")
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
