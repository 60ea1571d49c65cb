import Dispatch
public import E3DBCanonicalJSON
public import E3DBKeys
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Batch mode for records: NDJSON in, NDJSON out, one output line per input line, in input order.

/// One line of NDJSON input: its number (from 1) and its bytes without the line terminator, or the error that
/// the splitter already found (`lineTooLong`, `blankLine`).
public struct NDJSONLine: Sendable {
    /// The line number, counting from 1.
    public let number: Int
    /// The line's bytes (without `\n` or `\r\n`), or why the line cannot be used.
    public let content: Result<[UInt8], E3DBError>

    /// A line from its parts.
    public init(number: Int, content: Result<[UInt8], E3DBError>) {
        self.number = number
        self.content = content
    }
}

/// Splits a byte stream into NDJSON lines with bounded memory.
///
/// Lines end in `\n`; a `\r` before it is dropped. The last line may lack its `\n`. A line longer than
/// ``maxLineBytes`` is reported as `lineTooLong` and the rest of it is skipped without being
/// stored, so the splitter never holds more than ``maxLineBytes`` + 1 bytes. Blank lines (empty or only spaces,
/// tabs and `\r`) at the end of the input are ignored; a blank line followed by a non-blank one is reported as
/// `blankLine` under its own number. Every line number from 1 to the last non-blank line is
/// emitted exactly once, in order.
public struct NDJSONLineSplitter: Sendable {
    /// The longest accepted line in bytes, without its terminator.
    public let maxLineBytes: Int
    private var buffer: [UInt8] = []
    private var skipping = false
    private var nextNumber = 1
    /// Blank lines not yet emitted: they are dropped if only blank lines follow them.
    private var pendingBlank: (first: Int, count: Int)?

    /// A splitter.
    /// - Parameter maxLineBytes: the longest accepted line (default: the document read limit,
    ///   `DocumentLimits.parse.maxInputBytes`, 64 MiB). Values below 1 are treated as 1.
    public init(maxLineBytes: Int = DocumentLimits.parse.maxInputBytes) {
        self.maxLineBytes = max(1, maxLineBytes)
    }

    /// The number the next line will get.
    public var nextLineNumber: Int { nextNumber }

    /// Bytes of an unfinished line held between calls; never more than ``maxLineBytes`` + 1.
    public var bufferedByteCount: Int { buffer.count }

    /// Feeds bytes; calls `emit` for every line they complete, in order.
    /// - Parameters:
    ///   - chunk: the next bytes of the input.
    ///   - emit: receives each completed line.
    public mutating func append<E: Error>(
        _ chunk: UnsafeRawBufferPointer, _ emit: (NDJSONLine) throws(E) -> Void
    ) throws(E) {
        let bytes = unsafe chunk.bindMemory(to: UInt8.self)
        var start = 0
        while start < bytes.count {
            guard let newline = unsafe bytes[start...].firstIndex(of: UInt8(ascii: "\n")) else {
                unsafe take(UnsafeBufferPointer(rebasing: bytes[start...]))
                return
            }
            if buffer.isEmpty, !skipping, newline - start <= maxLineBytes + 1 {
                // The whole line is in this chunk: one exact allocation.
                try unsafe finishLine(Array(bytes[start..<newline]), emit)
            } else {
                unsafe take(UnsafeBufferPointer(rebasing: bytes[start..<newline]))
                let line = buffer
                buffer = []
                try finishLine(line, emit)
            }
            start = newline + 1
        }
    }

    /// Feeds bytes from an array.
    public mutating func append<E: Error>(_ chunk: [UInt8], _ emit: (NDJSONLine) throws(E) -> Void) throws(E) {
        let result = unsafe chunk.withUnsafeBytes { raw in
            Result { () throws(E) in try unsafe self.append(raw, emit) }
        }
        try result.get()
    }

    /// Ends the input: emits a last line that has no `\n` and drops trailing blank lines.
    public mutating func finish<E: Error>(_ emit: (NDJSONLine) throws(E) -> Void) throws(E) {
        if skipping || !buffer.isEmpty {
            let line = buffer
            buffer = []
            try finishLine(line, emit)
        }
        pendingBlank = nil
    }

    private mutating func take(_ piece: UnsafeBufferPointer<UInt8>) {
        if skipping || piece.isEmpty { return }
        // One byte of slack for the `\r` of a `\r\n` ending.
        if buffer.count + piece.count > maxLineBytes + 1 {
            skipping = true
            buffer = []
            return
        }
        unsafe buffer.append(contentsOf: piece)
    }

    private mutating func finishLine<E: Error>(_ line: [UInt8], _ emit: (NDJSONLine) throws(E) -> Void) throws(E) {
        var line = line
        let number = nextNumber
        nextNumber += 1
        if skipping {
            skipping = false
            try flushBlank(emit)
            try emit(NDJSONLine(number: number, content: .failure(tooLong())))
            return
        }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        if line.count > maxLineBytes {
            try flushBlank(emit)
            try emit(NDJSONLine(number: number, content: .failure(tooLong())))
            return
        }
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\r") }) {
            if let blank = pendingBlank {
                pendingBlank = (blank.first, blank.count + 1)
            } else {
                pendingBlank = (number, 1)
            }
            return
        }
        try flushBlank(emit)
        try emit(NDJSONLine(number: number, content: .success(line)))
    }

    private mutating func flushBlank<E: Error>(_ emit: (NDJSONLine) throws(E) -> Void) throws(E) {
        guard let blank = pendingBlank else { return }
        pendingBlank = nil
        for number in blank.first..<(blank.first + blank.count) {
            try emit(
                NDJSONLine(
                    number: number,
                    content: .failure(
                        E3DBError(.blankLine, "the line is blank; only the end of the input may hold blank lines"))))
        }
    }

    private func tooLong() -> E3DBError {
        E3DBError(
            .lineTooLong, "the line is longer than the limit of \(maxLineBytes) bytes",
            context: .init(expected: maxLineBytes))
    }
}

/// Turns one NDJSON input line into one output line; used by ``RecordBatch``, possibly from several threads at
/// once.
public protocol RecordLineProcessor: Sendable {
    /// Processes one line.
    /// - Parameter line: the line's bytes, without terminator.
    /// - Returns: the output line, without terminator (it must not contain `\n`).
    /// - Throws: `E3DBError` for this line only; the batch reports it and goes on (unless fail-fast).
    func process(line: [UInt8]) throws(E3DBError) -> [UInt8]
}

/// `e3dbkit record encrypt --ndjson`: each line is a record's data, a JSON object of strings (the input of
/// single `record encrypt`); the output is the record's canonical `EncryptedDocument` JSON (what single
/// `record encrypt` prints). Type, `plain`, writer and keys are the same for every line.
///
/// The access key is unwrapped and the identity checked once, when the encryptor is made.
public struct RecordLineEncryptor: RecordLineProcessor {
    /// The record type.
    public let type: String
    /// `meta.plain` of every record.
    public let plain: RecordData
    /// Key order of the signed message.
    public let order: KeyOrder
    private let accessKey: AccessKey
    private let signingKey: Ed25519.PrivateKey
    /// The metadata is the same for every line: its canonical forms (for the output and the signed message)
    /// and value count are computed once.
    private let metaOutput: [UInt8]
    private let metaSigned: [UInt8]
    private let metaValueCount: Int
    /// Keys and nonces for all lines: OS-seeded ChaCha20 output, one system call per 64 KiB (`RandomReservoir`).
    private let randomness = RandomReservoir()

    /// An encryptor for `identity`, with the access key of its own EAKInfo.
    /// - Parameters:
    ///   - type: the record type.
    ///   - plain: plaintext metadata of every record (default empty).
    ///   - identity: the writer (needs a client ID and a signing key).
    ///   - eakInfo: the writer's EAKInfo for this record type.
    ///   - order: key order of the signed message (default `KeyOrder.utf16`).
    /// - Throws: `E3DBError` `.missingKey` (no client ID or signing key), `.authenticationFailed` (part `eak`).
    public init(
        type: String, plain: RecordData = RecordData(), identity: ClientIdentity, eakInfo: EAKInfo,
        order: KeyOrder = .utf16
    ) throws(E3DBError) {
        self.type = type
        self.plain = plain
        self.order = order
        let writerID = try identity.requireClientID()
        self.signingKey = try identity.requireSigningKey()
        self.accessKey = try eakInfo.unwrap(with: identity.boxKey)
        let meta = ClientMeta(writerID: writerID, userID: writerID, type: type, plain: plain)
        self.metaOutput = meta.canonicalBytes()
        self.metaSigned = meta.canonicalBytes(order: order)
        self.metaValueCount = meta.signableJSON.valueCount
    }

    /// Encrypts and signs one record.
    /// - Parameter line: a JSON object of strings.
    /// - Returns: the canonical `EncryptedDocument` JSON.
    /// - Throws: `E3DBError` `.invalidDocument` (not JSON, not an object of strings), `.documentTooLarge`.
    public func process(line: [UInt8]) throws(E3DBError) -> [UInt8] {
        let data = try RecordData(jsonValue: parseDocumentJSON(line), what: "data")
        // What EncryptedDocument.encrypt does, with the metadata's canonical bytes computed once:
        // rec_sig = sign(canonical(meta) || canonical(data)), fields under fresh data keys.
        let signature = Base64URL.encode(signingKey.signature(for: metaSigned + data.canonicalBytes(order: order)))
        // The canonical document {"data":…,"meta":…,"rec_sig":"…"}: members in sorted order. The encrypted fields
        // go straight into the output in UTF-16 key order (the canonical order); as base64url and dots they need
        // no escaping, and the signature is base64url too. The randomness for the whole record comes from one
        // call, as in FieldCipher.encrypt(_:accessKey:).
        let members = data.members
        let sorted = members.indices.sorted { members[$0].key.utf16.lexicographicallyPrecedes(members[$1].key.utf16) }
        var out: [UInt8] = []
        out.reserveCapacity(line.count * 5 + members.count * 150 + metaOutput.count + 128)
        out.append(contentsOf: #"{"data":{"#.utf8)
        let n = FieldCipher.randomByteCount
        let random = unsafe SecureBytes(count: n * members.count) { unsafe randomness.fill($0) }
        unsafe random.withUnsafeBytes { r in
            for (position, i) in sorted.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: CanonicalJSON.serializedBytes(.string(members[i].key)))
                out.append(contentsOf: #":""#.utf8)
                let slice = unsafe UnsafeRawBufferPointer(rebasing: r[(i * n)..<((i + 1) * n)])
                unsafe out.append(
                    contentsOf: FieldCipher.encrypt(members[i].value, accessKey: accessKey, randomness: slice).utf8)
                out.append(UInt8(ascii: "\""))
            }
        }
        out.append(contentsOf: #"},"meta":"#.utf8)
        out.append(contentsOf: metaOutput)
        out.append(contentsOf: #","rec_sig":""#.utf8)
        out.append(contentsOf: signature.utf8)
        out.append(contentsOf: #""}"#.utf8)
        // Values: the document, data and its members, meta and its members, rec_sig.
        try DocumentLimits.checkOutput(
            byteCount: out.count, valueCount: 3 + members.count + metaValueCount, what: "record")
        return out
    }
}

/// `e3dbkit record decrypt --ndjson`: each line is an `EncryptedDocument` JSON (as `record encrypt` writes it);
/// the output is `{"data":…,"meta":…,"verification":…}` exactly as single `record decrypt` prints it.
///
/// The access key is unwrapped and the verifying key chosen once, when the decryptor is made; every line then
/// goes through the same checks as ``EncryptedDocument/decrypt(identity:eakInfo:verifyingKey:verification:decoding:)``.
public struct RecordLineDecryptor: RecordLineProcessor {
    /// The signature policy and its options.
    public let verification: RecordVerification
    /// Base64url strictness for the fields.
    public let decoding: Base64Decoding
    private let accessKey: AccessKey
    private let verifyingKey: Ed25519.PublicKey?
    private let requiredWriter: UUID?

    /// A decryptor for `identity`.
    /// - Parameters:
    ///   - identity: the reader.
    ///   - eakInfo: the reader's EAKInfo for this record type.
    ///   - verifyingKey: overrides the EAKInfo's `signer_signing_key`.
    ///   - verification: signature policy, key order, variants and the writer check (default strict).
    ///   - decoding: base64url strictness (default strict).
    /// - Throws: `E3DBError` `.authenticationFailed` (part `eak`) when the EAK does not open.
    public init(
        identity: ClientIdentity, eakInfo: EAKInfo, verifyingKey: Ed25519.PublicKey? = nil,
        verification: RecordVerification = .strict, decoding: Base64Decoding = .strict
    ) throws(E3DBError) {
        self.verification = verification
        self.decoding = decoding
        self.accessKey = try eakInfo.unwrap(with: identity.boxKey)
        self.verifyingKey = verifyingKey ?? eakInfo.signerSigningKey
        self.requiredWriter = verification.requireWriterIsSigner ? eakInfo.signerID : nil
    }

    /// Decrypts and verifies one record.
    /// - Parameter line: an `EncryptedDocument` JSON.
    /// - Returns: the canonical JSON of ``outputJSON(_:policy:)``.
    /// - Throws: the errors of `EncryptedDocument.init(jsonData:)` and
    ///   ``EncryptedDocument/decrypt(identity:eakInfo:verifyingKey:verification:decoding:)``.
    public func process(line: [UInt8]) throws(E3DBError) -> [UInt8] {
        let document = try EncryptedDocument(jsonData: line)
        if let requiredWriter { try document.checkWriter(isSigner: requiredWriter) }
        // What EncryptedDocument.decrypt(accessKey:verifyingKey:verification:decoding:) does, serializing meta and
        // data once: in the default UTF-16 order the signed message is exactly the output's two members.
        let data = try FieldCipher.decrypt(document.data, accessKey: accessKey, decoding: decoding)
        let metaBytes = document.meta.canonicalBytes()
        let dataBytes = data.canonicalBytes()
        let status = try verification.check(
            document.recordSignature, meta: document.meta, data: data, key: verifyingKey
        ) {
            verification.order == .utf16
                ? metaBytes + dataBytes
                : RecordSignature.message(meta: document.meta, data: data, order: verification.order)
        }
        var plain = DecryptedDocument(meta: document.meta, data: data)
        plain.signatureStatus = status
        // outputJSON's canonical form, {"data":…,"meta":…,"verification":{…}}, written member by member.
        var out: [UInt8] = []
        out.reserveCapacity(line.count + 128)
        out.append(contentsOf: #"{"data":"#.utf8)
        out.append(contentsOf: dataBytes)
        out.append(contentsOf: #","meta":"#.utf8)
        out.append(contentsOf: metaBytes)
        out.append(contentsOf: #","verification":"#.utf8)
        out.append(contentsOf: CanonicalJSON.serializedBytes(Self.verificationJSON(plain, policy: verification.policy)))
        out.append(UInt8(ascii: "}"))
        return out
    }

    private static func verificationJSON(_ document: DecryptedDocument, policy: SignaturePolicy) -> JSONValue {
        var verification: JSONObject = ["policy": .string(policy.rawValue)]
        if let status = document.signatureStatus { verification["rec_sig"] = .string(status.rawValue) }
        return .object(verification)
    }

    /// `{"data":…,"meta":…,"verification":{"policy":…,"rec_sig":…}}`: a decrypted record and what was checked
    /// (the output of `e3dbkit record decrypt`, single and batch).
    public static func outputJSON(_ document: DecryptedDocument, policy: SignaturePolicy) -> JSONValue {
        .object([
            "data": document.data.signableJSON, "meta": document.meta.signableJSON,
            "verification": verificationJSON(document, policy: policy),
        ])
    }
}

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
