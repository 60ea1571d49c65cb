import E3DBBLAKE2bReference
import E3DBPrimitives
import E3DBTestSupport
import Foundation
import Testing

func code(_ error: any Error) -> E3DBError.Code? { (error as? E3DBError)?.code }

func expectCode(
    _ expected: E3DBError.Code, _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) {
    do {
        try body()
        Issue.record("expected \(expected), but nothing was thrown", sourceLocation: sourceLocation)
    } catch {
        #expect(code(error) == expected, "expected \(expected), got \(error)", sourceLocation: sourceLocation)
    }
}

@Suite("Key and nonce lengths")
struct LengthTests {
    static let offByOne = [0, 1, 23, 25, 31, 33, 63, 65]

    @Test(arguments: offByOne)
    func boxKeys(_ n: Int) {
        let bytes = [UInt8](repeating: 7, count: n)
        expectCode(.invalidKeyLength) { _ = try Box.PrivateKey(rawRepresentation: bytes) }
        expectCode(.invalidKeyLength) { _ = try Box.PublicKey(rawRepresentation: bytes) }
        expectCode(.invalidKeyLength) { _ = try SecretBox.Key(rawRepresentation: bytes) }
        expectCode(.invalidKeyLength) { _ = try SecretStream.Key(rawRepresentation: bytes) }
        expectCode(.invalidKeyLength) { _ = try Ed25519.PublicKey(rawRepresentation: bytes) }
        expectCode(.invalidKeyLength) { _ = try Ed25519.PrivateKey(rawRepresentation: bytes) }
        expectCode(.invalidKeyLength) { _ = try Box.PrivateKey(seed: SecureBytes(copying: bytes)) }
        expectCode(.invalidKeyLength) { _ = try Ed25519.PrivateKey(seed: SecureBytes(copying: bytes)) }
    }

    @Test(arguments: [0, 1, 23, 25, 32])
    func nonces(_ n: Int) {
        let bytes = [UInt8](repeating: 1, count: n)
        expectCode(.invalidNonceLength) { _ = try Box.Nonce(rawRepresentation: bytes) }
        expectCode(.invalidNonceLength) { _ = try SecretBox.Nonce(rawRepresentation: bytes) }
        expectCode(.invalidNonceLength) { _ = try SecretStream.Header(rawRepresentation: bytes) }
    }

    @Test func errorCarriesLengths() {
        do {
            _ = try SecretBox.Key(rawRepresentation: [UInt8](repeating: 0, count: 31))
            Issue.record("accepted a 31-byte key")
        } catch {
            #expect(error.context.expected == 32)
            #expect(error.context.actual == 31)
            #expect(error.description.contains("expected 32"))
        }
    }

    @Test func ed25519HalvesMustAgree() throws {
        let a = Ed25519.PrivateKey()
        let b = Ed25519.PrivateKey()
        var raw = a.withUnsafeBytes { Array($0) }
        raw.replaceSubrange(32..<64, with: b.publicKey.rawRepresentation)
        expectCode(.inconsistentKey) { _ = try Ed25519.PrivateKey(rawRepresentation: raw) }
    }
}

@Suite("Tampering")
struct TamperTests {
    @Test func everyBitOfASecretBoxIsAuthenticated() throws {
        let key = SecretBox.Key()
        let sealed = SecretBox.seal(Data("attack at dawn, 32 bytes of it!!".utf8), using: key)
        let combined = sealed.combined
        for bit in 0..<(combined.count * 8) {
            var bad = combined
            bad[bit / 8] ^= UInt8(1 << (bit % 8))
            expectCode(.authenticationFailed) { _ = try SecretBox.open(SecretBox.SealedBox(combined: bad), using: key) }
        }
    }

    @Test func everyBitOfABoxIsAuthenticated() throws {
        let alice = Box.PrivateKey()
        let bob = Box.PrivateKey()
        let sealed = try Box.seal(Data(repeating: 0x42, count: 32), to: bob.publicKey, from: alice)
        let combined = sealed.combined
        for bit in 0..<(combined.count * 8) {
            var bad = combined
            bad[bit / 8] ^= UInt8(1 << (bit % 8))
            expectCode(.authenticationFailed) {
                _ = try Box.open(Box.SealedBox(combined: bad), from: alice.publicKey, to: bob)
            }
        }
    }

    @Test func everyBitOfAnAnonymousBoxIsAuthenticated() throws {
        let bob = Box.PrivateKey()
        let sealed = try AnonymousBox.seal(Data("hi".utf8), to: bob.publicKey)
        for bit in 0..<(sealed.count * 8) {
            var bad = sealed
            bad[bit / 8] ^= UInt8(1 << (bit % 8))
            expectCode(.authenticationFailed) { _ = try AnonymousBox.open(bad, recipient: bob) }
        }
    }

    @Test func truncatedAndExtended() throws {
        let key = SecretBox.Key()
        let sealed = SecretBox.seal(Data("hello".utf8), using: key)
        let combined = sealed.combined
        for length in 0..<combined.count {
            let cut = combined.prefix(length)
            do {
                _ = try SecretBox.open(SecretBox.SealedBox(combined: cut), using: key)
                Issue.record("truncation to \(length) bytes accepted")
            } catch {
                #expect([.invalidLength, .authenticationFailed].contains(code(error)))
            }
        }
        expectCode(.authenticationFailed) {
            _ = try SecretBox.open(SecretBox.SealedBox(combined: combined + [0]), using: key)
        }
    }

    @Test func wrongKeys() throws {
        let alice = Box.PrivateKey()
        let bob = Box.PrivateKey()
        let eve = Box.PrivateKey()
        let sealed = try Box.seal(Data("x".utf8), to: bob.publicKey, from: alice)
        expectCode(.authenticationFailed) { _ = try Box.open(sealed, from: eve.publicKey, to: bob) }
        expectCode(.authenticationFailed) { _ = try Box.open(sealed, from: alice.publicKey, to: eve) }
        expectCode(.authenticationFailed) {
            _ = try SecretBox.open(SecretBox.seal(Data("x".utf8), using: SecretBox.Key()), using: SecretBox.Key())
        }
    }

    @Test func lowOrderPublicKey() throws {
        let zero = try Box.PublicKey(rawRepresentation: [UInt8](repeating: 0, count: 32))
        expectCode(.weakPublicKey) { _ = try Box.seal(Data(), to: zero, from: Box.PrivateKey()) }
        expectCode(.weakPublicKey) { _ = try Box.SharedKey(recipient: zero, sender: Box.PrivateKey()) }
        expectCode(.weakPublicKey) { _ = try Box.PrivateKey().rawSharedSecret(with: zero) }
    }

    /// `crypto_box_seal`'s status is checked: a low-order recipient key (0, 1, an order-8 point) is refused
    /// instead of returning an all-zero, unopenable "sealed box".
    @Test(arguments: [
        String(repeating: "00", count: 32),
        "01" + String(repeating: "00", count: 31),
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
    ])
    func anonymousBoxRefusesLowOrderRecipients(_ hex: String) throws {
        let weak = try Box.PublicKey(rawRepresentation: Hex.decode(hex))
        #expect(throws: E3DBError(.weakPublicKey)) { try AnonymousBox.seal(Data("secret".utf8), to: weak) }
    }
}

@Suite("SecretStream")
struct SecretStreamTests {
    func sealed(_ messages: [String]) throws -> (SecretStream.Key, SecretStream.Header, [Data]) {
        let key = SecretStream.Key()
        var encryptor = SecretStream.Encryptor(key: key)
        let header = encryptor.header
        var chunks: [Data] = []
        for m in messages.dropLast() { chunks.append(try encryptor.seal(Data(m.utf8))) }
        chunks.append(encryptor.finish(Data((messages.last ?? "").utf8)))
        return (key, header, chunks)
    }

    @Test func streamEndingWithoutFinalIsNotFinished() throws {
        let (key, header, chunks) = try sealed(["a", "b", "c"])
        var decryptor = SecretStream.Decryptor(key: key, header: header)
        _ = try decryptor.open(chunks[0])
        _ = try decryptor.open(chunks[1])
        let finishedEarly = decryptor.isFinished
        #expect(!finishedEarly)
        _ = try decryptor.open(chunks[2])
        let finished = decryptor.isFinished
        #expect(finished)
        expectCode(.streamFinished) { _ = try decryptor.open(chunks[2]) }
    }

    @Test func finalTagRefusedBySeal() throws {
        var refusing = SecretStream.Encryptor(key: SecretStream.Key())
        expectCode(.invalidParameter) { _ = try refusing.seal(Data(), tag: .final) }
        // The buffer variant refuses FINAL too; only the consuming finish(_:into:) seals it.
        let key = SecretStream.Key()
        var encryptor = SecretStream.Encryptor(key: key)
        let header = encryptor.header
        let message = UnsafeMutableRawBufferPointer.allocate(byteCount: 33, alignment: 1)
        let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 50, alignment: 1)
        defer {
            message.deallocate()
            out.deallocate()
        }
        message.initializeMemory(as: UInt8.self, repeating: 4)
        out.initializeMemory(as: UInt8.self, repeating: 0)
        do {
            _ = try encryptor.seal(UnsafeRawBufferPointer(message), tag: .final, into: out)
            Issue.record("seal(_:tag:into:) accepted FINAL")
        } catch {
            #expect(error.code == .invalidParameter)
        }
        #expect(Data(out) == Data(count: 50), "nothing sealed when FINAL is refused")
        let written = try encryptor.finish(UnsafeRawBufferPointer(message), into: out)
        #expect(written == 50)
        var decryptor = SecretStream.Decryptor(key: key, header: header)
        let opened = try decryptor.open(Data(out))
        #expect(opened.tag == .final && opened.message == Data(message) && decryptor.isFinished)
    }

    @Test func shortChunkIsTruncated() throws {
        let (key, header, chunks) = try sealed(["hello"])
        for length in 0..<SecretStream.overheadByteCount {
            var decryptor = SecretStream.Decryptor(key: key, header: header)
            expectCode(.streamTruncated) { _ = try decryptor.open(chunks[0].prefix(length)) }
        }
        for length in SecretStream.overheadByteCount..<chunks[0].count {
            var decryptor = SecretStream.Decryptor(key: key, header: header)
            expectCode(.authenticationFailed) { _ = try decryptor.open(chunks[0].prefix(length)) }
        }
    }

    @Test func failingChunkIsNamed() throws {
        let (key, header, chunks) = try sealed(["a", "b", "c"])
        var decryptor = SecretStream.Decryptor(key: key, header: header)
        _ = try decryptor.open(chunks[0])
        do {
            _ = try decryptor.open(chunks[2])
            Issue.record("reordered chunk accepted")
        } catch {
            #expect(error.code == .authenticationFailed)
            #expect(error.context.chunkIndex == 1)
        }
    }

    @Test func bufferAPIsMatchDataAPIs() throws {
        let key = SecretStream.Key()
        var encryptor = SecretStream.Encryptor(key: key)
        let message = [UInt8](repeating: 9, count: 1000)
        var out = [UInt8](repeating: 0, count: 1017)
        let written = try message.withUnsafeBytes { m in
            try out.withUnsafeMutableBytes { o in try encryptor.seal(m, tag: .message, into: o) }
        }
        #expect(written == 1017)
        var decryptor = SecretStream.Decryptor(key: key, header: encryptor.header)
        var plain = [UInt8](repeating: 0, count: 1000)
        let (count, tag) = try out.withUnsafeBytes { c in
            try plain.withUnsafeMutableBytes { p in try decryptor.open(c, into: p) }
        }
        #expect(count == 1000 && tag == .message && plain == message)
        var small = [UInt8](repeating: 0, count: 10)
        expectCode(.invalidLength) {
            _ = try message.withUnsafeBytes { m in
                try small.withUnsafeMutableBytes { o in try encryptor.seal(m, tag: .message, into: o) }
            }
        }
    }
}

@Suite("Secrets are redacted")
struct RedactionTests {
    @Test func descriptionsHideKeyBytes() throws {
        let box = Box.PrivateKey()
        let signing = Ed25519.PrivateKey()
        let secret = SecretBox.Key()
        let stream = SecretStream.Key()
        let bytes = SecureBytes(randomCount: 32)
        let shared = try Box.SharedKey(recipient: Box.PrivateKey().publicKey, sender: box)
        let encodedSecrets = [box.base64URLEncoded, signing.base64URLEncoded, secret.base64URLEncoded]
        let values: [Any] = [box, signing, secret, stream, bytes, shared]
        for value in values {
            for text in [
                String(describing: value), String(reflecting: value), "\(Mirror(reflecting: value).children.count)",
            ] {
                #expect(text.contains("redacted") || text == "0", "not redacted: \(text)")
                for encoded in encodedSecrets { #expect(!text.contains(encoded)) }
            }
            #expect(Mirror(reflecting: value).children.isEmpty)
        }
        // Errors never carry key bytes either.
        do {
            _ = try Box.PrivateKey(rawRepresentation: box.withUnsafeBytes { Array($0) } + [0])
        } catch {
            #expect(!error.description.contains(box.base64URLEncoded))
        }
    }
}

@Suite("BLAKE2b")
struct BLAKE2bTests {
    @Test func matchesGNUb2sum() async throws {
        let b2sum = ["/usr/bin/b2sum", "/opt/homebrew/bin/b2sum", "/usr/local/bin/b2sum"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let b2sum else {
            print("b2sum is not installed; skipping the b2sum comparison")
            return
        }
        for size in [0, 1, 128, 129, 100_000] {
            let data = SecureRandom.bytes(count: size)
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-b2-\(UUID().uuidString)")
            try data.write(to: url)
            defer { try? FileManager.default.removeItem(at: url) }
            let output = try await ChildProcess.run(URL(fileURLWithPath: b2sum), [url.path]).stdoutText
            let expected = String(output.prefix(128))
            let digest = try BLAKE2b.hash(data: data, outputByteCount: 64)
            #expect(digest.map { String(format: "%02x", $0) }.joined() == expected, "size \(size)")
        }
    }

    @Test func libsodiumAndLibb2AgreeOnRandomInputs() throws {
        for size in [0, 1, 64, 127, 128, 129, 255, 256, 1000, 65536] {
            let data = SecureRandom.bytes(count: size)
            for out in [16, 32, 64] {
                #expect(
                    try BLAKE2b.hash(data: data, outputByteCount: out)
                        == BLAKE2bReference.hash(data: data, outputByteCount: out))
            }
            let key = SecureBytes(randomCount: 32)
            #expect(try BLAKE2b.hash(data: data, key: key) == BLAKE2bReference.hash(data: data, key: key))
        }
    }

    @Test func copiesForkTheState() throws {
        var a = try BLAKE2b(outputByteCount: 32)
        a.update(data: Data("abc".utf8))
        var b = a
        b.update(data: Data("def".utf8))
        #expect(a.finalize() == (try BLAKE2b.hash(data: Data("abc".utf8))))
        #expect(b.finalize() == (try BLAKE2b.hash(data: Data("abcdef".utf8))))
        #expect(a.finalize() == a.finalize())
    }
}

@Suite("Base64")
struct Base64Tests {
    @Test func roundTripsEveryLength() throws {
        for n in 0..<200 {
            let data = SecureRandom.bytes(count: n)
            let url = Base64URL.encode(data)
            #expect(url.count == Base64URL.encodedLength(of: n))
            #expect(try Base64URL.decode(url) == data)
            #expect(try Base64.decode(Base64.encode(data)) == data)
        }
    }

    @Test func errorsNameTheOffset() {
        do {
            _ = try Base64URL.decode("AAAA.AAA")
            Issue.record("accepted a dot")
        } catch {
            #expect(error.code == .invalidBase64)
            #expect(error.context.offset == 4)
            #expect(!error.message.contains("."), "the message names the offset, not the character")
        }
    }

    /// D12: a decode error never shows a byte of the input (it may be a key), only the offset.
    @Test func errorsNeverEchoTheCharacter() throws {
        var raw = [UInt8](repeating: UInt8(ascii: "A"), count: 20) + [0xDE, 0xAD] + [UInt8](repeating: 0x41, count: 10)
        let text = String(decoding: raw, as: UTF8.self)
        for lenient in [false, true] {
            do {
                _ = try lenient ? Base64URL.decodeLenient(text) : Base64URL.decode(text)
                Issue.record("accepted raw bytes")
            } catch {
                #expect(error.code == .invalidBase64)
                #expect(error.context.offset == 20)
                let shown = error.description.lowercased()
                #expect(!shown.contains("0xde") && !shown.contains("222") && !shown.contains("\u{07AD}"), "\(shown)")
            }
        }
        raw[20] = UInt8(ascii: "*")
        #expect(throws: E3DBError(.invalidBase64)) { try Base64URL.decodeSecret(String(decoding: raw, as: UTF8.self)) }
        do {
            _ = try Base64URL.decodeSecret(String(decoding: raw, as: UTF8.self))
        } catch {
            #expect(!error.description.contains("*"))
            #expect(error.context.offset == 20)
        }
    }

    @Test func decodeSecretMatchesDecode() throws {
        for n in 0..<70 {
            let data = SecureRandom.bytes(count: n)
            let secret = try Base64URL.decodeSecret(Base64URL.encode(data))
            #expect(secret.withUnsafeBytes { Data($0) } == data)
        }
    }

    @Test func strictIsASubsetOfLenient() throws {
        // Every strict-valid string is lenient-valid with the same bytes.
        let alphabet = Array("ABab09-_+/=. ".utf8)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            let length = Int.random(in: 0...9, using: &generator)
            let text = String(
                decoding: (0..<length).map { _ in alphabet.randomElement(using: &generator) ?? 65 }, as: UTF8.self)
            if let strict = try? Base64URL.decode(text) {
                #expect(try Base64URL.decodeLenient(text) == strict, "\(text)")
                #expect(Base64URL.encode(strict) == text, "strict decoding is canonical: \(text)")
            }
        }
    }
}

@Suite("RandomReservoir")
struct RandomReservoirTests {
    @Test("hands out each byte once, across refills and threads; never zeros")
    func distinctOutputs() async throws {
        let reservoir = RandomReservoir()
        // 3 × 64 KiB + a bit: crosses refills, with requests that straddle the end of a block.
        var chunks: [[UInt8]] = []
        for size in [1, 31, 800, 65_000, 70_000, 80_000] {
            var out = [UInt8](repeating: 0, count: size)
            out.withUnsafeMutableBytes { reservoir.fill($0) }
            chunks.append(out)
        }
        let all = chunks.flatMap { $0 }
        #expect(all.count == 215_832)
        // Uniform bytes: every value appears, none dominates.
        var counts = [Int](repeating: 0, count: 256)
        for byte in all { counts[Int(byte)] += 1 }
        #expect(counts.allSatisfy { $0 > 600 && $0 < 1100 }, "\(counts.min() ?? 0)...\(counts.max() ?? 0)")
        // No 32-byte window is handed out twice, also with four threads drawing at once.
        let samples = await withTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    (0..<2_000).map { _ in
                        var key = [UInt8](repeating: 0, count: 32)
                        key.withUnsafeMutableBytes { reservoir.fill($0) }
                        return key
                    }
                }
            }
            var result: [[UInt8]] = []
            for await part in group { result += part }
            return result
        }
        #expect(Set(samples).count == 8_000)
        #expect(!samples.contains([UInt8](repeating: 0, count: 32)))
    }
}
