internal import Crypto
internal import CryptoExtras
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    internal import FoundationEssentials
#else
    internal import Foundation
#endif

extension E3DBError.Code {
    /// A page of an encrypted database did not authenticate: its bytes were changed, or it was moved from another
    /// page number or another database. `context.actual` is the page number, `context.part` the file it was
    /// read from (`database`, `wal` or `journal`).
    public static let pageTampered = Self("pageTampered", category: .verification)
    /// A database's page size differs from the page size of the cipher settings it is opened with.
    /// `context.expected` is the settings' size, `context.actual` the file's.
    public static let pageSizeMismatch = Self("pageSizeMismatch", category: .malformedInput)
    /// A database's reserved bytes per page differ from what the cipher settings need (80 for SQLCipher 4).
    public static let reserveMismatch = Self("reserveMismatch", category: .malformedInput)
    /// The file opened with a key is a plaintext SQLite database (it starts with `SQLite format 3`).
    public static let databaseNotEncrypted = Self("databaseNotEncrypted", category: .malformedInput)
    /// An encrypted database was opened without a key.
    public static let keyMissing = Self("keyMissing", category: .invalidArgument)
    /// A SQLCipher key string is malformed (`x'…'` without 64 or 96 hex digits, an empty passphrase).
    public static let invalidKey = Self("invalidKey", category: .invalidArgument)
}

/// The page transform of SQLCipher 4 (and, with ``SQLCipherSettings/v3``, SQLCipher 3), with no SQLite dependency.
///
/// A page of `pageSize` bytes is laid out as `[salt (page 1 only)] ciphertext | IV | HMAC | padding`:
/// - the ciphertext is AES-256-CBC without padding of the page's first `pageSize - reserve` bytes (bytes 16 and
///   on for page 1, whose first 16 bytes hold the file's salt instead of `SQLite format 3\0`), under a fresh
///   random IV at every write;
/// - the HMAC (SHA-512, or SHA-1 for v3) covers ciphertext ‖ IV ‖ the page number as 4 little-endian bytes, so a
///   page cannot be edited or moved to another page number unnoticed.
///
/// Keys are derived once per codec: the encryption key is PBKDF2 of a passphrase over the salt (or a raw key), the
/// HMAC key PBKDF2 of the encryption key over the salt XOR `0x3a` with 2 rounds. A codec is immutable and shared
/// by every connection to its database.
public final class PageCodec: Sendable {
    /// The cipher settings.
    public let settings: SQLCipherSettings
    /// The file's salt (its first 16 bytes).
    public let salt: [UInt8]
    private let encryptionKey: SymmetricKey
    private let mac: PageMAC

    /// Derives the keys for `key` over `salt`.
    /// - Parameters:
    ///   - key: A passphrase, a raw key, or a raw key with its salt.
    ///   - salt: The 16 bytes the file starts with (a new file: 16 random bytes, or the salt of
    ///     ``SQLCipherKey/rawKeyAndSalt(key:salt:)``).
    ///   - settings: The cipher settings.
    /// - Throws: ``E3DBError/Code/invalidParameter`` for bad settings or a salt that is not 16 bytes,
    ///   ``E3DBError/Code/wrongKey`` when a raw key's own salt is not `salt` (the key cannot open this file).
    public init(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) throws(E3DBError) {
        try settings.validate()
        guard salt.count == SQLCipherSettings.saltByteCount else {
            throw E3DBError(
                .invalidParameter, "a SQLCipher salt is 16 bytes",
                context: .init(part: "salt", expected: SQLCipherSettings.saltByteCount, actual: salt.count))
        }
        let encryption: SecureBytes
        switch key {
        case .passphrase(let passphrase):
            encryption = try Self.derive(passphrase, salt: salt, rounds: settings.kdfIterations, settings.algorithm)
        case .rawKey(let raw):
            encryption = raw
        case .rawKeyAndSalt(let raw, let ownSalt):
            guard ConstantTime.equals(ownSalt, salt) else {
                throw E3DBError(.wrongKey, "the key's salt is not this database's salt")
            }
            encryption = raw
        }
        let hmacSalt = salt.map { $0 ^ SQLCipherSettings.hmacSaltMask }
        let hmacKey = try Self.derive(
            encryption, salt: hmacSalt, rounds: SQLCipherSettings.hmacKeyIterations, settings.algorithm)
        self.settings = settings
        self.salt = salt
        self.encryptionKey = unsafe encryption.withUnsafeBytes { unsafe SymmetricKey(data: $0) }
        self.mac = unsafe hmacKey.withUnsafeBytes {
            unsafe PageMAC(algorithm: settings.algorithm, key: SymmetricKey(data: $0))
        }
    }

    /// PBKDF2 with the settings' hash, to a 32-byte key.
    private static func derive(
        _ password: SecureBytes, salt: [UInt8], rounds: Int, _ algorithm: SQLCipherSettings.Algorithm
    ) throws(E3DBError) -> SecureBytes {
        try unsafe password.withUnsafeBytes { (bytes) throws(E3DBError) -> SecureBytes in
            switch algorithm {
            case .sha512:
                try unsafe PBKDF2.sha512(
                    password: bytes, salt: salt, rounds: rounds, outputByteCount: SQLCipherSettings.keyByteCount)
            case .sha1:
                try unsafe PBKDF2.sha1(
                    password: bytes, salt: salt, rounds: rounds, outputByteCount: SQLCipherSettings.keyByteCount)
            }
        }
    }

    private init(settings: SQLCipherSettings, salt: [UInt8], encryptionKey: SymmetricKey, mac: PageMAC) {
        self.settings = settings
        self.salt = salt
        self.encryptionKey = encryptionKey
        self.mac = mac
    }

    /// The same keys under another page size (no key derivation): how a page size mismatch is told from a wrong
    /// key.
    public func withPageSize(_ pageSize: Int) throws(E3DBError) -> PageCodec {
        var settings = self.settings
        settings.pageSize = pageSize
        try settings.validate()
        return PageCodec(settings: settings, salt: salt, encryptionKey: encryptionKey, mac: mac)
    }

    private static let randomness = RandomReservoir()

    /// The first 16 bytes of every SQLite database, which SQLCipher replaces with the salt on disk.
    public static let sqliteHeader: [UInt8] = Array("SQLite format 3\0".utf8)

    /// Where the encrypted bytes of page `number` start: 16 on page 1 (after the salt), else 0.
    @inline(__always) func dataOffset(_ number: UInt32) -> Int { number == 1 ? SQLCipherSettings.saltByteCount : 0 }

    /// Encrypts one plaintext page.
    /// - Parameters:
    ///   - page: `pageSize` plaintext bytes; its reserved tail is ignored.
    ///   - number: The page number (1-based), bound into the HMAC.
    /// - Returns: The `pageSize` bytes to store.
    public func encrypt(page: [UInt8], number: UInt32) throws(E3DBError) -> [UInt8] {
        try unsafe transform(page, number) { (input, output) throws(E3DBError) in
            try unsafe encrypt(page: input, number: number, into: output)
        }
    }

    /// Authenticates and decrypts one stored page.
    /// - Returns: The `pageSize` plaintext bytes (page 1 starts with `SQLite format 3\0`; the reserved tail is
    ///   zero).
    /// - Throws: ``E3DBError/Code/pageTampered`` naming the page when its HMAC does not verify.
    public func decrypt(page: [UInt8], number: UInt32) throws(E3DBError) -> [UInt8] {
        try unsafe transform(page, number) { (input, output) throws(E3DBError) in
            try unsafe decrypt(page: input, number: number, into: output)
        }
    }

    /// Runs a pointer-based transform of one page into a new array, after checking its size and number.
    private func transform(
        _ page: [UInt8], _ number: UInt32,
        _ body: (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws(E3DBError) -> Void
    ) throws(E3DBError) -> [UInt8] {
        try checkSize(page.count, number)
        var out = [UInt8](repeating: 0, count: settings.pageSize)
        var failure: E3DBError?
        unsafe page.withUnsafeBytes { input in
            unsafe out.withUnsafeMutableBytes { output in
                do throws(E3DBError) { try unsafe body(input, output) } catch { failure = error }
            }
        }
        if let failure { throw failure }
        return out
    }

    private func checkSize(_ count: Int, _ number: UInt32) throws(E3DBError) {
        guard count == settings.pageSize else {
            throw E3DBError(
                .invalidLength, "a page has the settings' page size",
                context: .init(part: "page", expected: settings.pageSize, actual: count))
        }
        guard number >= 1 else {
            throw E3DBError(
                .invalidParameter, "page numbers start at 1", context: .init(part: "page", actual: Int(number)))
        }
    }

    /// Encrypts `page` into `output` (both `pageSize` bytes; they may not overlap).
    package func encrypt(
        page: UnsafeRawBufferPointer, number: UInt32, into output: UnsafeMutableRawBufferPointer
    ) throws(E3DBError) {
        let pageSize = settings.pageSize
        precondition(page.count == pageSize && output.count == pageSize, "PageCodec: buffers hold one page")
        let start = dataOffset(number)
        let end = pageSize - settings.reserveByteCount
        // A fresh random IV (and random padding after the HMAC, as SQLCipher fills its whole reserve), from a
        // reservoir: one system call per 64 KiB, not one per page.
        unsafe Self.randomness.fill(UnsafeMutableRawBufferPointer(rebasing: output[end..<pageSize]))
        let iv: AES._CBC.IV
        let ciphertext: Data
        do {
            iv = try unsafe AES._CBC.IV(ivBytes: output[end..<(end + SQLCipherSettings.ivByteCount)])
            ciphertext = try unsafe AES._CBC.encrypt(
                UnsafeRawBufferPointer(rebasing: page[start..<end]), using: encryptionKey, iv: iv, noPadding: true)
        } catch {
            throw E3DBError(
                .invalidParameter, "AES-CBC refused a page", context: .init(part: "page", actual: Int(number)))
        }
        unsafe ciphertext.withUnsafeBytes {
            unsafe UnsafeMutableRawBufferPointer(rebasing: output[start..<end]).copyMemory(from: $0)
        }
        let macStart = end + SQLCipherSettings.ivByteCount
        unsafe mac.write(
            over: UnsafeRawBufferPointer(rebasing: output[start..<macStart]), number: number,
            into: UnsafeMutableRawBufferPointer(
                rebasing: output[macStart..<(macStart + settings.algorithm.macByteCount)]))
        if start > 0 {
            unsafe salt.withUnsafeBytes {
                unsafe UnsafeMutableRawBufferPointer(rebasing: output[0..<start]).copyMemory(from: $0)
            }
        }
    }

    /// Checks the HMAC of the stored `page` and decrypts it into `output` (both `pageSize` bytes; no overlap).
    /// - Throws: ``E3DBError/Code/pageTampered`` (`context.actual` = `number`); `output` is then all zero.
    package func decrypt(
        page: UnsafeRawBufferPointer, number: UInt32, into output: UnsafeMutableRawBufferPointer
    ) throws(E3DBError) {
        let pageSize = settings.pageSize
        precondition(page.count == pageSize && output.count == pageSize, "PageCodec: buffers hold one page")
        let start = dataOffset(number)
        let end = pageSize - settings.reserveByteCount
        let macStart = end + SQLCipherSettings.ivByteCount
        let authentic = unsafe mac.verify(
            over: UnsafeRawBufferPointer(rebasing: page[start..<macStart]), number: number,
            expected: UnsafeRawBufferPointer(rebasing: page[macStart..<(macStart + settings.algorithm.macByteCount)]))
        guard authentic else {
            unsafe output.initializeMemory(as: UInt8.self, repeating: 0)
            throw E3DBError(
                .pageTampered, "page \(number) did not authenticate", context: .init(part: "page", actual: Int(number)))
        }
        let plaintext: Data
        do {
            let iv = try unsafe AES._CBC.IV(ivBytes: page[end..<macStart])
            plaintext = try unsafe AES._CBC.decrypt(
                UnsafeRawBufferPointer(rebasing: page[start..<end]), using: encryptionKey, iv: iv, noPadding: true)
        } catch {
            unsafe output.initializeMemory(as: UInt8.self, repeating: 0)
            throw E3DBError(
                .invalidParameter, "AES-CBC refused a page", context: .init(part: "page", actual: Int(number)))
        }
        unsafe plaintext.withUnsafeBytes {
            unsafe UnsafeMutableRawBufferPointer(rebasing: output[start..<end]).copyMemory(from: $0)
        }
        unsafe UnsafeMutableRawBufferPointer(rebasing: output[end..<pageSize]).initializeMemory(
            as: UInt8.self, repeating: 0)
        if start > 0 {
            unsafe Self.sqliteHeader.withUnsafeBytes {
                unsafe UnsafeMutableRawBufferPointer(rebasing: output[0..<start]).copyMemory(from: $0)
            }
        }
    }
}

/// The page HMAC, keyed once: each page copies the keyed state instead of re-deriving the pads.
private enum PageMAC: Sendable {
    case sha512(HMAC<SHA512>)
    case sha1(HMAC<Insecure.SHA1>)

    init(algorithm: SQLCipherSettings.Algorithm, key: SymmetricKey) {
        switch algorithm {
        case .sha512: self = .sha512(HMAC<SHA512>(key: key))
        case .sha1: self = .sha1(HMAC<Insecure.SHA1>(key: key))
        }
    }

    func write(over data: UnsafeRawBufferPointer, number: UInt32, into output: UnsafeMutableRawBufferPointer) {
        unsafe compute(over: data, number: number) { tag in
            unsafe output.copyMemory(from: UnsafeRawBufferPointer(rebasing: tag[0..<output.count]))
        }
    }

    func verify(over data: UnsafeRawBufferPointer, number: UInt32, expected: UnsafeRawBufferPointer) -> Bool {
        unsafe compute(over: data, number: number) { tag in
            unsafe ConstantTime.equals(UnsafeRawBufferPointer(rebasing: tag[0..<expected.count]), expected)
        }
    }

    /// Calls `body` with the tag over `data` ‖ the page number (4 bytes, little-endian), without copying it.
    private func compute<R>(over data: UnsafeRawBufferPointer, number: UInt32, _ body: (UnsafeRawBufferPointer) -> R)
        -> R
    {
        var littleEndian = number.littleEndian
        return unsafe withUnsafeBytes(of: &littleEndian) { pageNumber in
            switch self {
            case .sha512(var state):
                unsafe state.update(data: data)
                unsafe state.update(data: pageNumber)
                return unsafe state.finalize().withUnsafeBytes { unsafe body($0) }
            case .sha1(var state):
                unsafe state.update(data: data)
                unsafe state.update(data: pageNumber)
                return unsafe state.finalize().withUnsafeBytes { unsafe body($0) }
            }
        }
    }
}
