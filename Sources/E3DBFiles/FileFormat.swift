import E3DBPrimitives

/// Constants and sizes of E3DB file format version 3.
///
/// Layout: the 100-byte text header `3.<b64u(edk)>.<b64u(edkN)>.`, the 24-byte secretstream header, then chunks.
/// Every chunk but the last seals exactly ``plaintextChunkSize`` bytes with tag MESSAGE; the last seals 0 to
/// 65,536 bytes with tag FINAL. `edk` is the file's data key sealed with the access key by secretbox under the
/// nonce `edkN`.
public enum E3DBFileFormat {
    /// The version this module reads and writes: `"3"`.
    public static let version = "3"
    /// Plaintext bytes in every chunk but the last: 65,536.
    public static let plaintextChunkSize = 65_536
    /// Bytes secretstream adds to each chunk (encrypted tag byte + 16-byte MAC): 17.
    public static let chunkOverhead = 17
    /// Ciphertext bytes of a full chunk: 65,553.
    public static let ciphertextChunkSize = plaintextChunkSize + chunkOverhead
    /// Length of the text header `3.<64 chars>.<32 chars>.`: 100.
    public static let textHeaderSize = 100
    /// Length of the secretstream header: 24.
    public static let streamHeaderSize = 24
    /// Bytes before the first chunk: 124.
    public static let prefixSize = textHeaderSize + streamHeaderSize

    /// The number of chunks E3DBKit writes for `plaintextSize` bytes: at least one (an empty file is one empty
    /// FINAL chunk).
    ///
    /// - Parameter plaintextSize: plaintext length in bytes (not negative).
    /// - Returns: `max(1, ceil(plaintextSize / 65536))`.
    public static func chunkCount(forPlaintextSize plaintextSize: Int) -> Int {
        max(1, (plaintextSize + plaintextChunkSize - 1) / plaintextChunkSize)
    }

    /// The encrypted size of a file of `plaintextSize` bytes as E3DBKit writes it:
    /// `124 + L + 17 * chunkCount(L)`; 141 for an empty file.
    ///
    /// - Parameter plaintextSize: plaintext length in bytes (not negative).
    /// - Returns: the encrypted length in bytes.
    public static func encryptedSize(forPlaintextSize plaintextSize: Int) -> Int {
        prefixSize + plaintextSize + chunkOverhead * chunkCount(forPlaintextSize: plaintextSize)
    }
}

/// Incremental, split-independent validation of the 100-byte text header.
///
/// The parser looks at a prefix of the input and reports the first problem at the lowest offset, so the error
/// for a damaged header does not depend on how the input was split into reads.
enum TextHeader {
    static let edkRange = 2..<66
    static let edkNRange = 67..<99
    static let versionFieldLimit = 16

    static func isBase64URL(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }

    /// Validates `bytes` (a prefix of the file; `atEnd` when the input ended there).
    /// Throws the first problem; returns normally when the prefix is a complete, well-formed 100-byte header.
    static func validate(_ bytes: [UInt8], atEnd: Bool) throws(E3DBError) {
        // Version field: ASCII digits up to the first '.'.
        var index = 0
        while index < bytes.count, bytes[index] != UInt8(ascii: ".") {
            let c = bytes[index]
            guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else {
                throw E3DBError(
                    .malformedFileHeader,
                    "the file does not start with an E3DB version number: byte \(index) is not a digit or '.'",
                    context: .at(offset: index, part: "version"))
            }
            guard index < versionFieldLimit else {
                throw E3DBError(
                    .malformedFileHeader, "the version field is longer than \(versionFieldLimit) digits",
                    context: .at(offset: index, part: "version"))
            }
            index += 1
        }
        if index == bytes.count {
            if index == 0, atEnd {
                throw E3DBError(.fileTruncated, "the input is empty", context: .at(offset: 0, part: "version"))
            }
            if atEnd {
                throw E3DBError(
                    .fileTruncated, "the input ends inside the version field after \(index) bytes",
                    context: .at(offset: index, part: "version"))
            }
            return
        }
        guard index > 0 else {
            throw E3DBError(
                .malformedFileHeader, "the version field is empty", context: .at(offset: 0, part: "version"))
        }
        let versionText = String(decoding: bytes[0..<index], as: UTF8.self)
        guard versionText == E3DBFileFormat.version else {
            throw E3DBError(
                .unsupportedFileVersion,
                "E3DB file version \(versionText) is not supported; only version 3 is",
                context: .at(offset: 0, part: "version", version: versionText))
        }
        // From here the layout is fixed: '.' at 1, 64 base64url chars, '.', 32 chars, '.'.
        let limit = min(bytes.count, E3DBFileFormat.textHeaderSize)
        var offset = 2
        while offset < limit {
            let c = bytes[offset]
            if edkRange.contains(offset) || edkNRange.contains(offset) {
                guard isBase64URL(c) else {
                    let part = edkRange.contains(offset) ? "edk" : "edkN"
                    throw E3DBError(
                        .malformedFileHeader,
                        "byte \(offset) of the header (in \(part)) is not a base64url character",
                        context: .at(offset: offset, part: part))
                }
            } else if c != UInt8(ascii: ".") {
                throw E3DBError(
                    .malformedFileHeader,
                    "byte \(offset) of the header should be the '.' separator",
                    context: .at(offset: offset, part: "separator"))
            }
            offset += 1
        }
        if bytes.count < E3DBFileFormat.textHeaderSize, atEnd {
            let part =
                bytes.count < edkRange.upperBound ? "edk" : bytes.count < edkNRange.upperBound ? "edkN" : "separator"
            throw E3DBError(
                .fileTruncated,
                "the input ends inside the 100-byte text header after \(bytes.count) bytes",
                context: .at(offset: bytes.count, part: part))
        }
    }
}
