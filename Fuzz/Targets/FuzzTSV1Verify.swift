// Fuzz target FuzzTSV1Verify: TSV1 `Authorization` verification (E3DBAPI `TSV1.verify`). Byte 0 picks the mode (low bit).
//
// - 0, hostile: the rest is split on 0x00 into header text, path, query and method (lossy UTF-8) and verified at a
//   fixed clock with a window taken from byte 1. `verify` returns or throws a typed E3DBError (tsv1Malformed,
//   tsv1Expired or tsv1BadSignature), never traps; a header it accepts names the key, nonce and timestamp it holds.
// - 1, signed: the rest is split into path and query; byte 1 picks the method, byte 2 the clock skew, byte 3 a
//   position. A header signed by a fixed key over that path and the canonical query verifies (and yields the key,
//   the nonce and the lowercased uid); past the window it is tsv1Expired; with the byte at the chosen position of
//   the path or the query changed, it is tsv1BadSignature unless the changed request is equivalent under the forms
//   the verifier accepts (`%2a` vs `%2A`, `+` vs space in the query).
import E3DBAPI
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzTSV1Verify invariant violated: \(message())") }
}

private let now: Int64 = 1_764_072_000
private let methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"]
private let nonce = "6f1c1a3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f"

// Built per input: LeakSanitizer cannot trace key storage held in globals (see FuzzSealedBoxes).
private func signer() -> Ed25519.PrivateKey {
    do { return try Ed25519.PrivateKey(seed: SecureBytes(copying: [UInt8](repeating: 0x42, count: 32))) } catch {
        fatalError("\(error)")
    }
}

private func pieces(_ bytes: ArraySlice<UInt8>, _ count: Int) -> [String] {
    var parts = bytes.split(separator: 0, maxSplits: count - 1, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    while parts.count < count { parts.append("") }
    return parts
}

private func hostile(_ bytes: ArraySlice<UInt8>, window: Int64) {
    let p = pieces(bytes, 4)
    do {
        let v = try TSV1.verify(
            authorization: p[0], rawPath: p[1], rawQuery: p[2], method: p[3], now: now,
            window: window)
        let parts = p[0].components(separatedBy: "; ")
        require(parts.count == 6 && parts[0] == TSV1.method, "accepted a header that is not six TSV1 parts")
        require(
            v.signingKey.base64URLEncoded == (try? Ed25519.PublicKey(base64URLEncoded: parts[1]))?.base64URLEncoded,
            "the verified key is not the header's")
        require(v.nonce == parts[3] && v.timestamp == Int64(parts[2]), "nonce or timestamp differ from the header")
    } catch {
        require(
            [E3DBError.Code.tsv1Malformed, .tsv1Expired, .tsv1BadSignature].contains(error.code),
            "unexpected error code \(error.code)")
    }
}

private func signed(_ control: ArraySlice<UInt8>, _ bytes: ArraySlice<UInt8>) {
    let c = Array(control) + [0, 0, 0]
    let method = methods[Int(c[0]) % methods.count]
    let skew = Int64(c[1] % 64) - 32
    let p = pieces(bytes, 3)
    let path = p[0]
    let query = p[1]
    // The uid may be any text without "; " (which would split the header); lowercase is what verify returns.
    let uid = p[2].replacingOccurrences(of: ";", with: "")
    let key = signer()
    let header: String
    do {
        header = try TSV1.authorization(
            path: path, query: TSV1.canonicalQuery(query), method: method,
            timestamp: now + skew, nonce: nonce, clientID: uid, signingKey: key)
    } catch { fatalError("signing failed: \(error)") }
    do {
        let v = try TSV1.verify(
            authorization: header, rawPath: path, rawQuery: query, method: method, now: now,
            window: 60)
        require(v.signingKey == key.publicKey, "verified key")
        require(v.nonce == nonce && v.timestamp == now + skew, "verified nonce or timestamp")
        require(v.clientID == (uid.isEmpty ? nil : uid.lowercased()), "verified uid")
    } catch { fatalError("a freshly signed header does not verify: \(error.code)") }
    do {
        _ = try TSV1.verify(
            authorization: header, rawPath: path, rawQuery: query, method: method,
            now: now + skew + 61, window: 60)
        fatalError("an expired header verified")
    } catch { require(error.code == .tsv1Expired, "expired header gave \(error.code)") }

    // Change one byte of the path or the query.
    var target = Array((c[2] & 1 == 0 ? path : query).utf8)
    guard !target.isEmpty else { return }
    let at = Int(c[2] >> 1) % target.count
    target[at] = target[at] == UInt8(ascii: "x") ? UInt8(ascii: "y") : UInt8(ascii: "x")
    let changed = String(decoding: target, as: UTF8.self)
    let newPath = c[2] & 1 == 0 ? changed : path
    let newQuery = c[2] & 1 == 0 ? query : changed
    let equivalent =
        TSV1.pathForms(newPath).contains(path)
        && TSV1.queryForms(newQuery).contains(TSV1.canonicalQuery(query))
    do {
        _ = try TSV1.verify(
            authorization: header, rawPath: newPath, rawQuery: newQuery, method: method, now: now,
            window: 60)
        require(equivalent, "a header verified over a changed \(c[2] & 1 == 0 ? "path" : "query")")
    } catch {
        require(error.code == .tsv1BadSignature, "a changed request gave \(error.code)")
        require(!equivalent, "an equivalent request did not verify")
    }
}

func fuzzTSV1Verify(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let start = unsafe start, count >= 1 else { return 0 }
    let bytes = unsafe Array(UnsafeRawBufferPointer(start: start, count: count))
    if bytes[0] & 1 == 0 {
        let window: Int64 = count > 1 ? [0, 1, 300, 86_400, Int64.max, Int64.min][Int(bytes[1]) % 6] : 300
        hostile(bytes.dropFirst(min(2, count)), window: window)
    } else {
        signed(bytes.dropFirst().prefix(3), bytes.dropFirst(4))
    }
    return 0
}
