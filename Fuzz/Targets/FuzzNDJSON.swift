// Fuzz target FuzzNDJSON: NDJSON batch mode for records (NDJSONLineSplitter, RecordBatch, RecordLineEncryptor and
// RecordLineDecryptor) with fixed keys.
//
// Byte 0 picks the options: jobs 1-3 (bits 0-1), fail-fast (bit 2), the maximum line length (bits 3-5: 8, 16,
// ..., 512 bytes, or the 64 MiB default when 7). Byte 1 is the size of the pieces the input is fed in (1-256).
// The rest is the NDJSON input.
//
// Invariants:
// - the splitter never crashes, never holds more than maxLineBytes + 1 bytes, numbers its lines 1, 2, 3, ...
//   with no gap, and emits exactly what a simple reference split gives (one line per "\n"-terminated piece up to
//   the last non-blank one, `\r` dropped, over-long lines as lineTooLong, interior blank lines as blankLine),
//   whatever the piece size;
// - decrypting the input with RecordBatch writes one output line per input line (fewer with fail-fast, ending at
//   the first failure), each either a decrypted record or an error line carrying its own line number;
// - every line that encrypts decrypts back to the same data, under the same options.
import E3DBCanonicalJSON
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzNDJSON invariant violated: \(message())") }
}

private struct Fixture {
    let encryptor: RecordLineEncryptor
    let decryptor: RecordLineDecryptor
}

// Built per input: LeakSanitizer cannot trace `Data` held in globals (see FuzzSealedBoxes).
private func makeFixture() -> Fixture {
    do {
        let identity = ClientIdentity(
            clientID: UUID(uuidString: "00000000-0000-4000-8000-000000000001"),
            boxKey: try Box.PrivateKey(rawRepresentation: [UInt8](repeating: 0x22, count: 32)),
            signingKey: try Ed25519.PrivateKey(seed: SecureBytes(copying: [UInt8](repeating: 0x33, count: 32))))
        let ak = try AccessKey(rawRepresentation: [UInt8](repeating: 0x11, count: 32))
        let eak = try EncryptedAccessKey.wrap(ak, for: identity.publicKey, by: identity.boxKey)
        let id = try identity.requireClientID()
        let info = EAKInfo(
            eak: eak, authorizerID: id, authorizerPublicKey: identity.publicKey, signerID: id,
            signerSigningKey: identity.publicSigningKey)
        return Fixture(
            encryptor: try RecordLineEncryptor(type: "fuzz", plain: ["p": "q"], identity: identity, eakInfo: info),
            decryptor: try RecordLineDecryptor(identity: identity, eakInfo: info))
    } catch {
        fatalError("\(error)")
    }
}

private enum Expected: Equatable {
    case line([UInt8])
    case error(String)
}

/// The reference split: what the splitter must emit, computed on the whole input at once.
private func referenceSplit(_ input: [UInt8], max: Int) -> [Expected] {
    var pieces = input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map(Array.init)
    if pieces.last == [] { pieces.removeLast() }
    var lines: [Expected] = pieces.map { piece in
        var line = piece
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        if line.count > max { return .error("lineTooLong") }
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return .error("blankLine") }
        return .line(line)
    }
    while lines.last == .error("blankLine") { lines.removeLast() }
    return lines
}

/// Output lines of a batch run (each ends in "\n").
private func outputLines(_ output: [UInt8]) -> [[UInt8]] {
    require(output.isEmpty || output.last == UInt8(ascii: "\n"), "output does not end in a newline")
    return output.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast().map(Array.init)
}

/// The error object of an error line, or nil for a record line.
private func errorObject(_ line: [UInt8]) -> JSONObject? {
    let value: JSONValue
    do {
        value = try CanonicalJSON.parse(line)
    } catch {
        fatalError("FuzzNDJSON invariant violated: an output line is not JSON: \(error)")
    }
    guard case .object(let object) = value else { fatalError("FuzzNDJSON invariant violated: output not an object") }
    if case .object(let error)? = object["error"] { return error }
    require(object["data"] != nil && object["meta"] != nil, "an output line is neither a record nor an error")
    return nil
}

func fuzzNDJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    let jobs = Int(bytes[0] & 0x03) % 3 + 1
    let failFast = bytes[0] & 0x04 != 0
    let shift = Int(bytes[0] >> 3) & 0x07
    let maxLine = shift == 7 ? DocumentLimits.parse.maxInputBytes : 8 << shift
    let step = Int(bytes[1]) + 1
    let input = Array(bytes[2...])

    // 1. The splitter against the reference, fed in pieces.
    var splitter = NDJSONLineSplitter(maxLineBytes: maxLine)
    var got: [(Int, Expected)] = []
    let collect = { (line: NDJSONLine) in
        switch line.content {
        case .success(let b): got.append((line.number, .line(b)))
        case .failure(let e):
            require(e.code.category == .malformedInput, "splitter error \(e.code) is not malformedInput")
            got.append((line.number, .error(e.code.rawValue)))
        }
    }
    var offset = 0
    while offset < input.count {
        let end = min(input.count, offset + step)
        splitter.append(Array(input[offset..<end]), collect)
        require(splitter.bufferedByteCount <= maxLine + 1, "splitter holds \(splitter.bufferedByteCount) bytes")
        offset = end
    }
    splitter.finish(collect)
    let expected = referenceSplit(input, max: maxLine)
    require(got.map(\.0) == (0..<got.count).map { $0 + 1 }, "line numbers are not 1, 2, 3, ...")
    require(got.map(\.1) == expected, "splitter output differs from the reference split")

    // 2. Decryption: one output line per input line, in order; error lines carry their own numbers.
    let fixture = makeFixture()
    let options = RecordBatchOptions(jobs: jobs, failFast: failFast, maxLineBytes: maxLine, linesPerBatch: 3)
    let (decrypted, summary) = RecordBatch.process(input, processor: fixture.decryptor, options: options)
    let decryptedLines = outputLines(decrypted)
    if failFast, let first = summary.firstFailure {
        require(
            decryptedLines.count == first.line,
            "fail-fast wrote \(decryptedLines.count) lines, failure at \(first.line)")
    } else {
        require(
            decryptedLines.count == expected.count,
            "\(decryptedLines.count) output lines for \(expected.count) input lines")
    }
    require(summary.lines == decryptedLines.count, "summary counts \(summary.lines) lines")
    var failures = 0
    for (i, line) in decryptedLines.enumerated() {
        if let error = errorObject(line) {
            failures += 1
            require(
                error["line"] == .number(Double(i + 1)),
                "error line \(i + 1) names line \(String(describing: error["line"]))")
        }
    }
    require(failures == summary.failures, "summary counts \(summary.failures) failures, output has \(failures)")

    // 3. Encrypt then decrypt: every line that encrypts comes back with the same data.
    let plainOptions = RecordBatchOptions(jobs: jobs, maxLineBytes: maxLine, linesPerBatch: 2)
    let (encrypted, _) = RecordBatch.process(input, processor: fixture.encryptor, options: plainOptions)
    let encryptedLines = outputLines(encrypted)
    require(encryptedLines.count == expected.count, "encrypt wrote \(encryptedLines.count) lines")
    // Encrypted lines are longer than their input: read them back under the default line limit.
    let readBack = RecordBatchOptions(jobs: jobs, linesPerBatch: 2)
    let (roundTrip, _) = RecordBatch.process(encrypted, processor: fixture.decryptor, options: readBack)
    let roundTripLines = outputLines(roundTrip)
    require(roundTripLines.count == expected.count, "round trip wrote \(roundTripLines.count) lines")
    for (i, line) in encryptedLines.enumerated() where errorObject(line) == nil {
        guard case .line(let original) = expected[i] else {
            fatalError("FuzzNDJSON invariant violated: line \(i + 1) encrypted although the splitter rejected it")
        }
        require(errorObject(roundTripLines[i]) == nil, "line \(i + 1) encrypted but does not decrypt")
        do {
            guard case .object(let object) = try CanonicalJSON.parse(roundTripLines[i]) else {
                fatalError("not an object")
            }
            require(object["data"] == (try CanonicalJSON.parse(original)), "line \(i + 1) decrypts to other data")
        } catch {
            fatalError("FuzzNDJSON invariant violated: \(error)")
        }
    }
    return 0
}
