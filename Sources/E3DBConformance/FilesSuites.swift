package import E3DBFiles
package import E3DBKeys
import E3DBPrimitives
package import Foundation

/// Vector suite for E3DBFiles: `TestVectors/files/e3db_file_v3.json`, made by Tozny's Python SDK (e3db 2.3.0)
/// with its randomness fixed (see the generator). Valid cases are decrypted by E3DBKit and re-encrypted with the
/// recorded data key, edk nonce and stream header, which must reproduce the SDK's bytes; invalid cases mutate a
/// valid file and expect the named error code.
package enum FilesSuites {
    package static let all: [VectorSuite] = [fileV3]

    /// One case of `e3db_file_v3.json`.
    package struct FileVector: Decodable, Sendable {
        package let tcId: Int
        package let comment: String
        package let result: VectorResult
        package let flags: [String]
        package let accessKey: String?
        package let dataKey: String?
        package let edkNonce: String?
        package let streamHeader: String?
        package let plaintextSize: Int?
        package let plaintextBlake2b512: String?
        package let plaintextSeed: String?
        package let plaintext: String?
        package let plaintextPattern: String?
        package let chunkCount: Int?
        package let ciphertextSize: Int?
        package let ciphertextBlake2b512: String?
        package let ciphertextSha256: String?
        package let checksum: String?
        package let ciphertext: String?
        package let baseTcId: Int?
        package let mutation: Mutation?
        package let expectedError: String?
    }

    /// A mutation of a valid file.
    package struct Mutation: Decodable, Sendable {
        package let kind: String
        package let length: Int?
        package let hex: String?
        package let a: Int?
        package let b: Int?
        package let index: Int?
        package let offset: Int?
        package let bit: Int?
    }

    /// Loads the vector file.
    package static func load(_ locations: VectorLocations = .default) throws -> [FileVector] {
        try VectorFile<FileVector>.load(locations.projectFile("files/e3db_file_v3.json")).tests
    }

    /// The plaintext of N bytes for a 32-byte seed: BLAKE2b-512(seed || uint64_le(i)) for i = 0, 1, ..., truncated.
    package static func expand(seed: Data, count: Int) throws -> Data {
        var out = Data(capacity: count + 64)
        var i: UInt64 = 0
        while out.count < count {
            var block = seed
            unsafe withUnsafeBytes(of: i.littleEndian) { unsafe block.append(contentsOf: $0) }
            out.append(try BLAKE2b.hash(data: block, outputByteCount: 64))
            i += 1
        }
        return out.prefix(count)
    }

    /// The plaintext of a valid case.
    package static func plaintext(of t: FileVector) throws -> Data {
        if let hex = t.plaintext { return try Hex.decode(hex) }
        if let seed = t.plaintextSeed, let size = t.plaintextSize {
            return try expand(seed: Hex.decode(seed), count: size)
        }
        if t.plaintextPattern == "A6multi" {
            return Data(repeating: 0, count: 65_536) + Data(repeating: 1, count: 65_536) + Data("tail".utf8)
        }
        throw VectorFormatError("case \(t.tcId) has no plaintext")
    }

    /// Re-encrypts a valid case with its recorded randomness (what the SDK wrote, byte for byte).
    package static func reencrypt(_ t: FileVector, plaintext: Data) throws -> (Data, FileEncryptionResult) {
        guard let ak = t.accessKey, let dk = t.dataKey, let nonce = t.edkNonce, let header = t.streamHeader else {
            throw VectorFormatError("case \(t.tcId) lacks keys")
        }
        var source = MemoryByteSource(plaintext)
        var sink = MemoryByteSink()
        let result = try E3DBFileCipher.encryptDeterministically(
            from: &source, to: &sink, accessKey: AccessKey(base64URLEncoded: ak),
            dataKey: SecretStream.Key(rawRepresentation: Hex.decode(dk)),
            edkNonce: SecretBox.Nonce(rawRepresentation: Hex.decode(nonce)),
            streamHeader: SecretStream.Header(rawRepresentation: Hex.decode(header)),
            options: FileEncryptionOptions(checksums: .all))
        guard let bytes = sink.committed else { throw ConformanceFailure("case \(t.tcId): sink not committed") }
        return (bytes, result)
    }

    /// The SDK's ciphertext of a valid case (inline, or regenerated and checked against the recorded hashes).
    package static func ciphertext(of t: FileVector) throws -> Data {
        if let hex = t.ciphertext { return try Hex.decode(hex) }
        let (bytes, _) = try reencrypt(t, plaintext: plaintext(of: t))
        try requireEqual(
            Hex.encode(try BLAKE2b.hash(data: bytes, outputByteCount: 64)), t.ciphertextBlake2b512 ?? "",
            "case \(t.tcId): regenerated ciphertext BLAKE2b-512")
        return bytes
    }

    /// Applies a mutation.
    package static func mutate(_ bytes: Data, _ m: Mutation) throws -> Data {
        let header = E3DBFileFormat.prefixSize
        let chunk = E3DBFileFormat.ciphertextChunkSize
        var out = Data(bytes)
        switch m.kind {
        case "truncate":
            return Data(out.prefix(m.length ?? 0))
        case "append":
            out.append(try Hex.decode(m.hex ?? ""))
            return out
        case "swapChunks":
            let a = header + (m.a ?? 0) * chunk
            let b = header + (m.b ?? 1) * chunk
            let chunkA = out[a..<(a + chunk)]
            let chunkB = out[b..<(b + chunk)]
            out.replaceSubrange(b..<(b + chunk), with: chunkA)
            out.replaceSubrange(a..<(a + chunk), with: chunkB)
            return out
        case "duplicateChunk":
            let a = header + (m.index ?? 0) * chunk
            out.insert(contentsOf: Data(bytes[a..<(a + chunk)]), at: a + chunk)
            return out
        case "flipBit":
            let offset = m.offset ?? 0
            out[offset] ^= UInt8(1) << UInt8(m.bit ?? 0)
            return out
        case "wrongAccessKey":
            return out
        default:
            throw VectorFormatError("unknown mutation \(m.kind)")
        }
    }

    /// Decrypts `bytes` with reads of at most `readSize` bytes; returns the committed plaintext.
    package static func decrypt(
        _ bytes: Data, accessKey: AccessKey, readSize: Int = .max, options: FileDecryptionOptions = .init()
    ) throws -> (Data?, FileDecryptionResult) {
        var source = MemoryByteSource(bytes, maxReadSize: readSize)
        var sink = MemoryByteSink()
        let result = try E3DBFileCipher.decrypt(from: &source, to: &sink, accessKey: accessKey, options: options)
        return (sink.committed, result)
    }

    package static let fileV3 = VectorSuite(name: "files/e3db_file_v3") { locations in
        let tests = try load(locations)
        let byId = Dictionary(uniqueKeysWithValues: tests.map { ($0.tcId, $0) })
        return tests.map { t in
            VectorCase(suite: "files/e3db_file_v3", id: String(t.tcId), comment: t.comment) {
                if t.result == .valid {
                    try checkValid(t)
                } else {
                    guard let base = t.baseTcId.flatMap({ byId[$0] }), let m = t.mutation,
                        let expected = t.expectedError
                    else { throw VectorFormatError("case \(t.tcId) is incomplete") }
                    try checkInvalid(t, base: base, mutation: m, expected: expected)
                }
            }
        }
    }

    static func checkValid(_ t: FileVector) throws {
        let plain = try plaintext(of: t)
        try requireEqual(
            Hex.encode(try BLAKE2b.hash(data: plain, outputByteCount: 64)), t.plaintextBlake2b512 ?? "",
            "plaintext BLAKE2b-512 (seed expansion)")
        // Encrypt direction: our encryptor with the SDK's randomness writes the SDK's bytes.
        let (mine, result) = try reencrypt(t, plaintext: plain)
        try requireEqual(mine.count, t.ciphertextSize ?? -1, "encrypted size")
        try requireEqual(result.encryptedSize, mine.count, "reported encrypted size")
        try requireEqual(result.chunkCount, t.chunkCount ?? -1, "chunk count")
        try requireEqual(result.checksums.md5Base64, t.checksum, "MD5 checksum (FileMeta)")
        try requireEqual(result.checksums.blake2b512Hex, t.ciphertextBlake2b512, "ciphertext BLAKE2b-512")
        try requireEqual(
            result.checksums.plaintextBLAKE2b512.map { Hex.encode($0) }, t.plaintextBlake2b512, "plaintext BLAKE2b-512")
        try requireEqual(Hex.encode(Hashes.sha256(mine)), t.ciphertextSha256 ?? "", "ciphertext SHA-256")
        if let hex = t.ciphertext {
            try requireEqual(Hex.encode(mine), hex, "ciphertext bytes")
        }
        // Decrypt direction: the SDK's bytes (inline, or proven equal to ours by the hashes above).
        let sdk = try t.ciphertext.map { try Hex.decode($0) } ?? mine
        let key = try AccessKey(base64URLEncoded: t.accessKey ?? "")
        for readSize in [Int.max, 4096, 65_553, 7] where readSize != 7 || sdk.count < 300_000 {
            let (opened, info) = try decrypt(
                sdk, accessKey: key, readSize: readSize,
                options: FileDecryptionOptions(
                    checksums: .all, expectedChecksum: .md5Base64(t.checksum ?? "")))
            try requireEqual(opened, plain, "plaintext (reads of \(readSize))")
            try requireEqual(info.chunkCount, t.chunkCount ?? -1, "chunks opened")
            try requireEqual(info.checksums.blake2b512Hex, t.ciphertextBlake2b512, "BLAKE2b-512 while decrypting")
        }
    }

    static func checkInvalid(_ t: FileVector, base: FileVector, mutation: Mutation, expected: String) throws {
        let bytes = try mutate(try ciphertext(of: base), mutation)
        let key =
            mutation.kind == "wrongAccessKey"
            ? try AccessKey(rawRepresentation: BLAKE2b.hash(data: Data("wrong".utf8), outputByteCount: 32))
            : try AccessKey(base64URLEncoded: base.accessKey ?? "")
        for readSize in [Int.max, 1, 7, 4096, 65_553] {
            try requireFailure(
                "case \(t.tcId) (reads of \(readSize))",
                matches: { ($0 as? E3DBError)?.code.rawValue == expected }
            ) {
                let (committed, _) = try decrypt(
                    bytes, accessKey: key, readSize: readSize == 1 && bytes.count > 70_000 ? 13 : readSize)
                if committed != nil { throw ConformanceFailure("output committed") }
            }
        }
    }
}
