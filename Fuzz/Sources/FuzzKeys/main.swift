// Fuzz target: E3DBKeys parsers. Byte 0 picks the surface; the rest is the input.
//
// - EAK strings (`b64u(ct).b64u(nonce)`): whatever the strict parser accepts, the lenient one accepts with the
//   same bytes; an accepted EAK prints back to a string that parses to the same EAK; unwrapping with fixed keys
//   either fails with a typed E3DBError or yields a 32-byte access key. Every failure is an E3DBError.
// - EAKInfo JSON (API, js-sdk, old Swift and Java flat shapes): an accepted EAKInfo re-encodes (both shapes when
//   it has a signer) to JSON that decodes to an equal EAKInfo; unwrapping with a fixed reader key fails with a
//   typed error or yields a key.
import E3DBKeys
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzKeys invariant violated: \(message())") }
}

// Built per input: LeakSanitizer cannot trace `Data` held in globals (see FuzzSealedBoxes).
private func fixedKey(_ byte: UInt8) -> Box.PrivateKey {
    do { return try Box.PrivateKey(rawRepresentation: [UInt8](repeating: byte, count: 32)) } catch { fatalError("\(error)") }
}

private func eakString(_ text: String) {
    let strict = Result { () throws(E3DBError) in try EncryptedAccessKey(text) }
    let lenient = Result { () throws(E3DBError) in try EncryptedAccessKey(text, decoding: .lenient) }
    if case .success(let eak) = strict {
        guard case .success(let other) = lenient else { fatalError("strict accepted, lenient rejected") }
        require(eak == other, "strict and lenient parsed different EAKs")
    }
    if case .success(let eak) = lenient {
        let printed = eak.description
        require((try? EncryptedAccessKey(printed)) == eak, "printed EAK does not parse back strictly")
        do {
            let key = try eak.unwrap(reader: fixedKey(1), authorizer: fixedKey(2).publicKey)
            require(key.secretBoxKey.withUnsafeBytes { $0.count } == 32, "unwrapped key size")
        } catch {
            _ = error.code  // typed by construction (throws(E3DBError))
        }
    }
}

private func eakInfo(_ data: Data) {
    guard let info = try? EAKInfo(jsonData: data) else { return }
    for shape in [EAKInfo.Shape.api, .javaFlat] {
        // The Java flat shape needs a signer; a missing one is the encoder's business, not a crash.
        let json = info.jsonData(shape: shape)
        if let again = try? EAKInfo(jsonData: json) {
            require(again.eak == info.eak, "EAK changed through \(shape) JSON")
            require(again.authorizerID == info.authorizerID, "authorizer changed through \(shape) JSON")
        } else {
            require(shape == .javaFlat, "API-shape JSON of an accepted EAKInfo does not decode")
        }
    }
    do {
        _ = try info.unwrap(with: fixedKey(1))
    } catch {
        _ = error.code
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeys(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let rest = Data(bytes.dropFirst())
    if mode & 1 == 0 {
        eakString(String(decoding: rest, as: UTF8.self))
    } else {
        eakInfo(rest)
    }
    return 0
}
