// Fuzz target FuzzFileRange: byte-range reads of E3DB file v3 (E3DBFileCipher.decryptRange) over arbitrary files and ranges.
//
// Input: bytes 0-2 are the range's first byte (24-bit little endian), bytes 3-5 its length minus one; the rest is
// the encrypted file, read with the access key 32 x 0x11 (the key of the spec's Appendix A.6 file and of the
// FuzzFileDecrypt seeds, so mutations reach the chunk layer).
//
// Invariants: a range read either finishes its sink with exactly the bytes asked for, or throws an E3DBError and
// aborts it; when the whole file decrypts, every range inside its plaintext reads back as the same bytes and
// every range outside is rangeNotSatisfiable; a successful range read lies inside the plaintext size implied by
// the file's length, and its first and last bytes read alone agree with it.
import E3DBFiles
import E3DBKeys
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzFileRange invariant violated: \(message())") }
}

private let accessKey: AccessKey? = try? AccessKey(rawRepresentation: [UInt8](repeating: 0x11, count: 32))

private enum Outcome: Equatable {
    case bytes(Data)
    case failure(String)
}

private func readRange(_ range: ClosedRange<Int>, _ file: Data, key: AccessKey) -> Outcome {
    var sink = MemoryByteSink()
    do {
        let result = try E3DBFileCipher.decryptRange(
            range, from: MemoryRandomAccessSource(file), to: &sink, accessKey: key)
        guard let written = sink.committed, !sink.aborted else { fatalError("FuzzFileRange: success without commit") }
        require(written.count == range.count, "range \(range) delivered \(written.count) bytes")
        require(result.range == range && range.upperBound < result.plaintextSize, "range outside the plaintext")
        return .bytes(written)
    } catch {
        require(sink.committed == nil && sink.aborted, "range failure \(error.code) but output committed")
        return .failure(error.code.rawValue)
    }
}

private func decryptWhole(_ file: Data, key: AccessKey) -> Data? {
    var source = MemoryByteSource(file)
    var sink = MemoryByteSink()
    do {
        _ = try E3DBFileCipher.decrypt(from: &source, to: &sink, accessKey: key)
        return sink.committed
    } catch {
        return nil
    }
}

func fuzzFileRange(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 6, let key = accessKey else { return 0 }
    let start = unsafe Int(data[0]) | Int(data[1]) << 8 | Int(data[2]) << 16
    let count = unsafe 1 + (Int(data[3]) | Int(data[4]) << 8 | Int(data[5]) << 16)
    let range = start...(start + count - 1)
    let file = unsafe Data(bytes: data + 6, count: size - 6)
    let outcome = readRange(range, file, key: key)
    if let plain = decryptWhole(file, key: key) {
        if range.upperBound < plain.count {
            require(outcome == .bytes(plain[range]), "range \(range) differs from full decryption: \(outcome)")
        } else {
            require(outcome == .failure("rangeNotSatisfiable"), "range \(range) beyond \(plain.count): \(outcome)")
        }
    }
    if case .bytes(let bytes) = outcome {
        let first = readRange(range.lowerBound...range.lowerBound, file, key: key)
        let last = readRange(range.upperBound...range.upperBound, file, key: key)
        require(first == .bytes(bytes.prefix(1)) && last == .bytes(bytes.suffix(1)), "single-byte reads disagree")
    }
    return 0
}
