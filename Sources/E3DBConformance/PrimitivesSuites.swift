import E3DBPrimitives
import Foundation

/// Vector suites for E3DBPrimitives: `TestVectors/primitives/*.json` (PyNaCl, hashlib, cryptography, published
/// standards) and the Wycheproof Ed25519 and X25519 files in `../shared/vectors/wycheproof/`.
package enum PrimitivesSuites {
    package static let all: [VectorSuite] = [
        box, sealedBox, secretBox, ed25519, secretStream, blake2b, hashes, pbkdf2, argon2id, base64,
        wycheproofEd25519, wycheproofX25519,
    ]

    /// Loads `TestVectors/primitives/<file>` and turns each test into a case.
    static func suite<T: Decodable & Sendable>(
        _ name: String,
        file: String,
        _ make: @escaping @Sendable (T) throws -> Void
    ) -> VectorSuite where T: IdentifiedVector {
        VectorSuite(name: name) { locations in
            let file = try VectorFile<T>.load(locations.projectFile("primitives/\(file)"))
            return file.tests.map { test in
                VectorCase(suite: name, id: String(test.tcId), comment: test.comment) { try make(test) }
            }
        }
    }

    // MARK: box

    struct BoxTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let senderPrivate: String, senderPublic: String, recipientPrivate: String, recipientPublic: String
        let senderSeed: String?, recipientSeed: String?
        let nonce: String, msg: String, ct: String, error: String?, sharedSecret: String?
    }

    package static let box = suite("primitives/box", file: "box.json") { (t: BoxTest) in
        let sender = try Box.PrivateKey(rawRepresentation: Hex.decode(t.senderPrivate))
        let recipient = try Box.PrivateKey(rawRepresentation: Hex.decode(t.recipientPrivate))
        let senderPublic = try Box.PublicKey(rawRepresentation: Hex.decode(t.senderPublic))
        let nonce = try Box.Nonce(rawRepresentation: Hex.decode(t.nonce))
        let ct = try Hex.decode(t.ct)
        if t.result == .valid, let seed = t.senderSeed {
            let derived = try Box.PrivateKey(seed: SecureBytes(copying: Hex.decode(seed)))
            try requireEqual(
                derived.publicKey.rawRepresentation, try Hex.decode(t.senderPublic), "seed-derived public key")
            try unsafe requireEqual(
                derived.withUnsafeBytes { unsafe Data($0) }, try Hex.decode(t.senderPrivate), "seed-derived secret key")
        }
        if t.result == .valid {
            try requireEqual(sender.publicKey, senderPublic, "public key from private key")
            let sealed = try Box.seal(Hex.decode(t.msg), to: recipient.publicKey, from: sender, nonce: nonce)
            try requireEqual(sealed.ciphertext, ct, "ciphertext")
            try requireEqual(try Box.open(sealed, from: senderPublic, to: recipient), try Hex.decode(t.msg), "opened")
            let shared = try Box.SharedKey(recipient: senderPublic, sender: recipient)
            try requireEqual(try Box.open(sealed, using: shared), try Hex.decode(t.msg), "opened with shared key")
            if let expected = t.sharedSecret {
                let raw = try sender.rawSharedSecret(with: recipient.publicKey)
                try unsafe requireEqual(
                    raw.withUnsafeBytes { unsafe Data($0) }, try Hex.decode(expected), "X25519 shared secret")
            }
        } else {
            try requireError(t.error) {
                let box = try Box.SealedBox(nonce: nonce, ciphertext: ct)
                _ = try Box.open(box, from: senderPublic, to: recipient)
            }
        }
    }

    struct SealedBoxTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let recipientPrivate: String, recipientPublic: String, msg: String, sealed: String, error: String?
    }

    package static let sealedBox = suite("primitives/sealedbox", file: "sealedbox.json") { (t: SealedBoxTest) in
        let recipient = try Box.PrivateKey(rawRepresentation: Hex.decode(t.recipientPrivate))
        try requireEqual(recipient.publicKey.rawRepresentation, try Hex.decode(t.recipientPublic), "public key")
        if t.result == .valid {
            try requireEqual(
                try AnonymousBox.open(Hex.decode(t.sealed), recipient: recipient), try Hex.decode(t.msg), "opened")
            let mine = try AnonymousBox.seal(try Hex.decode(t.msg), to: recipient.publicKey)
            try requireEqual(try AnonymousBox.open(mine, recipient: recipient), try Hex.decode(t.msg), "own round trip")
        } else {
            try requireError(t.error) { _ = try AnonymousBox.open(Hex.decode(t.sealed), recipient: recipient) }
        }
    }

    // MARK: secretbox

    struct SecretBoxTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let key: String, nonce: String, msg: String, ct: String, error: String?
    }

    package static let secretBox = suite("primitives/secretbox", file: "secretbox.json") { (t: SecretBoxTest) in
        let key = try SecretBox.Key(rawRepresentation: Hex.decode(t.key))
        let nonce = try SecretBox.Nonce(rawRepresentation: Hex.decode(t.nonce))
        let ct = try Hex.decode(t.ct)
        if t.result == .valid {
            let sealed = SecretBox.seal(try Hex.decode(t.msg), using: key, nonce: nonce)
            try requireEqual(sealed.ciphertext, ct, "ciphertext")
            try requireEqual(try SecretBox.open(sealed, using: key), try Hex.decode(t.msg), "opened")
            let detached = try SecretBox.openDetached(
                sealed.encryptedMessage, tag: sealed.tag, nonce: nonce, using: key)
            try requireEqual(detached, try Hex.decode(t.msg), "opened detached")
            let combined = try SecretBox.SealedBox(combined: sealed.combined)
            try requireEqual(combined, sealed, "combined round trip")
        } else {
            try requireError(t.error) {
                _ = try SecretBox.open(SecretBox.SealedBox(nonce: nonce, ciphertext: ct), using: key)
            }
        }
    }

    // MARK: ed25519

    struct Ed25519Test: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let seed: String, `public`: String, `private`: String, msg: String, sig: String, error: String?
    }

    package static let ed25519 = suite("primitives/ed25519", file: "ed25519.json") { (t: Ed25519Test) in
        let publicKey = try Ed25519.PublicKey(rawRepresentation: Hex.decode(t.public))
        let msg = try Hex.decode(t.msg)
        let sig = try Hex.decode(t.sig)
        if let error = t.error {
            try requireError(error) { _ = try Ed25519.PrivateKey(rawRepresentation: Hex.decode(t.private)) }
            return
        }
        let fromSeed = try Ed25519.PrivateKey(seed: SecureBytes(copying: Hex.decode(t.seed)))
        let fromRaw = try Ed25519.PrivateKey(rawRepresentation: Hex.decode(t.private))
        try requireEqual(fromSeed.publicKey, publicKey, "public key from seed")
        try requireEqual(fromRaw.publicKey, publicKey, "public key from 64-byte secret key")
        try unsafe requireEqual(
            fromSeed.withUnsafeBytes { unsafe Data($0) }, try Hex.decode(t.private), "64-byte secret key")
        if t.result == .valid {
            try requireEqual(fromSeed.signature(for: msg), sig, "deterministic signature")
            try requireEqual(publicKey.isValidSignature(sig, for: msg), true, "verifies")
        } else {
            try requireEqual(publicKey.isValidSignature(sig, for: msg), false, "rejects")
        }
    }

    // MARK: secretstream

    struct SecretStreamTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let key: String, header: String, chunks: [String], msgs: [String], tags: [String]
        let error: String?, failAt: Int?
    }

    package static let secretStream = suite("primitives/secretstream", file: "secretstream.json") {
        (t: SecretStreamTest) in
        let key = try SecretStream.Key(rawRepresentation: Hex.decode(t.key))
        let header = try SecretStream.Header(rawRepresentation: Hex.decode(t.header))
        var decryptor = SecretStream.Decryptor(key: key, header: header)
        if t.result == .valid {
            for (index, chunk) in t.chunks.enumerated() {
                let (message, tag) = try decryptor.open(Hex.decode(chunk))
                try requireEqual(message, try Hex.decode(t.msgs[index]), "chunk \(index) plaintext")
                try requireEqual("\(tag)", t.tags[index], "chunk \(index) tag")
                if tag == .rekey {
                    // libsodium rekeys automatically after a REKEY tag; nothing to do.
                }
            }
            try requireEqual(decryptor.isFinished, true, "finished")
            // Our own encryptor, read back by our decryptor.
            var encryptor = SecretStream.Encryptor(key: key)
            var chunks: [Data] = []
            for message in t.msgs.dropLast() { chunks.append(try encryptor.seal(Hex.decode(message))) }
            let last = try Hex.decode(t.msgs.last ?? "")
            let newHeader = encryptor.header
            chunks.append(encryptor.finish(last))
            var reader = SecretStream.Decryptor(key: key, header: newHeader)
            for (index, chunk) in chunks.enumerated() {
                try requireEqual(try reader.open(chunk).message, try Hex.decode(t.msgs[index]), "own chunk \(index)")
            }
            return
        }
        let failAt = t.failAt ?? 0
        for (index, chunk) in t.chunks.enumerated() {
            if index < failAt {
                _ = try decryptor.open(Hex.decode(chunk))
            } else {
                try requireError(t.error == "missingFinal" ? nil : t.error) {
                    _ = try decryptor.open(Hex.decode(chunk))
                }
                return
            }
        }
        // Ran out of chunks before the failure point: the stream must not be finished.
        try requireEqual(t.error, "missingFinal", "expected failure kind")
        try requireEqual(decryptor.isFinished, false, "a stream without its final chunk is not finished")
    }

    // MARK: BLAKE2b

    struct BLAKE2bTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let msg: String, key: String, outLen: Int, digest: String, error: String?
    }

    package static let blake2b = suite("primitives/blake2b", file: "blake2b.json") { (t: BLAKE2bTest) in
        let msg = try Hex.decode(t.msg)
        let key = t.key.isEmpty ? nil : SecureBytes(copying: try Hex.decode(t.key))
        if t.result == .valid {
            let expected = try Hex.decode(t.digest)
            try requireEqual(try BLAKE2b.hash(data: msg, outputByteCount: t.outLen, key: key), expected, "one-shot")
            var hasher = try BLAKE2b(outputByteCount: t.outLen, key: key)
            for piece in splitChunks(Array(msg), sizes: [1, 7, 128, 3]) { hasher.update(data: piece) }
            try requireEqual(hasher.finalize(), expected, "streaming over split input")
        } else {
            try requireError(t.error) { _ = try BLAKE2b.hash(data: msg, outputByteCount: t.outLen, key: key) }
        }
    }

    // MARK: other hashes

    struct HashTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let msg: String, sha256: String, sha512: String, md5: String, md5Base64: String
    }

    package static let hashes = suite("primitives/hashes", file: "hashes.json") { (t: HashTest) in
        let msg = try Hex.decode(t.msg)
        try requireEqual(Hashes.sha256(msg), try Hex.decode(t.sha256), "SHA-256")
        try requireEqual(Hashes.sha512(msg), try Hex.decode(t.sha512), "SHA-512")
        try requireEqual(Hashes.md5(msg), try Hex.decode(t.md5), "MD5")
        try requireEqual(Base64.encode(Hashes.md5(msg)), t.md5Base64, "MD5 as padded base64")
        var md5 = Hashes.MD5()
        for piece in splitChunks(Array(msg), sizes: [3, 64, 1]) { md5.update(data: piece) }
        try requireEqual(md5.finalize(), try Hex.decode(t.md5), "streaming MD5")
    }

    // MARK: KDFs

    struct PBKDF2Test: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let password: String, salt: String, rounds: Int, outLen: Int, derived: String, error: String?
    }

    package static let pbkdf2 = suite("primitives/pbkdf2", file: "pbkdf2.json") { (t: PBKDF2Test) in
        let run = {
            try PBKDF2.sha512(
                password: Hex.decode(t.password), salt: Hex.decode(t.salt), rounds: t.rounds, outputByteCount: t.outLen)
        }
        if t.result == .valid {
            try unsafe requireEqual(
                try run().withUnsafeBytes { unsafe Data($0) }, try Hex.decode(t.derived), "derived key")
        } else {
            try requireError(t.error) { _ = try run() }
        }
    }

    struct Argon2Test: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let password: String, salt: String, opsLimit: Int, memLimit: Int, outLen: Int, derived: String, error: String?
    }

    package static let argon2id = suite("primitives/argon2id", file: "argon2id.json") { (t: Argon2Test) in
        let run = {
            try Argon2id.deriveKey(
                password: Hex.decode(t.password), salt: Hex.decode(t.salt), outputByteCount: t.outLen,
                parameters: .init(opsLimit: t.opsLimit, memoryLimit: t.memLimit))
        }
        if t.result == .valid {
            try unsafe requireEqual(
                try run().withUnsafeBytes { unsafe Data($0) }, try Hex.decode(t.derived), "derived key")
        } else {
            try requireError(t.error) { _ = try run() }
        }
    }

    // MARK: base64

    struct Base64Test: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let bytes: String?, url: String?, std: String?, text: String?, error: String?, lenient: String?
    }

    package static let base64 = suite("primitives/base64", file: "base64.json") { (t: Base64Test) in
        if t.result == .valid, let hex = t.bytes, let url = t.url, let std = t.std {
            let bytes = try Hex.decode(hex)
            try requireEqual(Base64URL.encode(bytes), url, "base64url encoding")
            try requireEqual(try Base64URL.decode(url), bytes, "strict decoding")
            try requireEqual(try Base64URL.decodeLenient(url), bytes, "lenient decoding")
            try requireEqual(try Base64URL.decodeLenient(std), bytes, "lenient decoding of standard padded form")
            try requireEqual(Base64.encode(bytes), std, "standard encoding")
            try requireEqual(try Base64.decode(std), bytes, "standard decoding")
            return
        }
        let text = t.text ?? ""
        try requireError(t.error) { _ = try Base64URL.decode(text) }
        if let lenient = t.lenient {
            try requireEqual(try Base64URL.decodeLenient(text), try Hex.decode(lenient), "lenient decoding")
        } else {
            try requireError(t.error) { _ = try Base64URL.decodeLenient(text) }
        }
    }

    // MARK: Wycheproof (../shared/vectors/wycheproof)

    struct WycheproofFile<Group: Decodable & Sendable>: Decodable, Sendable {
        let testGroups: [Group]
    }

    struct EdGroup: Decodable, Sendable {
        struct Key: Decodable, Sendable { let pk: String }
        struct Test: Decodable, Sendable {
            let tcId: Int, comment: String, msg: String, sig: String, result: VectorResult
        }
        let publicKey: Key, tests: [Test]
    }

    package static let wycheproofEd25519 = VectorSuite(name: "wycheproof/ed25519", needsShared: true) { locations in
        guard let url = locations.sharedFile("wycheproof/ed25519_test.json") else { return [] }
        let file = try JSONDecoder().decode(WycheproofFile<EdGroup>.self, from: Data(contentsOf: url))
        return file.testGroups.flatMap { group in
            group.tests.map { t in
                VectorCase(suite: "wycheproof/ed25519", id: String(t.tcId), comment: t.comment) {
                    let key = try Ed25519.PublicKey(rawRepresentation: Hex.decode(group.publicKey.pk))
                    let valid = key.isValidSignature(try Hex.decode(t.sig), for: try Hex.decode(t.msg))
                    switch t.result {
                    case .valid: try requireEqual(valid, true, "valid signature accepted")
                    case .invalid: try requireEqual(valid, false, "invalid signature rejected")
                    case .acceptable: break  // either outcome is allowed
                    }
                }
            }
        }
    }

    struct XGroup: Decodable, Sendable {
        struct Test: Decodable, Sendable {
            let tcId: Int, comment: String, `public`: String, `private`: String, shared: String, result: VectorResult
            let flags: [String]
        }
        let tests: [Test]
    }

    package static let wycheproofX25519 = VectorSuite(name: "wycheproof/x25519", needsShared: true) { locations in
        guard let url = locations.sharedFile("wycheproof/x25519_test.json") else { return [] }
        let file = try JSONDecoder().decode(WycheproofFile<XGroup>.self, from: Data(contentsOf: url))
        return file.testGroups.flatMap { group in
            group.tests.map { t in
                VectorCase(suite: "wycheproof/x25519", id: String(t.tcId), comment: t.comment) {
                    let privateKey = try Box.PrivateKey(rawRepresentation: Hex.decode(t.private))
                    let publicKey = try Box.PublicKey(rawRepresentation: Hex.decode(t.public))
                    let expected = try Hex.decode(t.shared)
                    let outcome = Result { () throws(E3DBError) in
                        try unsafe privateKey.rawSharedSecret(with: publicKey).withUnsafeBytes { unsafe Data($0) }
                    }
                    switch (t.result, outcome) {
                    case (.valid, .success(let shared)):
                        try requireEqual(shared, expected, "shared secret")
                    case (.valid, .failure(let error)):
                        throw ConformanceFailure("valid case failed: \(error)")
                    case (.acceptable, .success(let shared)):
                        try requireEqual(shared, expected, "shared secret")
                    case (.acceptable, .failure(let error)):
                        // libsodium refuses low-order points (all-zero output); Wycheproof allows that.
                        try requireEqual(error.code, .weakPublicKey, "acceptable case refused for a low-order point")
                        try requireEqual(expected.allSatisfy { $0 == 0 }, true, "refused only when the result is zero")
                    case (.invalid, .success):
                        throw ConformanceFailure("invalid case accepted")
                    case (.invalid, .failure):
                        break
                    }
                }
            }
        }
    }
}

/// A vector test with the common Wycheproof fields.
protocol IdentifiedVector: Decodable, Sendable {
    var tcId: Int { get }
    var comment: String { get }
    var result: VectorResult { get }
}

/// Throws unless `body` throws an ``E3DBError`` whose code is `expected` (any E3DBError when `expected` is nil).
func requireError(_ expected: String?, _ body: () throws -> Void) throws {
    try requireFailure(
        "expected error \(expected ?? "any")",
        matches: { error in
            guard let error = error as? E3DBError else { return false }
            return expected == nil || error.code.rawValue == expected
        }, body)
}
