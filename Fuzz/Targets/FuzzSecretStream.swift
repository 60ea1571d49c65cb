// Fuzz target FuzzSecretStream: the secretstream decryptor fed arbitrary chunks, and encrypt/decrypt round trips under
// fuzzer-chosen chunk sizes and tags.
//
// Byte 0 chooses the mode.
// - Even: "hostile stream". Bytes 1...24 are the header, the rest is split into chunks whose lengths come from
//   a one-byte prefix each. Invariants: every opened chunk's plaintext is exactly 17 bytes shorter than the
//   chunk; every failure is an E3DBError with the right code (streamTruncated for chunks under 17 bytes,
//   streamFinished after the final chunk, authenticationFailed otherwise, naming the chunk index); nothing opens
//   after a final chunk.
// - Odd: "round trip". The rest is plaintext, cut into messages by a one-byte prefix each; tags come from the
//   prefix too. It is sealed with a fixed key, then opened again: every message and tag must come back, and the
//   decryptor must be finished exactly when the final chunk was sealed.
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzSecretStream invariant violated: \(message())") }
}

private let key: SecretStream.Key = {
    do { return try SecretStream.Key(rawRepresentation: [UInt8](repeating: 0x5a, count: 32)) } catch {
        fatalError("\(error)")
    }
}()

private func hostile(_ bytes: ArraySlice<UInt8>) {
    guard bytes.count >= 24, let header = try? SecretStream.Header(rawRepresentation: bytes.prefix(24)) else { return }
    var decryptor = SecretStream.Decryptor(key: key, header: header)
    var rest = bytes.dropFirst(24)
    var opened = 0
    var finished = false
    while let lengthByte = rest.first {
        rest = rest.dropFirst()
        let length = min(Int(lengthByte), rest.count)
        let chunk = Data(rest.prefix(length))
        rest = rest.dropFirst(length)
        do {
            let (message, tag) = try decryptor.open(chunk)
            require(!finished, "a chunk opened after the final chunk")
            require(message.count == chunk.count - SecretStream.overheadByteCount, "plaintext length")
            opened += 1
            if tag == .final { finished = true }
        } catch {
            if finished {
                require(error.code == .streamFinished, "after final: \(error)")
            } else if chunk.count < SecretStream.overheadByteCount {
                require(error.code == .streamTruncated, "short chunk: \(error)")
            } else {
                require(error.code == .authenticationFailed, "bad chunk: \(error)")
                require(error.context.chunkIndex == opened, "chunk index in the error")
            }
            return
        }
    }
    let isFinished = decryptor.isFinished
    require(isFinished == finished, "isFinished agrees with the tags seen")
}

private func roundTrip(_ bytes: ArraySlice<UInt8>) {
    var messages: [(Data, SecretStream.Tag)] = []
    var rest = bytes
    while let control = rest.first {
        rest = rest.dropFirst()
        let length = min(Int(control >> 2), rest.count)
        let tag: SecretStream.Tag = [.message, .push, .rekey, .message][Int(control & 3)]
        messages.append((Data(rest.prefix(length)), tag))
        rest = rest.dropFirst(length)
    }
    var encryptor = SecretStream.Encryptor(key: key)
    let header = encryptor.header
    var chunks: [Data] = []
    for (message, tag) in messages.dropLast() {
        do { chunks.append(try encryptor.seal(message, tag: tag)) } catch { fatalError("seal failed: \(error)") }
    }
    let last = messages.last?.0 ?? Data()
    chunks.append(encryptor.finish(last))
    var decryptor = SecretStream.Decryptor(key: key, header: header)
    for (index, chunk) in chunks.enumerated() {
        do {
            let (message, tag) = try decryptor.open(chunk)
            let expected = index < messages.count ? messages[index] : (Data(), .final)
            require(message == expected.0, "message \(index) differs")
            require(tag == (index == chunks.count - 1 ? .final : expected.1), "tag \(index) differs")
        } catch {
            fatalError("own stream failed to open at chunk \(index): \(error)")
        }
    }
    let isFinished = decryptor.isFinished
    require(isFinished, "finished after the final chunk")
}

func fuzzSecretStream(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    if mode & 1 == 0 { hostile(bytes.dropFirst()) } else { roundTrip(bytes.dropFirst()) }
    return 0
}
