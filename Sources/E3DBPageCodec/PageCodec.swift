public import E3DBPrimitives

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

// Safety: (the page layout) every pointer method works on `page` and `output` of exactly `pageSize` bytes (the
// `package` entry points check it with a precondition, the array ones with `checkSize`), under validated settings (a
// page of 512 to 65536 bytes, a power of two). SQLCipher: `start = dataOffset(number)` is 0, 16 or a plaintext header
// size that `validate` keeps a multiple of 16 and at most `end = pageSize - reserve`; `macStart = end + 16`, and
// `macStart + macByteCount <= pageSize` because the reserve is the IV and the MAC rounded up to a block. So `0 <= start
// <= end < macStart <= pageSize`, every slice below lies in the page, AES-CBC gets whole blocks (its precondition
// checks again), and the salt or SQLite header copied to `0..<start` is 16 bytes exactly when `start` is. chacha20: `n
// = pageSize - 32` (at least 480), the nonce at `n..<n + 16`, the tag at `n + 16..<pageSize`, and `start` at most 100
// (`validate`), so page 1's copies of `0..<16` and `16..<start` and the key stream over `start..<n` all lie in the
// page; the one-time keys are the 64 bytes `withOneTimeKeys` lends.
/// The page transform of an encrypted database, with no SQLite dependency: SQLCipher 4's (and, with
/// ``SQLCipherSettings/v3``, SQLCipher 3's), or SQLite3 Multiple Ciphers' `chacha20` (``SQLCipherSettings/chacha20``,
/// ``SQLCipherSettings/sqleet``).
///
/// SQLCipher: a page of `pageSize` bytes is laid out as `[salt (page 1 only)] ciphertext | IV | HMAC | padding`:
/// - the ciphertext is AES-256-CBC without padding of the page's first `pageSize - reserve` bytes (bytes 16 and
///   on for page 1, whose first 16 bytes hold the file's salt instead of `SQLite format 3\0`; with a plaintext
///   header of N bytes, bytes N and on, the first N stored as they are), under a fresh random IV at every write;
/// - the HMAC (SHA-512, SHA-256, or SHA-1 as in v3) covers ciphertext ‖ IV ‖ the page number as 4 little-endian
///   bytes, so a page cannot be edited or moved to another page number unnoticed.
///
/// Keys are derived once per codec: the encryption key is PBKDF2 (with the KDF hash) of a passphrase over the salt
/// (or a raw key), the HMAC key PBKDF2 (the same hash) of the encryption key over the salt XOR `0x3a` with 2 rounds.
///
/// chacha20: a page is `[salt, header bytes 16-23 (page 1 only)] ciphertext | nonce (16) | tag (16)`, with n =
/// `pageSize - 32`:
/// - a fresh random 16-byte nonce per write; the block counter is its last 4 bytes (little-endian) XOR the page
///   number, the ChaCha20 nonce its first 12;
/// - the first key-stream block under the database key gives a one-time Poly1305 key (bytes 0-31) and a page key
///   (32-63), which encrypts the page from the next counter value on (wrapping at 2³²);
/// - the Poly1305 tag covers bytes 0 to n + 16 as stored: ciphertext and nonce, and on page 1 the salt and bytes
///   16-23 too.
///
/// Page 1 is encrypted from byte 24 (its bytes 16-23 stay readable: page size, reserve 32), or, in sqleet's legacy
/// layout, from byte 0, its first 16 bytes then replaced by the salt. The key is PBKDF2-HMAC-SHA256 of a passphrase
/// over the salt, or a raw key.
///
/// A codec is immutable and shared by every connection to its database.
public final class PageCodec: Sendable {
    /// The cipher settings.
    public let settings: SQLCipherSettings
    /// The file's salt (its first 16 bytes).
    public let salt: [UInt8]
    private let transform: Transform

    /// The keys of one page format.
    private enum Transform: Sendable {
        /// AES-256-CBC's key schedules and the keyed HMAC states, computed once.
        case sqlcipher(cipher: AESCBC, mac: KeyedHMAC)
        /// The 32-byte database key, in wiped storage.
        case chacha20(key: SecureBytes)
    }

    // Safety: the key bytes are lent for each closure only: PBKDF2 reads them into a new `SecureBytes`, and `AESCBC`
    // and `KeyedHMAC` expand them into their own wiped schedules (a raw key is 32 bytes: `init` validates it, a
    // derived one `keyByteCount`).
    /// Derives the keys for `key` over `salt`.
    /// - Parameters:
    ///   - key: A passphrase, a raw key, or a raw key with its salt.
    ///   - salt: The 16 bytes the file starts with (a new file: 16 random bytes, or the salt of
    ///     ``SQLCipherKey/rawKeyAndSalt(key:salt:)``).
    ///   - settings: The cipher settings.
    /// - Throws: ``E3DBError/Code/invalidKey`` for a raw key that is not 32 bytes (or its salt not 16),
    ///   ``E3DBError/Code/invalidParameter`` for bad settings or a salt that is not 16 bytes,
    ///   ``E3DBError/Code/wrongKey`` when a raw key's own salt is not `salt` (the key cannot open this file).
    public init(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) throws(E3DBError) {
        try settings.validate()
        // A raw key's length is checked here, not only where a key is parsed: the enum's cases are public.
        if case .passphrase = key {} else { try key.validate() }
        guard salt.count == SQLCipherSettings.saltByteCount else {
            throw E3DBError(
                .invalidParameter, "a SQLCipher salt is 16 bytes",
                context: .init(part: "salt", expected: SQLCipherSettings.saltByteCount, actual: salt.count))
        }
        let encryption: SecureBytes
        switch key {
        case .passphrase(let passphrase):
            encryption = try Self.derive(
                passphrase, salt: salt, rounds: settings.kdfIterations,
                settings.cipher == .chacha20 ? .sha256 : settings.kdfAlgorithm)
        case .rawKey(let raw):
            encryption = raw
        case .rawKeyAndSalt(let raw, let ownSalt):
            guard ConstantTime.equals(ownSalt, salt) else {
                throw E3DBError(.wrongKey, "the key's salt is not this database's salt")
            }
            encryption = raw
        }
        self.settings = settings
        self.salt = salt
        switch settings.cipher {
        case .chacha20:
            self.transform = .chacha20(key: encryption)
        case .sqlcipher:
            let hmacSalt = salt.map { $0 ^ SQLCipherSettings.hmacSaltMask }
            let hmacKey = try Self.derive(
                encryption, salt: hmacSalt, rounds: SQLCipherSettings.hmacKeyIterations, settings.kdfAlgorithm)
            self.transform = .sqlcipher(
                cipher: unsafe encryption.withUnsafeBytes { unsafe AESCBC(key: $0) },
                mac: unsafe hmacKey.withUnsafeBytes { unsafe KeyedHMAC(hash: settings.algorithm.hmacHash, key: $0) })
        }
    }

    /// PBKDF2 with `algorithm`'s hash, to a 32-byte key.
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
            case .sha256:
                try unsafe PBKDF2.sha256(
                    password: bytes, salt: salt, rounds: rounds, outputByteCount: SQLCipherSettings.keyByteCount)
            }
        }
    }

    private init(settings: SQLCipherSettings, salt: [UInt8], transform: Transform) {
        self.settings = settings
        self.salt = salt
        self.transform = transform
    }

    /// The same keys under another page size (no key derivation): how a page size mismatch is told from a wrong
    /// key.
    public func withPageSize(_ pageSize: Int) throws(E3DBError) -> PageCodec {
        var settings = self.settings
        settings.pageSize = pageSize
        try settings.validate()
        return PageCodec(settings: settings, salt: salt, transform: transform)
    }

    private static let randomness = RandomReservoir()

    /// The first 16 bytes of every SQLite database, which SQLCipher replaces with the salt on disk.
    public static let sqliteHeader: [UInt8] = Array("SQLite format 3\0".utf8)

    /// Where the encrypted bytes of page `number` start: on page 1, 16 (after the salt) for SQLCipher, or the
    /// plaintext header's size, 24 (after the salt and the readable header bytes) for chacha20, 0 for sqleet's
    /// legacy layout; else 0.
    @inline(__always) func dataOffset(_ number: UInt32) -> Int {
        guard number == 1 else { return 0 }
        switch settings.cipher {
        case .sqlcipher:
            return settings.plaintextHeaderSize > 0 ? settings.plaintextHeaderSize : SQLCipherSettings.saltByteCount
        case .chacha20:
            let readable = settings.legacy ? 0 : SQLCipherSettings.chacha20PageOneOffset
            return max(settings.plaintextHeaderSize, readable)
        }
    }

    /// Whether a rollback journal record's checksum is stored over the ciphertext (SQLCipher's journal) or, as
    /// SQLite computed it, over the plaintext (SQLite3 Multiple Ciphers' journal, for the chacha20 format): each
    /// format keeps its peer's, so that a hot journal plays back on either side.
    public var journalChecksumOverCiphertext: Bool { settings.cipher == .sqlcipher }

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

    // Safety: `checkSize` has checked `page.count == pageSize` and `out` is `pageSize` bytes: both buffers are one
    // page, lent for the closures only, as the pointer entry points require.
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
        switch transform {
        case .sqlcipher(let cipher, let mac):
            unsafe encryptSQLCipher(page: page, number: number, into: output, cipher: cipher, mac: mac)
        case .chacha20(let key):
            // Safety: the codec holds `key` for as long as it lives, and so for this call.
            unsafe encryptChaCha20(page: page, number: number, into: output, key: key.unsafeBytes, nonce: nil)
        }
    }

    // Safety: the guard checks the 16-byte nonce, `transform` lends two one-page buffers, and the key is the codec's
    // 32-byte chacha20 key; all are lent for their closures only.
    /// Encrypts one plaintext page of the chacha20 format under the given 16-byte nonce instead of a random one:
    /// for vectors and tests only (a page whose block counter wraps at 2³² inside it). A nonce must never be used
    /// twice.
    /// - Throws: ``E3DBError/Code/invalidParameter`` when the codec is not chacha20's or the nonce is not 16 bytes.
    package func encrypt(page: [UInt8], number: UInt32, nonce: [UInt8]) throws(E3DBError) -> [UInt8] {
        guard case .chacha20(let key) = transform, nonce.count == 16 else {
            throw E3DBError(.invalidParameter, "a chosen nonce is for a chacha20 codec, and 16 bytes")
        }
        return try unsafe transform(page, number) { (input, output) throws(E3DBError) in
            unsafe key.withUnsafeBytes { key in
                unsafe nonce.withUnsafeBytes { nonce in
                    unsafe encryptChaCha20(page: input, number: number, into: output, key: key, nonce: nonce)
                }
            }
        }
    }

    /// Checks the tag of the stored `page` and decrypts it into `output` (both `pageSize` bytes; no overlap).
    /// - Throws: ``E3DBError/Code/pageTampered`` (`context.actual` = `number`); `output` is then all zero.
    package func decrypt(
        page: UnsafeRawBufferPointer, number: UInt32, into output: UnsafeMutableRawBufferPointer
    ) throws(E3DBError) {
        let pageSize = settings.pageSize
        precondition(page.count == pageSize && output.count == pageSize, "PageCodec: buffers hold one page")
        let authentic: Bool
        switch transform {
        case .sqlcipher(let cipher, let mac):
            authentic = unsafe decryptSQLCipher(page: page, number: number, into: output, cipher: cipher, mac: mac)
        case .chacha20(let key):
            // Safety: the codec holds `key` for as long as it lives, and so for this call.
            authentic = unsafe decryptChaCha20(page: page, number: number, into: output, key: key.unsafeBytes)
        }
        guard authentic else { throw unsafe Self.tampered(number, output) }
    }

    // Safety: `output` is the caller's page buffer, lent for the call; it is zeroed within its own count.
    /// Zeros `output` and returns the typed error of a page that did not authenticate.
    private static func tampered(_ number: UInt32, _ output: UnsafeMutableRawBufferPointer) -> E3DBError {
        unsafe output.initializeMemory(as: UInt8.self, repeating: 0)
        return E3DBError(
            .pageTampered, "page \(number) did not authenticate", context: .init(part: "page", actual: Int(number)))
    }

    // MARK: SQLCipher

    /// Encrypts into `output`: the IV and padding from the reservoir, AES-CBC straight into the page, the HMAC after
    /// the IV. Nothing is allocated.
    private func encryptSQLCipher(
        page: UnsafeRawBufferPointer, number: UInt32, into output: UnsafeMutableRawBufferPointer, cipher: AESCBC,
        mac: KeyedHMAC
    ) {
        let pageSize = settings.pageSize
        let start = dataOffset(number)
        let end = pageSize - settings.reserveByteCount
        let macStart = end + SQLCipherSettings.ivByteCount
        // A fresh random IV (and random padding after the HMAC, as SQLCipher fills its whole reserve), from a
        // reservoir: one system call per 64 KiB, not one per page.
        unsafe Self.randomness.fill(UnsafeMutableRawBufferPointer(rebasing: output[end..<pageSize]))
        unsafe cipher.encrypt(
            UnsafeRawBufferPointer(rebasing: page[start..<end]),
            into: UnsafeMutableRawBufferPointer(rebasing: output[start..<end]),
            iv: UnsafeRawBufferPointer(rebasing: output[end..<macStart]))
        unsafe withPageNumber(number) { pageNumber in
            unsafe mac.authenticate(
                UnsafeRawBufferPointer(rebasing: output[start..<macStart]), pageNumber,
                into: UnsafeMutableRawBufferPointer(
                    rebasing: output[macStart..<(macStart + settings.algorithm.macByteCount)]))
        }
        if settings.plaintextHeaderSize > 0 {
            // Page 1's plaintext header, stored as it is (no salt in the file).
            unsafe copyPlaintextHeader(from: page, into: output, count: start)
        } else if start > 0 {
            unsafe salt.withUnsafeBytes {
                unsafe UnsafeMutableRawBufferPointer(rebasing: output[0..<start]).copyMemory(from: $0)
            }
        }
    }

    // Safety: the four bytes are a local variable's, lent for the closure only.
    /// Calls `body` with the page number as 4 little-endian bytes (what SQLCipher's HMAC covers after the IV).
    @inline(__always)
    private func withPageNumber<R>(_ number: UInt32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        var littleEndian = number.littleEndian
        return unsafe withUnsafeBytes(of: &littleEndian) { unsafe body($0) }
    }

    /// Copies page 1's first `count` bytes (a plaintext header) from `page` to `output`.
    private func copyPlaintextHeader(
        from page: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, count: Int
    ) {
        unsafe UnsafeMutableRawBufferPointer(rebasing: output[0..<count]).copyMemory(
            from: UnsafeRawBufferPointer(rebasing: page[0..<count]))
    }

    /// Decrypts into `output` when the HMAC verifies; false (nothing written) when it does not. Nothing is
    /// allocated.
    private func decryptSQLCipher(
        page: UnsafeRawBufferPointer, number: UInt32, into output: UnsafeMutableRawBufferPointer, cipher: AESCBC,
        mac: KeyedHMAC
    ) -> Bool {
        let pageSize = settings.pageSize
        let start = dataOffset(number)
        let end = pageSize - settings.reserveByteCount
        let macStart = end + SQLCipherSettings.ivByteCount
        let authentic = unsafe withPageNumber(number) { pageNumber in
            unsafe mac.verify(
                UnsafeRawBufferPointer(rebasing: page[start..<macStart]), pageNumber,
                expected: UnsafeRawBufferPointer(
                    rebasing: page[macStart..<(macStart + settings.algorithm.macByteCount)]))
        }
        guard authentic else { return false }
        unsafe cipher.decrypt(
            UnsafeRawBufferPointer(rebasing: page[start..<end]),
            into: UnsafeMutableRawBufferPointer(rebasing: output[start..<end]),
            iv: UnsafeRawBufferPointer(rebasing: page[end..<macStart]))
        unsafe UnsafeMutableRawBufferPointer(rebasing: output[end..<pageSize]).initializeMemory(
            as: UInt8.self, repeating: 0)
        if settings.plaintextHeaderSize > 0 {
            unsafe copyPlaintextHeader(from: page, into: output, count: start)
        } else if start > 0 {
            unsafe Self.sqliteHeader.withUnsafeBytes {
                unsafe UnsafeMutableRawBufferPointer(rebasing: output[0..<start]).copyMemory(from: $0)
            }
        }
        return true
    }

    // MARK: chacha20

    // Safety: `nonce` is the 16 bytes of the page's nonce field (both callers cut it as `n..<n + 16`), so
    // `nonce[12...15]` and `nonce[0..<12]` are inside it; `key` is the codec's 32-byte key. `otk` is 64 bytes on the
    // stack, zeroed, turned into one key-stream block, lent to `body` for the call and zeroed again.
    /// Calls `body` with the page's one-time keys (64 bytes on the stack, wiped after): the first key-stream block
    /// of the database key at the page's counter. Returns the counter the page data starts at, with `body`'s
    /// result.
    @inline(__always)
    private static func withOneTimeKeys<R>(
        nonce: UnsafeRawBufferPointer, number: UInt32, key: UnsafeRawBufferPointer,
        _ body: (UnsafeMutableRawBufferPointer, UInt32) -> R
    ) -> R {
        // The counter: the nonce's last 4 bytes, little-endian, XOR the page number; the ChaCha20 nonce: its first
        // 12 bytes.
        let stored =
            unsafe UInt32(nonce[12]) | UInt32(nonce[13]) << 8 | UInt32(nonce[14]) << 16
            | UInt32(nonce[15]) << 24
        let counter = stored ^ number
        let chachaNonce = unsafe UnsafeRawBufferPointer(rebasing: nonce[0..<RawChaCha20.nonceByteCount])
        return unsafe withUnsafeTemporaryAllocation(byteCount: RawChaCha20.blockByteCount, alignment: 16) { otk in
            unsafe otk.initializeMemory(as: UInt8.self, repeating: 0)
            unsafe RawChaCha20.xor(
                UnsafeRawBufferPointer(otk), into: otk, nonce: chachaNonce, counter: counter, key: key)
            let result = unsafe body(otk, counter &+ 1)
            unsafe otk.initializeMemory(as: UInt8.self, repeating: 0)
            return result
        }
    }

    /// Encrypts under a fresh random nonce (or `chosen`, for vectors).
    private func encryptChaCha20(
        page: UnsafeRawBufferPointer, number: UInt32, into output: UnsafeMutableRawBufferPointer,
        key: UnsafeRawBufferPointer, nonce chosen: UnsafeRawBufferPointer?
    ) {
        let pageSize = settings.pageSize
        let start = dataOffset(number)
        let n = pageSize - SQLCipherSettings.chacha20ReserveByteCount
        let nonceRange = n..<(n + 16)
        let tagRange = (n + 16)..<pageSize
        if let chosen = unsafe chosen {
            unsafe UnsafeMutableRawBufferPointer(rebasing: output[nonceRange]).copyMemory(from: chosen)
        } else {
            unsafe Self.randomness.fill(UnsafeMutableRawBufferPointer(rebasing: output[nonceRange]))
        }
        let nonce = unsafe UnsafeRawBufferPointer(rebasing: output[nonceRange])
        unsafe Self.withOneTimeKeys(nonce: nonce, number: number, key: key) { otk, counter in
            unsafe RawChaCha20.xor(
                UnsafeRawBufferPointer(rebasing: page[start..<n]),
                into: UnsafeMutableRawBufferPointer(rebasing: output[start..<n]),
                nonce: UnsafeRawBufferPointer(rebasing: nonce[0..<RawChaCha20.nonceByteCount]), counter: counter,
                key: UnsafeRawBufferPointer(rebasing: otk[32..<64]))
            if number == 1 && settings.plaintextHeaderSize > 0 {
                // Page 1's plaintext header (and, non-legacy, bytes up to 24) as they are; no salt in the file.
                unsafe copyPlaintextHeader(from: page, into: output, count: start)
            } else if number == 1 {
                unsafe salt.withUnsafeBytes {
                    unsafe UnsafeMutableRawBufferPointer(rebasing: output[0..<16]).copyMemory(from: $0)
                }
                if start > 16 {
                    unsafe UnsafeMutableRawBufferPointer(rebasing: output[16..<start]).copyMemory(
                        from: UnsafeRawBufferPointer(rebasing: page[16..<start]))
                }
            }
            unsafe Poly1305.authenticate(
                UnsafeRawBufferPointer(rebasing: output[0..<tagRange.lowerBound]),
                key: UnsafeRawBufferPointer(rebasing: otk[0..<32]),
                into: UnsafeMutableRawBufferPointer(rebasing: output[tagRange]))
        }
    }

    /// Decrypts into `output` when the tag verifies; false (nothing written) when it does not.
    private func decryptChaCha20(
        page: UnsafeRawBufferPointer, number: UInt32, into output: UnsafeMutableRawBufferPointer,
        key: UnsafeRawBufferPointer
    ) -> Bool {
        let pageSize = settings.pageSize
        let start = dataOffset(number)
        let n = pageSize - SQLCipherSettings.chacha20ReserveByteCount
        let nonce = unsafe UnsafeRawBufferPointer(rebasing: page[n..<(n + 16)])
        return unsafe Self.withOneTimeKeys(nonce: nonce, number: number, key: key) { otk, counter in
            guard
                unsafe Poly1305.verify(
                    UnsafeRawBufferPointer(rebasing: page[(n + 16)..<pageSize]),
                    of: UnsafeRawBufferPointer(rebasing: page[0..<(n + 16)]),
                    key: UnsafeRawBufferPointer(rebasing: otk[0..<32]))
            else { return false }
            unsafe RawChaCha20.xor(
                UnsafeRawBufferPointer(rebasing: page[start..<n]),
                into: UnsafeMutableRawBufferPointer(rebasing: output[start..<n]),
                nonce: UnsafeRawBufferPointer(rebasing: nonce[0..<RawChaCha20.nonceByteCount]), counter: counter,
                key: UnsafeRawBufferPointer(rebasing: otk[32..<64]))
            unsafe UnsafeMutableRawBufferPointer(rebasing: output[n..<pageSize]).initializeMemory(
                as: UInt8.self, repeating: 0)
            if number == 1 && settings.plaintextHeaderSize > 0 {
                unsafe copyPlaintextHeader(from: page, into: output, count: start)
            } else if number == 1 {
                unsafe Self.sqliteHeader.withUnsafeBytes {
                    unsafe UnsafeMutableRawBufferPointer(rebasing: output[0..<16]).copyMemory(from: $0)
                }
                if start > 16 {
                    unsafe UnsafeMutableRawBufferPointer(rebasing: output[16..<start]).copyMemory(
                        from: UnsafeRawBufferPointer(rebasing: page[16..<start]))
                }
            }
            return true
        }
    }
}

extension SQLCipherSettings.Algorithm {
    /// The page HMAC's hash.
    var hmacHash: KeyedHMAC.Hash {
        switch self {
        case .sha512: .sha512
        case .sha256: .sha256
        case .sha1: .sha1
        }
    }
}
