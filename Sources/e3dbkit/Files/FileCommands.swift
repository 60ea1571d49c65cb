import ArgumentParser
import E3DBCommandLine
import E3DBKit
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `e3dbkit file ...`: E3DB file format v3 (streaming, constant memory).
struct FileCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "file",
        abstract: "Encrypt, decrypt and checksum E3DB files (format v3, 64 KiB secretstream chunks).",
        subcommands: [FileEncryptCommand.self, FileDecryptCommand.self, FileChecksumCommand.self]
    )
}

/// Options shared by encrypt and decrypt.
struct FileCipherOptions: ParsableArguments {
    @Option(
        name: .customLong("access-key-file"), help: "File holding the access key as base64url (as the SDKs store it).")
    var accessKeyFile: String

    @Flag(name: [.short, .long], help: "No progress bar and no summary on stderr.")
    var quiet = false

    @Argument(help: "Input file, or - for standard input.")
    var input: String

    @Argument(
        help: "Output file, or - for standard output. Written to an unnamed or temporary file and renamed on success.")
    var output: String

    func accessKey() throws -> AccessKey {
        try DocumentCLI.accessKey(accessKeyFile)
    }
}

/// Maps file-layer errors to exit codes (2 for any authentication or integrity failure), as every command does.
func fileError(_ error: E3DBError, _ doing: String) -> CLIError { CLIError(error, while: doing) }

/// A progress bar on stderr, drawn only when stderr is a terminal, at most ten times a second.
final class ProgressBar: @unchecked Sendable {
    private let enabled: Bool
    private let label: String
    private var last = 0.0
    private var drawn = false

    init(label: String, quiet: Bool) {
        self.label = label
        self.enabled = !quiet && isatty(2) == 1
    }

    var callback: (@Sendable (FileProgress) -> Void)? {
        guard enabled else { return nil }
        return { [self] progress in self.update(progress) }
    }

    private func update(_ p: FileProgress) {
        let now = Date().timeIntervalSince1970
        let done = p.totalBytes.map { p.bytesProcessed >= $0 } ?? false
        guard now - last >= 0.1 || done else { return }
        last = now
        var line = "\r\(label) "
        if let fraction = p.fractionCompleted {
            let width = 30
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
            line += String(format: "%3d%% ", Int(fraction * 100))
        }
        line += ByteSize.text(p.bytesProcessed)
        if let total = p.totalBytes { line += " / " + ByteSize.text(total) }
        StandardError.write(line)
        drawn = true
    }

    func end() {
        if drawn { StandardError.write("\n") }
    }
}

/// A private, already-unlinked temporary file for ciphertext read from a pipe, so that `file decrypt … -` can
/// authenticate the whole file before it writes the first plaintext byte. Plaintext never goes to disk.
///
/// Linux: `O_TMPFILE` in `$TMPDIR` (or /tmp), which never has a name; elsewhere (or when the file system lacks
/// `O_TMPFILE`): `mkstemp` and an immediate `unlink`. Mode 0600 either way.
final class CiphertextSpool {
    let fd: Int32

    init() throws {
        let directory = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        let anonymous = UnnamedFile.open(inDirectory: directory, readable: true)
        if anonymous >= 0 {
            fd = anonymous
            return
        }
        var template = Array((directory + "/e3dbkit-spool-XXXXXX").utf8CString)
        let named = unsafe template.withUnsafeMutableBufferPointer { buffer in
            unsafe buffer.baseAddress.map { unsafe mkstemp($0) } ?? -1
        }
        guard named >= 0 else {
            throw CLIError(
                "cannot create a spool file in \(directory): \(Descriptor.message(errno))",
                exitCode: ExitStatus.failure)
        }
        let path = String(decoding: template.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        unsafe unlink(path)
        fd = named
    }

    deinit {
        _ = ftruncate(fd, 0)
        close(fd)
    }

    func rewind() throws {
        guard lseek(fd, 0, SEEK_SET) == 0 else {
            throw CLIError("cannot rewind the spool file: \(Descriptor.message(errno))")
        }
    }
}

/// Passes through what `inner` reads and copies it to `copy` (the spool).
struct TeeByteSource: FileByteSource {
    var inner: FileDescriptorSource
    var copy: FileDescriptorSink

    mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
        let n = try inner.read(into: &buffer)
        if n > 0 { try copy.write(buffer.bytes.extracting(first: n)) }
        return n
    }
}

/// True when `fd` is a regular file whose offset can be moved (so it can be read twice).
func isSeekableFile(_ fd: Int32) -> Bool {
    var info = stat()
    return unsafe fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && lseek(fd, 0, SEEK_CUR) >= 0
}

/// A plaintext byte range `START-END` (END included) or `START-` (to the end), as in an HTTP `Range` header.
struct PlaintextRange: ExpressibleByArgument {
    let start: Int
    let end: Int?

    init?(argument: String) {
        let parts = argument.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[0].allSatisfy(\.isASCII), parts[1].allSatisfy(\.isASCII),
            parts[0].allSatisfy(\.isNumber), parts[1].allSatisfy(\.isNumber), let start = Int(parts[0])
        else { return nil }
        if parts[1].isEmpty {
            end = nil
        } else {
            guard let end = Int(parts[1]), end >= start else { return nil }
            self.end = end
        }
        self.start = start
    }

    static var defaultValueDescription: String { "START-END" }
}

struct FileEncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt a file as an E3DB v3 file under a fresh data key sealed with the access key.",
        discussion: """
            Prints the E3DB FileMeta values (checksum = padded base64 MD5 of the encrypted file, size) and the \
            encrypted file's BLAKE2b-512 (what b2sum prints) on stdout, or on stderr when OUT is -; OUT is \
            committed only once they are printed. Memory stays constant for any size.
            """
    )

    @OptionGroup var options: FileCipherOptions

    func run() throws {
        try execute()
    }

    func execute() throws {
        FileSignals.install()
        let key = try options.accessKey()
        let bar = ProgressBar(label: "encrypt", quiet: options.quiet)
        let cipherOptions = FileEncryptionOptions(progress: bar.callback)
        let result: FileEncryptionResult
        var pending: CommitAfterSummarySink?
        do {
            let input = try openInput(options.input)
            defer { if input != 0 { close(input) } }
            var source = FileDescriptorSource(fileDescriptor: input)
            if options.output == "-" {
                var sink = FileDescriptorSink(fileDescriptor: 1)
                result = try E3DBFileCipher.encrypt(from: &source, to: &sink, accessKey: key, options: cipherOptions)
            } else {
                var sink = CommitAfterSummarySink(try createOutput(options.output))
                result = try E3DBFileCipher.encrypt(from: &source, to: &sink, accessKey: key, options: cipherOptions)
                pending = sink
            }
        } catch let error as E3DBError {
            bar.end()
            throw fileError(error, "encrypting \(options.input)")
        }
        bar.end()
        let summary = """
            checksum: \(result.checksums.md5Base64 ?? "")
            size: \(result.encryptedSize)
            blake2b-512: \(result.checksums.blake2b512Hex ?? "")

            """
        guard let pending else {
            if !options.quiet { StandardError.write(summary) }
            return
        }
        // D5: the FileMeta values must not be lost: the output is committed only once they are on stdout.
        do {
            try StandardOutput.write(summary)
        } catch {
            pending.output.abort()
            throw error
        }
        do {
            try pending.output.finish()
        } catch {
            pending.output.abort()
            throw CLIError("cannot create \(options.output): \(error)", exitCode: ExitStatus.failure)
        }
    }
}

/// Encryption output whose commit waits for the CLI: `finish()` (called by the cipher once the file is complete)
/// does nothing, and the CLI commits `output` after it has printed the FileMeta values.
struct CommitAfterSummarySink: FileByteSink {
    let output: AtomicFileSink
    init(_ output: AtomicFileSink) { self.output = output }
    func write(_ bytes: RawSpan) throws { try output.write(bytes) }
    func finish() throws {}
    func abort() { output.abort() }
}

struct FileDecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt an E3DB v3 file, strictly; the output appears only if the whole file authenticates.",
        discussion: """
            Exit status 2 for any authentication or integrity failure (wrong access key, altered, truncated or \
            extended file, checksum mismatch), 65 when the input is not an E3DB v3 file (its version or \
            header is malformed); no output file is left behind, also when interrupted. When OUT is \
            -, nothing is written to stdout before the whole file authenticated, and no plaintext is written to \
            disk: a regular file is read twice (verify, then decrypt), a pipe is first copied as ciphertext to an \
            unlinked temporary file in $TMPDIR.
            """
    )

    @OptionGroup var options: FileCipherOptions

    @Option(help: "Expected E3DB checksum (padded base64 MD5 of the encrypted file, FileMeta.checksum).")
    var expectedChecksum: String?

    @Option(help: "Expected encrypted size in bytes (FileMeta.size).")
    var expectedSize: Int?

    @Flag(help: "Read a file with no chunk (what old Swift and Java SDKs wrote for empty files) as empty.")
    var acceptZeroChunk = false

    @Option(
        help: ArgumentHelp(
            "Decrypt only plaintext bytes START-END (0-based, END included, as in HTTP; START- reads to the end).",
            discussion: "Reads only the headers, 16 bytes per earlier chunk and the chunks holding the range; every "
                + "byte written is authenticated, but damage outside the range (or a cut after it) is found only "
                + "by a full decrypt. INPUT must be a regular file.",
            valueName: "START-END"))
    var range: PlaintextRange?

    func validate() throws {
        if range != nil {
            guard options.input != "-" else {
                throw ValidationError("--range needs a file as INPUT, not standard input")
            }
            guard expectedChecksum == nil, !acceptZeroChunk else {
                throw ValidationError(
                    "--range reads part of the file: --expected-checksum and --accept-zero-chunk need a full decrypt")
            }
        }
        if let expectedChecksum {
            do {
                try ExpectedFileChecksum.md5Base64(expectedChecksum).validate()
            } catch {
                throw ValidationError(
                    "--expected-checksum must be FileMeta.checksum: 24 characters of padded standard base64 (an MD5)")
            }
        }
        if let expectedSize, expectedSize < 0 {
            throw ValidationError("--expected-size must not be negative")
        }
    }

    func run() throws {
        try execute()
    }

    func execute() throws {
        FileSignals.install()
        let key = try options.accessKey()
        if let range {
            try decryptRange(range, key: key)
            return
        }
        let bar = ProgressBar(label: "decrypt", quiet: options.quiet)
        let cipherOptions = FileDecryptionOptions(
            expectedChecksum: expectedChecksum.map { .md5Base64($0) },
            expectedEncryptedSize: expectedSize,
            zeroChunkFiles: acceptZeroChunk ? .accept : .acceptIfChecksumVerified,
            progress: bar.callback)
        do {
            let input = try openInput(options.input)
            defer { if input != 0 { close(input) } }
            if options.output == "-" {
                try decryptToStandardOutput(input, key: key, options: cipherOptions)
            } else {
                var source = FileDescriptorSource(fileDescriptor: input)
                var sink = try createOutput(options.output)
                _ = try E3DBFileCipher.decrypt(from: &source, to: &sink, accessKey: key, options: cipherOptions)
            }
        } catch let error as E3DBError {
            bar.end()
            throw fileError(error, "decrypting \(options.input)")
        }
        bar.end()
    }

    /// Authenticates the whole file before the first plaintext byte reaches stdout, without writing plaintext to
    /// disk: a regular file is read twice (verify, then decrypt to stdout); a pipe is copied to an unlinked
    /// ciphertext spool while it is verified, then decrypted from the spool.
    func decryptToStandardOutput(_ input: Int32, key: AccessKey, options: FileDecryptionOptions) throws {
        var second = options
        second.progress = nil
        var discard = DiscardingByteSink()
        var out = FileDescriptorSink(fileDescriptor: 1)
        if isSeekableFile(input) {
            let start = lseek(input, 0, SEEK_CUR)
            var source = FileDescriptorSource(fileDescriptor: input)
            _ = try E3DBFileCipher.decrypt(from: &source, to: &discard, accessKey: key, options: options)
            guard lseek(input, start, SEEK_SET) == start else {
                throw CLIError("cannot rewind \(self.options.input): \(Descriptor.message(errno))")
            }
            var again = FileDescriptorSource(fileDescriptor: input)
            _ = try E3DBFileCipher.decrypt(from: &again, to: &out, accessKey: key, options: second)
        } else {
            let spool = try CiphertextSpool()
            var tee = TeeByteSource(
                inner: FileDescriptorSource(fileDescriptor: input), copy: FileDescriptorSink(fileDescriptor: spool.fd))
            _ = try E3DBFileCipher.decrypt(from: &tee, to: &discard, accessKey: key, options: options)
            try spool.rewind()
            var spooled = FileDescriptorSource(fileDescriptor: spool.fd)
            _ = try E3DBFileCipher.decrypt(from: &spooled, to: &out, accessKey: key, options: second)
        }
    }

    func decryptRange(_ range: PlaintextRange, key: AccessKey) throws {
        do {
            let input = try openInput(options.input)
            defer { close(input) }
            let source = try FileDescriptorRandomAccessSource(fileDescriptor: input)
            if let expectedSize, expectedSize != source.byteCount {
                throw CLIError(
                    expectedSize < source.byteCount
                        ? "decrypting \(options.input): the input is longer than its expected size of \(expectedSize) bytes"
                        : "decrypting \(options.input): the file is \(source.byteCount) bytes, not the expected \(expectedSize)",
                    exitCode: ExitStatus.authentication)
            }
            // START- reads to the end of the plaintext. When the length is impossible, read START alone: the
            // range read checks the headers first and then reports the length problem.
            let closed: ClosedRange<Int>
            if let end = range.end {
                closed = range.start...end
            } else {
                do {
                    let plaintextSize = try FileChunkLayout(encryptedSize: source.byteCount).plaintextSize
                    closed = range.start...max(range.start, plaintextSize - 1)
                } catch {
                    closed = range.start...range.start
                }
            }
            if options.output == "-" {
                var discard = DiscardingByteSink()
                _ = try E3DBFileCipher.decryptRange(closed, from: source, to: &discard, accessKey: key)
                var out = FileDescriptorSink(fileDescriptor: 1)
                _ = try E3DBFileCipher.decryptRange(closed, from: source, to: &out, accessKey: key)
            } else {
                var sink = try createOutput(options.output)
                _ = try E3DBFileCipher.decryptRange(closed, from: source, to: &sink, accessKey: key)
            }
        } catch let error as E3DBError {
            throw fileError(error, "decrypting \(options.input)")
        }
    }
}

struct FileChecksumCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "checksum",
        abstract: "Print an encrypted file's E3DB checksum (padded base64 MD5), size and BLAKE2b-512.",
        discussion: "The BLAKE2b-512 line equals what b2sum prints for the file."
    )

    @Argument(help: "The file, or - for standard input.")
    var file: String

    func run() throws {
        try execute()
    }

    func execute() throws {
        do {
            let input = try openInput(file)
            defer { if input != 0 { close(input) } }
            var source = FileDescriptorSource(fileDescriptor: input)
            let (sums, count) = try E3DBFileCipher.checksums(of: &source)
            try StandardOutput.write(
                "checksum: \(sums.md5Base64 ?? "")\nsize: \(count)\nblake2b-512: \(sums.blake2b512Hex ?? "")\n")
        } catch let error as E3DBError {
            throw fileError(error, "reading \(file)")
        }
    }
}

/// Opens `path` for reading (`-` is standard input; any readable path, FIFOs included).
func openInput(_ path: String) throws -> Int32 {
    try CLIInput.open(path, what: "input").fd
}

/// A temporary file beside `path`, renamed over it on success.
func createOutput(_ path: String) throws -> AtomicFileSink {
    do {
        return try AtomicFileSink(path: path)
    } catch {
        throw CLIError("cannot create \(path): \(error)", exitCode: ExitStatus.failure)
    }
}
