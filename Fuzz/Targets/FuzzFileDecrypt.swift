// Fuzz target FuzzFileDecrypt: strict streaming decryption of E3DB file v3 (E3DBFiles) over arbitrary bytes and read splits.
//
// Input: byte 0 and byte 1 choose the read sizes (the source alternates reads of 1 + b0 and 1 + 257 * b1 bytes);
// the rest is the encrypted file, decrypted with the access key 32 x 0x11 (the key of the spec's Appendix A.6
// file, which seeds the corpus, so mutations reach the chunk layer).
//
// Invariants: decryption either succeeds and commits, or throws an E3DBError and commits nothing (the sink is
// aborted, never finished); the outcome (plaintext or error code) is the same for the fuzzer's split and for one
// whole read; a success has at least one chunk and 124 + plaintext + 17 * chunks == input length.
import E3DBFiles
import E3DBKeys
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzFileDecrypt invariant violated: \(message())") }
}

/// A source that alternates two read sizes.
private struct SplitSource: FileByteSource {
    let bytes: Data
    let sizes: (Int, Int)
    var offset = 0
    var toggle = false
    mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
        toggle.toggle()
        let want = min(buffer.byteCount, toggle ? sizes.0 : sizes.1, bytes.count - offset)
        guard want > 0 else { return 0 }
        let range = (bytes.startIndex + offset)..<(bytes.startIndex + offset + want)
        unsafe buffer.withUnsafeMutableBytes { _ = unsafe bytes.copyBytes(to: $0, from: range) }
        offset += want
        return want
    }
}

/// A sink that records whether it was finished or aborted.
private struct RecordingSink: FileByteSink {
    var written = Data()
    var finished = false
    var aborted = false
    mutating func write(_ bytes: RawSpan) throws {
        unsafe bytes.withUnsafeBytes { unsafe written.append(contentsOf: $0) }
    }
    mutating func finish() throws { finished = true }
    mutating func abort() { aborted = true }
}

private let accessKey: AccessKey? = try? AccessKey(rawRepresentation: [UInt8](repeating: 0x11, count: 32))

private enum Outcome: Equatable {
    case plaintext(Data)
    case failure(String)
}

private func decrypt(_ file: Data, sizes: (Int, Int), key: AccessKey) -> Outcome {
    var source = SplitSource(bytes: file, sizes: sizes)
    var sink = RecordingSink()
    do {
        let result = try E3DBFileCipher.decrypt(
            from: &source, to: &sink, accessKey: key, options: FileDecryptionOptions(checksums: .all))
        require(sink.finished && !sink.aborted, "success without commit")
        require(result.encryptedSize == file.count, "encrypted size \(result.encryptedSize) != input \(file.count)")
        require(
            E3DBFileFormat.prefixSize + sink.written.count + E3DBFileFormat.chunkOverhead * result.chunkCount
                == file.count,
            "plaintext length and chunk count do not add up to the file size")
        require(result.chunkCount >= 1, "success without a chunk")
        return .plaintext(sink.written)
    } catch {
        require(!sink.finished && sink.aborted, "failure \(error.code) but output committed")
        return .failure(error.code.rawValue)
    }
}

func fuzzFileDecrypt(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2, let key = accessKey else { return 0 }
    let sizes = unsafe (1 + Int(data[0]), 1 + 257 * Int(data[1]))
    let file = unsafe Data(bytes: data + 2, count: size - 2)
    let split = decrypt(file, sizes: sizes, key: key)
    let whole = decrypt(file, sizes: (Int.max / 2, Int.max / 2), key: key)
    require(split == whole, "outcome depends on read sizes: \(split) vs \(whole)")
    return 0
}
