// Fuzz target FuzzBLAKE2b: libsodium's BLAKE2b (E3DBPrimitives.BLAKE2b) against libb2's (BLAKE2bReference) on every input.
//
// Byte 0 picks the output size (16...64, or an invalid size when its top bit is set), byte 1 the key length
// (0 = unkeyed, else 16...64 or an invalid size), byte 2 a split point for the streaming hasher. The key follows,
// then the message. Invariants: one-shot, streaming (split anywhere, and a forked copy) and libb2 agree byte for
// byte; invalid sizes are rejected by both with the same error code.
import E3DBBLAKE2bReference
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzBLAKE2b invariant violated: \(message())") }
}

func fuzzBLAKE2b(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    guard bytes.count >= 3 else { return 0 }
    let outLen = bytes[0] & 0x80 != 0 ? Int(bytes[0] & 0x7f) : 16 + Int(bytes[0]) % 49
    let keyLen = bytes[1] == 0 ? 0 : (bytes[1] & 0x80 != 0 ? Int(bytes[1] & 0x7f) : 16 + Int(bytes[1]) % 49)
    let body = bytes.dropFirst(3)
    guard body.count >= keyLen else { return 0 }
    let key = keyLen == 0 ? nil : SecureBytes(copying: body.prefix(keyLen))
    let message = Data(body.dropFirst(keyLen))
    let sodium = Result { () throws(E3DBError) in try BLAKE2b.hash(data: message, outputByteCount: outLen, key: key) }
    let reference = Result { () throws(E3DBError) in
        try BLAKE2bReference.hash(data: message, outputByteCount: outLen, key: key)
    }
    switch (sodium, reference) {
    case (.success(let a), .success(let b)):
        require(a == b, "libsodium and libb2 disagree (out \(outLen), key \(keyLen), \(message.count) bytes)")
        do {
            var hasher = try BLAKE2b(outputByteCount: outLen, key: key)
            let split = message.isEmpty ? 0 : Int(bytes[2]) % (message.count + 1)
            hasher.update(data: message.prefix(split))
            let fork = hasher
            hasher.update(data: message.dropFirst(split))
            require(hasher.finalize() == a, "streaming differs from one-shot")
            require(
                fork.finalize() == (try BLAKE2b.hash(data: message.prefix(split), outputByteCount: outLen, key: key)),
                "fork")
        } catch {
            fatalError("streaming hasher refused parameters the one-shot accepted: \(error)")
        }
    case (.failure(let a), .failure(let b)):
        require(a.code == b.code, "different error codes: \(a) vs \(b)")
        require(
            !(16...64).contains(outLen) || (keyLen != 0 && !(16...64).contains(keyLen)), "valid parameters rejected")
    default:
        fatalError("only one implementation accepted the parameters (out \(outLen), key \(keyLen))")
    }
    return 0
}
