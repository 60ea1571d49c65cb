public import E3DBCanonicalJSON
public import E3DBPrimitives

// NDJSON input for the batch mode: lines split from a byte stream, bounded in length.

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
