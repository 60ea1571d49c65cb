import ArgumentParser
import E3DBCommandLine
import E3DBKit
import E3DBStore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A passphrase typed at the terminal without echo, read into wiped storage.
enum TerminalPrompt {
    static func secret(_ prompt: String) throws -> SecureBytes {
        // Only when standard input is a terminal: a script without --passphrase-file fails instead of waiting.
        let fd = unsafe isatty(STDIN_FILENO) == 1 ? open("/dev/tty", O_RDWR | O_CLOEXEC) : -1
        guard fd >= 0 else {
            throw CLIError("no --passphrase-file or --key-file, and no terminal to ask on", exitCode: ExitStatus.usage)
        }
        defer { close(fd) }
        var saved = termios()
        let isTerminal = unsafe tcgetattr(fd, &saved) == 0
        if isTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = unsafe tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer {
            if isTerminal {
                _ = unsafe tcsetattr(fd, TCSAFLUSH, &saved)
                _ = unsafe write(fd, "\n", 1)
            }
        }
        _ = unsafe prompt.withCString { unsafe write(fd, $0, strlen($0)) }
        let limit = 4096
        var length = 0
        var failed = false
        let buffer = unsafe SecureBytes(count: limit) { raw in
            guard let base = raw.baseAddress else { return }
            while length < limit {
                var byte: UInt8 = 0
                let n = FileIO.retryingInterrupted { unsafe read(fd, &byte, 1) }
                if n <= 0 {
                    failed = length == 0
                    return
                }
                if byte == 0x0A || byte == 0x0D { return }
                unsafe base.storeBytes(of: byte, toByteOffset: length, as: UInt8.self)
                length += 1
            }
        }
        if failed { throw CLIError("no passphrase was typed", exitCode: ExitStatus.usage) }
        return unsafe buffer.withUnsafeBytes { raw in
            unsafe SecureBytes(count: length) {
                unsafe $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[0..<length]))
            }
        }
    }
}
