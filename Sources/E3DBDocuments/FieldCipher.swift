public import E3DBCanonicalJSON
public import E3DBKeys
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Record field encryption, `edk "." edkN "." ef "." efN` (spec §3.1), identical in all E3DB SDKs:
///
/// ```
/// dk  = 32 random bytes (fresh per field)     ef  = secretbox(utf8(value), efN, dk)
/// edk = secretbox(dk, edkN, access key)       field = b64u(edk).b64u(edkN).b64u(ef).b64u(efN)
/// ```
public enum FieldCipher {
    /// Byte count of `edk` (the sealed 32-byte data key): 48.
    public static let encryptedDataKeyByteCount = SecretBox.keyByteCount + SecretBox.tagByteCount
    /// Random bytes one field consumes: data key and two nonces (80).
    public static let randomByteCount = SecretBox.keyByteCount + 2 * SecretBox.nonceByteCount

    /// Encrypts one value with a fresh random data key and nonces.
    /// - Parameters:
    ///   - value: the plaintext (encrypted as its UTF-8 bytes; empty values are allowed).
    ///   - accessKey: the record type's access key.
    /// - Returns: the field string.
    public static func encrypt(_ value: String, accessKey: AccessKey) -> String {
        let random = SecureBytes(randomCount: randomByteCount)
        // Safety: `random` is exactly `randomByteCount` bytes of wiped storage, lent for the closure;
        // `encrypt(_:accessKey:randomness:)` reads those 80 bytes and keeps no pointer.
        return unsafe random.withUnsafeBytes { unsafe encrypt(value, accessKey: accessKey, randomness: $0) }
    }

    /// Encrypts every value of a record's data map, each with a fresh data key; all the randomness for the map
    /// (80 bytes per field) comes from one `SecureRandom` call.
    /// - Parameters:
    ///   - data: the plaintext map.
    ///   - accessKey: the access key.
    /// - Returns: the map of field strings, in the same order.
    public static func encrypt(_ data: RecordData, accessKey: AccessKey) -> RecordData {
        encrypt(data, accessKey: accessKey, random: SecureBytes(randomCount: randomByteCount * data.count))
    }

    // Safety: the reservoir fills exactly the buffer `SecureBytes(count:)` lends it (`randomByteCount * data.count`
    // bytes, what the private `encrypt(_:accessKey:random:)` slices) and keeps no pointer to it.
    /// Encrypts every value of a record's data map with keys and nonces from `reservoir` (bulk writers: one
    /// system call per 64 KiB of randomness instead of one per record).
    package static func encrypt(_ data: RecordData, accessKey: AccessKey, reservoir: RandomReservoir) -> RecordData {
        unsafe encrypt(
            data, accessKey: accessKey,
            random: SecureBytes(count: randomByteCount * data.count) { unsafe reservoir.fill($0) })
    }

    // Safety: `random` holds `k + n + n * data.count` bytes (filled by the reservoir, which writes exactly the
    // buffer it is lent), so the key, `edkN` and each member's `efN` slice (`i < data.count`) lie inside it. The
    // temporary buffers are sized exactly for `seal` (`k + t`, `plain.count + t`), which checks the sizes again,
    // and every pointer is used only inside its closure: `assemble` copies into a new `String`.
    /// Encrypts every value of a record's data map under ONE data key for the whole record, sealed once: every
    /// field carries the same `edk.edkN` and its own random `efN` (24 bytes, so nonces do not repeat under the
    /// key). Each field is still a complete `edk.edkN.ef.efN` quad that opens on its own, which is how every SDK
    /// decrypts (spec §3.1); the SDKs themselves write a fresh data key per field. Keys and nonces come from
    /// `reservoir` (32 + 24 + 24 per field bytes).
    package static func encryptSharingDataKey(
        _ data: RecordData, accessKey: AccessKey, reservoir: RandomReservoir
    ) -> RecordData {
        let k = SecretBox.keyByteCount
        let n = SecretBox.nonceByteCount
        let t = SecretBox.tagByteCount
        let random = unsafe SecureBytes(count: k + n + n * data.count) { unsafe reservoir.fill($0) }
        var encrypted = RecordData(capacity: data.count)
        unsafe random.withUnsafeBytes { r in
            let keyBytes = unsafe UnsafeRawBufferPointer(rebasing: r[0..<k])
            let edkN = unsafe UnsafeRawBufferPointer(rebasing: r[k..<(k + n)])
            // The slices have exactly the required lengths, so these calls cannot fail (see `encrypt(_:accessKey:randomness:)`).
            let dataKey = invariant("a 32-byte data key slice") { () throws(E3DBError) in
                try unsafe SecretBox.Key(rawRepresentation: keyBytes)
            }
            unsafe withUnsafeTemporaryAllocation(byteCount: k + t, alignment: 16) { edk in
                invariant("sealing the data key into its exact buffer") { () throws(E3DBError) in
                    _ = try unsafe SecretBox.seal(keyBytes, nonce: edkN, using: accessKey.secretBoxKey, into: edk)
                }
                for (i, member) in data.enumerated() {
                    let efN = unsafe UnsafeRawBufferPointer(rebasing: r[(k + n + i * n)..<(k + n + (i + 1) * n)])
                    var value = member.value
                    let field = value.withUTF8 { plain in
                        unsafe withUnsafeTemporaryAllocation(byteCount: plain.count + t, alignment: 16) { ef in
                            invariant("sealing the value into its exact buffer") { () throws(E3DBError) in
                                _ = try unsafe SecretBox.seal(
                                    UnsafeRawBufferPointer(plain), nonce: efN, using: dataKey, into: ef)
                            }
                            return unsafe assemble(UnsafeRawBufferPointer(edk), edkN, UnsafeRawBufferPointer(ef), efN)
                        }
                    }
                    encrypted.insert(key: member.key, value: field)
                }
            }
        }
        return encrypted
    }

    // Safety: `random` holds `randomByteCount * data.count` bytes (both callers), so slice `i < data.count` is inside
    // it, exactly the 80 bytes `encrypt(_:accessKey:randomness:)` reads, and used only inside the closure.
    /// Encrypts every value with its 80 bytes of `random` (data key, `edkN`, `efN`), in member order.
    private static func encrypt(_ data: RecordData, accessKey: AccessKey, random: SecureBytes) -> RecordData {
        var encrypted = RecordData(capacity: data.count)
        let n = randomByteCount
        unsafe random.withUnsafeBytes { r in
            for (i, member) in data.enumerated() {
                let slice = unsafe UnsafeRawBufferPointer(rebasing: r[(i * n)..<((i + 1) * n)])
                unsafe encrypted.insert(
                    key: member.key, value: encrypt(member.value, accessKey: accessKey, randomness: slice))
            }
        }
        return encrypted
    }

    /// Decrypts every field of a record's data map.
    /// - Parameters:
    ///   - data: the map of field strings.
    ///   - accessKey: the access key.
    ///   - decoding: base64url strictness.
    /// - Returns: the plaintext map, in the same order.
    /// - Throws: the errors of ``decrypt(_:accessKey:decoding:name:)``, with `context.field` naming the key.
    public static func decrypt(
        _ data: RecordData, accessKey: AccessKey, decoding: Base64Decoding = .strict
    ) throws(E3DBError) -> RecordData {
        var plaintext = RecordData(capacity: data.count)
        // Fields that share a data key (the same `edk.edkN` text) open it once per record.
        var memo = DataKeyMemo()
        for (key, field) in data {
            var text = field
            let result = text.withUTF8 { buf in
                Result { () throws(E3DBError) -> String in
                    // Safety: `buf` is the field's UTF-8, lent by `withUTF8` for the closure; `decrypt(utf8:...)`
                    // returns a `String` copy.
                    try unsafe decrypt(utf8: buf, accessKey: accessKey, decoding, key, memo: &memo)
                }
            }
            plaintext.insert(key: key, value: try result.get())
        }
        return plaintext
    }

    /// The data key opened for the last field of a record, by the exact text of its `edk.edkN` prefix: fields
    /// whose prefix is byte for byte the same seal the same key under the same nonce, so the key opened (and
    /// authenticated) once serves them all. The key stays in wiped storage; the prefix is ciphertext and nonce.
    struct DataKeyMemo {
        var prefix: [UInt8] = []
        var key: SecretBox.Key?

        func remembered(for candidate: UnsafeBufferPointer<UInt8>) -> SecretBox.Key? {
            // Safety: reads `candidate` (the caller's field text, borrowed for the call) up to its own `count` only.
            guard let key, candidate.count == prefix.count, unsafe candidate.elementsEqual(prefix) else { return nil }
            return key
        }
    }

    /// Encrypts one value with a given data key and nonces, to reproduce known answers.
    /// - Warning: never reuse a data key or nonce; use `encrypt(_:accessKey:)` in production.
    /// - Parameters:
    ///   - value: the plaintext.
    ///   - accessKey: the access key.
    ///   - dataKey: the 32-byte per-field data key.
    ///   - dataKeyNonce: the nonce sealing the data key (`edkN`).
    ///   - fieldNonce: the nonce sealing the value (`efN`).
    /// - Returns: the field string.
    public static func encrypt(
        _ value: String,
        accessKey: AccessKey,
        dataKey: SecretBox.Key,
        dataKeyNonce: SecretBox.Nonce,
        fieldNonce: SecretBox.Nonce
    ) -> String {
        var value = value
        // Safety: each pointer is lent for its closure only: `seal` copies the value's UTF-8 into a new box, and
        // `assemble` reads the four parts and returns a new `String`.
        let ef = value.withUTF8 { unsafe SecretBox.seal(UnsafeRawBufferPointer($0), using: dataKey, nonce: fieldNonce) }
        let edk = SecretBox.seal(dataKey.secureBytes, using: accessKey.secretBoxKey, nonce: dataKeyNonce)
        return unsafe edk.ciphertext.withUnsafeBytes { a in
            unsafe dataKeyNonce.rawRepresentation.withUnsafeBytes { b in
                unsafe ef.ciphertext.withUnsafeBytes { c in
                    unsafe fieldNonce.rawRepresentation.withUnsafeBytes { d in unsafe assemble(a, b, c, d) }
                }
            }
        }
    }

    // Safety: the caller lends at least `randomByteCount` (80) bytes, valid for the call; all three callers (here
    // and `RecordLineProcessors`) pass a slice of exactly 80 from a `SecureBytes` sized for it, so the three
    // slices of `r` are in bounds. `scratch` is `edkCount + efCount` bytes, split in two exact halves that `seal`
    // checks again; nothing escapes the closures (`assemble` returns a new `String`).
    /// Encrypts with 80 caller-supplied random bytes: data key (32), `edkN` (24), `efN` (24).
    ///
    /// Both parts are sealed into one temporary buffer and the field string is written in a single allocation;
    /// the data key is used from the (wiped) randomness buffer through one `SecretBox.Key`.
    static func encrypt(_ value: String, accessKey: AccessKey, randomness r: UnsafeRawBufferPointer) -> String {
        let k = SecretBox.keyByteCount
        let n = SecretBox.nonceByteCount
        let t = SecretBox.tagByteCount
        let keyBytes = unsafe UnsafeRawBufferPointer(rebasing: r[0..<k])
        let edkN = unsafe UnsafeRawBufferPointer(rebasing: r[k..<(k + n)])
        let efN = unsafe UnsafeRawBufferPointer(rebasing: r[(k + n)..<(k + 2 * n)])
        // The slices have exactly the required lengths, so these calls cannot fail; if one ever did, that is a
        // bug in this function, and it stops rather than fall back to another key or to empty output.
        let dataKey = invariant("a 32-byte data key slice") { () throws(E3DBError) in
            try unsafe SecretBox.Key(rawRepresentation: keyBytes)
        }
        var value = value
        return value.withUTF8 { plain in
            let edkCount = k + t
            let efCount = plain.count + t
            return unsafe withUnsafeTemporaryAllocation(byteCount: edkCount + efCount, alignment: 16) { scratch in
                let edk = unsafe UnsafeMutableRawBufferPointer(rebasing: scratch[0..<edkCount])
                let ef = unsafe UnsafeMutableRawBufferPointer(rebasing: scratch[edkCount..<(edkCount + efCount)])
                // Lengths are exact by construction, so the buffer APIs cannot throw here.
                unsafe dataKey.withUnsafeBytes { dk in
                    invariant("sealing the data key into its exact buffer") { () throws(E3DBError) in
                        _ = try unsafe SecretBox.seal(dk, nonce: edkN, using: accessKey.secretBoxKey, into: edk)
                    }
                }
                invariant("sealing the value into its exact buffer") { () throws(E3DBError) in
                    _ = try unsafe SecretBox.seal(UnsafeRawBufferPointer(plain), nonce: efN, using: dataKey, into: ef)
                }
                return unsafe assemble(UnsafeRawBufferPointer(edk), edkN, UnsafeRawBufferPointer(ef), efN)
            }
        }
    }

    // Safety: `length` is exactly three dots plus the four encoded lengths, so `out[o]` (a dot, written after at
    // most the previous parts) is in bounds, and `encodePublic` checks the room left in `out[o...]` and throws
    // (never writes past it) if it were short. The closure returns `o`, the count of bytes it initialized, all
    // ASCII.
    /// `b64u(a).b64u(b).b64u(c).b64u(d)`, written straight into one string's storage.
    static func assemble(
        _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ c: UnsafeRawBufferPointer,
        _ d: UnsafeRawBufferPointer
    ) -> String {
        let length =
            3 + Base64URL.encodedLength(of: a.count) + Base64URL.encodedLength(of: b.count)
            + Base64URL.encodedLength(of: c.count) + Base64URL.encodedLength(of: d.count)
        return unsafe String(unsafeUninitializedCapacity: length) { out in
            var o = 0
            func put(_ part: UnsafeRawBufferPointer, dot: Bool) {
                if dot {
                    unsafe out[o] = UInt8(ascii: ".")
                    o += 1
                }
                // The capacity is exact by construction, so the encoder cannot run out of room.
                o += invariant("base64url into an exact buffer") { () throws(E3DBError) in
                    // The four parts are ciphertexts and nonces, so the table encoder is safe here.
                    try unsafe Base64URL.encodePublic(part, into: UnsafeMutableBufferPointer(rebasing: out[o...]))
                }
            }
            unsafe put(a, dot: false)
            unsafe put(b, dot: true)
            unsafe put(c, dot: true)
            unsafe put(d, dot: true)
            return o
        }
    }

    /// Decrypts one field string.
    ///
    /// Checks, in order: exactly four parts; each part's base64url and decoded length (`edk` 48, `edkN` 24,
    /// `ef` at least 16, `efN` 24); the data key's authentication; the value's authentication; UTF-8 validity
    /// (a leading U+FEFF is kept).
    /// - Parameters:
    ///   - field: `edk.edkN.ef.efN`.
    ///   - accessKey: the access key.
    ///   - decoding: `Base64Decoding.strict` (default) or `Base64Decoding.lenient`.
    ///   - name: the record key, included in errors as `context.field`.
    /// - Returns: the plaintext value.
    /// - Throws: `E3DBError`: `.invalidField` (not 4 parts); `.invalidBase64` or `.invalidLength` with
    ///   `context.part` `edk`, `edkN`, `ef` or `efN`; `.authenticationFailed` with part `edk` (wrong access key or
    ///   changed `edk`/`edkN`) or `ef` (changed `ef`/`efN`); `.invalidUTF8` (part `ef`).
    public static func decrypt(
        _ field: some StringProtocol,
        accessKey: AccessKey,
        decoding: Base64Decoding = .strict,
        name: String? = nil
    ) throws(E3DBError) -> String {
        var text = String(field)
        var memo = DataKeyMemo()
        let result = text.withUTF8 { buf in
            Result { () throws(E3DBError) -> String in
                // Safety: `buf` is the field's UTF-8, lent by `withUTF8` for the closure; `decrypt(utf8:...)` returns a
                // `String` copy.
                try unsafe decrypt(utf8: buf, accessKey: accessKey, decoding, name, memo: &memo)
            }
        }
        return try result.get()
    }

    // Safety: (untrusted input) `buf` is the caller's borrowed field text. The dots are found by `buf.indices`, so
    // the four ranges lie in `0...buf.count`. `scratch` holds the sum of the four parts' maximum decoded lengths,
    // and each `part` is decoded at most once into its own `room`-byte window at `offset`, so the windows never
    // pass `capacity` (skipped parts only leave room unused); `decodePublic` checks its output room and returns
    // `written <= room`. The part buffers are used only inside the `scratch` closure; the memo copies the prefix
    // bytes, and the value leaves as a validated `String` copy of `plain[0..<plainCount]`, a buffer sized
    // `max(plainCount, 1)` that `SecretBox.open` fills only after the tag verifies and after checking its size.
    /// Decrypts from the field's UTF-8 bytes. The four parts are decoded into one temporary buffer (on the stack
    /// for ordinary sizes), the data key is opened straight into wiped storage, and the value is opened into a
    /// temporary buffer that is validated as UTF-8: no per-part `Data`, one heap object for the data key.
    ///
    /// When `memo` holds the key of a field with the same `edk.edkN` text, that key is used without decoding or
    /// opening `edk` again; otherwise the key opened here replaces the memo's.
    private static func decrypt(
        utf8 buf: UnsafeBufferPointer<UInt8>, accessKey: AccessKey, _ decoding: Base64Decoding, _ name: String?,
        memo: inout DataKeyMemo
    ) throws(E3DBError) -> String {
        // Split on '.' by bytes (a Character-level split is several times slower).
        var dots = (0, 0, 0)
        var count = 0
        for i in buf.indices where unsafe buf[i] == UInt8(ascii: ".") {
            count += 1
            switch count {
            case 1: dots.0 = i
            case 2: dots.1 = i
            case 3: dots.2 = i
            default: break
            }
        }
        guard count == 3 else {
            throw E3DBError(
                .invalidField,
                "a record field has 4 '.'-separated parts, found \(count + 1)"
                    + (name.map { " (field \"\($0)\")" } ?? ""),
                context: .init(field: name, expected: 4, actual: count + 1))
        }
        let ranges = [0..<dots.0, (dots.0 + 1)..<dots.1, (dots.1 + 1)..<dots.2, (dots.2 + 1)..<buf.count]
        let capacity = ranges.reduce(0) { $0 + Base64URL.maximumDecodedLength(ofEncodedLength: $1.count) }
        let outcome = unsafe withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 16) { scratch in
            Result { () throws(E3DBError) -> String in
                var offset = 0
                func part(_ index: Int, _ label: String) throws(E3DBError) -> UnsafeRawBufferPointer {
                    let room = Base64URL.maximumDecodedLength(ofEncodedLength: ranges[index].count)
                    let out = unsafe UnsafeMutableRawBufferPointer(rebasing: scratch[offset..<(offset + room)])
                    let written: Int
                    do {
                        // Ciphertexts and nonces, none secret: the table decoder (same results and errors).
                        written = try unsafe Base64URL.decodePublic(
                            utf8: UnsafeBufferPointer(rebasing: buf[ranges[index]]), into: out,
                            lenient: decoding == .lenient)
                    } catch {
                        throw E3DBError(
                            .invalidBase64,
                            "\(label) is not valid base64url" + (name.map { " (field \"\($0)\")" } ?? ""),
                            context: .init(field: name, part: label, offset: error.context.offset))
                    }
                    offset += room
                    return unsafe UnsafeRawBufferPointer(rebasing: out[0..<written])
                }
                let prefix = unsafe UnsafeBufferPointer(rebasing: buf[0..<dots.1])
                let remembered = unsafe memo.remembered(for: prefix)
                var edk = unsafe UnsafeRawBufferPointer(start: nil, count: 0)
                var edkN = unsafe edk
                if remembered == nil {
                    unsafe edk = try unsafe part(0, "edk")
                    try check(edk.count == encryptedDataKeyByteCount, "edk", encryptedDataKeyByteCount, edk.count, name)
                    unsafe edkN = try unsafe part(1, "edkN")
                    try check(
                        edkN.count == SecretBox.nonceByteCount, "edkN", SecretBox.nonceByteCount, edkN.count, name)
                }
                let ef = try unsafe part(2, "ef")
                try check(
                    ef.count >= SecretBox.tagByteCount, "ef", SecretBox.tagByteCount, ef.count, name, atLeast: true)
                let efN = try unsafe part(3, "efN")
                try check(efN.count == SecretBox.nonceByteCount, "efN", SecretBox.nonceByteCount, efN.count, name)

                let dataKey: SecretBox.Key
                if let remembered {
                    dataKey = remembered
                } else {
                    do {
                        dataKey = try unsafe SecretBox.Key(
                            SecretBox.openSecret(edk, nonce: edkN, using: accessKey.secretBoxKey))
                    } catch {
                        throw E3DBError(
                            .authenticationFailed,
                            "the data key does not open with this access key"
                                + (name.map { " (field \"\($0)\")" } ?? ""),
                            context: .init(field: name, part: "edk"))
                    }
                    memo.prefix.removeAll(keepingCapacity: true)
                    unsafe memo.prefix.append(contentsOf: prefix)
                    memo.key = dataKey
                }
                let plainCount = ef.count - SecretBox.tagByteCount
                let opened = unsafe withUnsafeTemporaryAllocation(byteCount: max(plainCount, 1), alignment: 16) {
                    plain in
                    Result { () throws(E3DBError) -> String? in
                        do {
                            _ = try unsafe SecretBox.open(ef, nonce: efN, using: dataKey, into: plain)
                        } catch {
                            throw E3DBError(
                                .authenticationFailed,
                                "the field value does not authenticate" + (name.map { " (field \"\($0)\")" } ?? ""),
                                context: .init(field: name, part: "ef"))
                        }
                        // Validated (never repaired) UTF-8; a leading U+FEFF is kept.
                        return unsafe String(
                            validating: UnsafeRawBufferPointer(rebasing: plain[0..<plainCount]).bindMemory(
                                to: UInt8.self), as: UTF8.self)
                    }
                }
                guard let value = try opened.get() else {
                    throw E3DBError(
                        .invalidUTF8,
                        "the decrypted value is not valid UTF-8" + (name.map { " (field \"\($0)\")" } ?? ""),
                        context: .init(field: name, part: "ef"))
                }
                return value
            }
        }
        return try outcome.get()
    }

    private static func check(
        _ ok: Bool, _ part: String, _ expected: Int, _ actual: Int, _ name: String?, atLeast: Bool = false
    ) throws(E3DBError) {
        guard !ok else { return }
        throw E3DBError(
            .invalidLength,
            "\(part) must be \(atLeast ? "at least " : "")\(expected) bytes, found \(actual)"
                + (name.map { " (field \"\($0)\")" } ?? ""),
            context: .init(field: name, part: part, expected: expected, actual: actual))
    }
}

/// Runs `body`, which cannot fail by construction; a failure is a bug in E3DBKit, never a property of the input,
/// so it stops the process instead of continuing with a substitute key, digest or empty output.
@inline(__always)
func invariant<T>(_ what: StaticString, _ body: () throws(E3DBError) -> T) -> T {
    do {
        return try body()
    } catch {
        preconditionFailure("E3DBKit internal invariant broken: \(what) (\(error.code.rawValue))")
    }
}
