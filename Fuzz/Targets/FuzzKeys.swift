// Fuzz target FuzzKeys: E3DBKeys parsers. Byte 0 picks the surface (its low two bits); the rest is the input.
//
// - 0: EAK strings (`b64u(ct).b64u(nonce)`): whatever the strict parser accepts, the lenient one accepts with
//   the same bytes; an accepted EAK prints back to a string that parses to the same EAK; unwrapping with fixed
//   keys either fails with a typed E3DBError or yields a 32-byte access key. Every failure is an E3DBError.
// - 1: EAKInfo JSON (API, js-sdk, old Swift and Java flat shapes, group wrappers), unwrapped with a fixed reader
//   key; 3: the same with the reader key of TestVectors/keys/group_wrappers.json, so that seeds from that file
//   open their membership key chain. An accepted EAKInfo re-encodes (both shapes) to JSON that parses to an equal
//   EAKInfo (wrappers included), and the re-encoded one unwraps to the same key or fails with the same code.
// - 2: client credential JSON: an accepted identity writes JSON that reads back to the same keys and members,
//   and writing that again gives the same bytes.
import E3DBKeys
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzKeys invariant violated: \(message())") }
}

// Built per input: LeakSanitizer cannot trace `Data` held in globals (see FuzzSealedBoxes).
private func fixedKey(_ byte: UInt8) -> Box.PrivateKey {
    do { return try Box.PrivateKey(rawRepresentation: [UInt8](repeating: byte, count: 32)) } catch {
        fatalError("\(error)")
    }
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
            unsafe require(key.secretBoxKey.withUnsafeBytes { $0.count } == 32, "unwrapped key size")
        } catch {
            _ = error.code  // typed by construction (throws(E3DBError))
        }
    }
}

/// The reader of TestVectors/keys/group_wrappers.json: `crypto_box_seed_keypair(0x21 * 32)`.
private func groupReader() -> Box.PrivateKey {
    do { return try Box.PrivateKey(seed: SecureBytes(copying: [UInt8](repeating: 0x21, count: 32))) } catch {
        fatalError("\(error)")
    }
}

private func unwrapOutcome(_ info: EAKInfo, _ reader: Box.PrivateKey) -> Result<Data, E3DBError> {
    Result { () throws(E3DBError) in try unsafe info.unwrap(with: reader).withUnsafeBytes { unsafe Data($0) } }
}

private func sameOutcome(_ a: Result<Data, E3DBError>, _ b: Result<Data, E3DBError>) -> Bool {
    switch (a, b) {
    case (.success(let x), .success(let y)): return x == y
    case (.failure(let x), .failure(let y)): return x.code == y.code && x.context.field == y.context.field
    default: return false
    }
}

private func eakInfo(_ data: Data, reader: Box.PrivateKey) {
    let info: EAKInfo
    do { info = try EAKInfo(jsonData: data) } catch {
        _ = error.code  // typed by construction (throws(E3DBError))
        return
    }
    let outcome = unwrapOutcome(info, reader)
    if case .success(let key) = outcome { require(key.count == 32, "unwrapped key size") }
    for shape in [EAKInfo.Shape.api, .javaFlat] {
        let json = info.jsonData(shape: shape)
        guard let again = try? EAKInfo(jsonData: json) else {
            fatalError("\(shape) JSON of an accepted EAKInfo does not parse")
        }
        require(again == info, "EAKInfo changed through \(shape) JSON")
        require(again.accessKeyWrappers == info.accessKeyWrappers, "wrappers changed through \(shape) JSON")
        require(again.jsonData(shape: shape) == json, "\(shape) JSON is not stable")
        require(sameOutcome(unwrapOutcome(again, reader), outcome), "unwrap differs after \(shape) JSON")
    }
}

private func clientConfig(_ data: Data) {
    let identity: ClientIdentity
    do { identity = try ClientIdentity(configJSON: data) } catch {
        _ = error.code
        return
    }
    let json = identity.configJSON()
    guard let again = try? ClientIdentity(configJSON: json) else { fatalError("written identity JSON does not parse") }
    require(again.publicKey == identity.publicKey, "box key changed")
    require(again.publicSigningKey == identity.publicSigningKey, "signing key changed")
    require(again.clientID == identity.clientID, "client_id changed")
    require(again.apiKeyID == identity.apiKeyID && again.clientEmail == identity.clientEmail, "members changed")
    // A file without api_url is written with the default one (the Python SDK's Client indexes it directly).
    require(again.apiURL == (identity.apiURL ?? ClientIdentity.defaultAPIURL), "api_url changed")
    require(again.configJSON() == json, "identity JSON is not stable")
}

func fuzzKeys(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let rest = Data(bytes.dropFirst())
    switch mode & 3 {
    case 0: eakString(String(decoding: rest, as: UTF8.self))
    case 1: eakInfo(rest, reader: fixedKey(1))
    case 2: clientConfig(rest)
    default: eakInfo(rest, reader: groupReader())
    }
    return 0
}
