internal import CE3DBSQLite3
internal import E3DBPageCodec
internal import E3DBPrimitives

/// A main database file: every page encrypted and authenticated in the codec's layout (SQLCipher 4's, or SQLite3
/// Multiple Ciphers' chacha20).
///
/// - Reads decrypt whole pages; a read inside a page (the 100-byte header at open, the 16-byte change counter at
///   each transaction, the start of an overflow page) decrypts the page and copies the part asked for.
/// - Writes are whole pages; anything else is refused, so no plaintext reaches the file.
/// - An empty file that a connection opens for writing is given an encrypted, empty page 1 at its first lock, with
///   the page size and the reserved bytes the cipher needs (80 for SQLCipher 4, 32 for chacha20): SQLite then lays out every page to leave room for the IV
///   and HMAC, exactly as SQLCipher does.
final class MainDatabaseFile: PassThroughFile {
    let cipher: DatabaseCipher
    private var raw = PageBuffer()
    private var plain = PageBuffer()
    /// Key resolution's own buffers: it may run in the middle of a read that holds `raw` and `plain`.
    private var probeRaw = PageBuffer()
    private var probePlain = PageBuffer()
    /// Page 1 as last read and authenticated: its stored bytes, their plaintext and the codec. SQLite reads a few
    /// header bytes of page 1 at open (100) and at the start of every read transaction (the 16-byte change counter);
    /// while the stored page is unchanged (a write gives it a new IV) those reads copy from here instead of
    /// authenticating and decrypting the whole page again: equal stored bytes under one codec are equal plaintext.
    private var pageOneStored = PageBuffer()
    private var pageOnePlain = PageBuffer()
    private var pageOneCodec: PageCodec?
    private var checkedEmpty = false

    init(inner: UnsafeMutablePointer<sqlite3_file>, cipher: DatabaseCipher) {
        self.cipher = cipher
        // Safety: `inner` is the base VFS's file in SQLite's allocation for this file, whose lifetime `PassThroughFile`
        // describes.
        unsafe super.init(inner: inner)
        cipher.main = self
    }

    override func discard() { cipher.close() }

    override func close() -> Int32 {
        let rc = super.close()
        raw.release()
        plain.release()
        probeRaw.release()
        probePlain.release()
        pageOneStored.release()
        pageOnePlain.release()
        pageOneCodec = nil
        cipher.close()
        return rc
    }

    // MARK: The codec

    /// Binds the codec to this file: the file's salt, after page 1 (or, when page 1 itself is damaged, another
    /// page) authenticates; for an empty file, a new salt, kept only once something is written (`forWrite`), so that
    /// a connection that only looked at an empty file takes the salt another one writes. Tells a missing key, a
    /// plaintext database, a page size or reserve mismatch and a wrong key apart.
    func resolveCodec(forWrite: Bool = false) -> Result<PageCodec, CipherFailure> {
        if let codec = cipher.codec { return .success(codec) }
        guard let (key, named) = cipher.effectiveKey() else {
            return .failure(
                CipherFailure(
                    SQLITE_NOTADB, E3DBError(.keyMissing, "no key was given for the encrypted database \(cipher.path)"))
            )
        }
        var size: Int64 = 0
        let sizeRC = fileSize(&size)
        guard sizeRC == SQLITE_OK else {
            return .failure(CipherFailure(sizeRC, E3DBError(.databaseError, "the database's size is unknown")))
        }
        var settings = named
        if size >= Int64(SQLCipherSettings.chacha20PageOneOffset), cipher.ownKey != nil {
            // The format, recognised from page 1 when it was not named.
            // Safety: the temporary holds `chacha20PageOneOffset` bytes, at least the 24 `recognisedSettings` reads
            // (it checks the count); `first[0..<16]` below is inside a page (at least 512 bytes, validated settings).
            let recognised = unsafe withUnsafeTemporaryAllocation(
                byteCount: SQLCipherSettings.chacha20PageOneOffset, alignment: 1
            ) { header in
                guard unsafe readRaw(header, at: 0) == SQLITE_OK else { return named }
                return unsafe cipher.recognisedSettings(header: UnsafeRawBufferPointer(header))
            }
            if recognised != named {
                cipher.settings = recognised
                settings = recognised
            }
        }
        do throws(E3DBError) {
            if size == 0 {
                let salt = key.saltForNewDatabase(settings)
                if settings.plaintextHeaderSize > 0, settings.salt == nil, cipher.ownKey != nil {
                    // The file will not hold this salt: the connection keeps it (`PRAGMA cipher_salt` reads it).
                    cipher.settings.salt = salt
                }
                let codec = try PageCodecCache.shared.codec(key: key, salt: salt, settings: settings)
                if forWrite { cipher.codec = codec }
                return .success(codec)
            }
            let pageSize = settings.pageSize
            // Page 1: its salt gives the codec, and whether it authenticates settles the key at once.
            let probe = try unsafe probeRaw.withBytes(pageSize) {
                (first) throws(E3DBError) -> Result<(codec: PageCodec, opened: Bool), CipherFailure> in
                let rc = unsafe readRaw(first, at: 0)
                guard rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ else {
                    return .failure(CipherFailure(rc, E3DBError(.databaseError, "page 1 could not be read")))
                }
                let header = unsafe Array(first[0..<16])
                let salt: [UInt8]
                if settings.plaintextHeaderSize > 0 {
                    // A plaintext header: the salt is not in the file.
                    guard let external = key.externalSalt(settings) else {
                        return .failure(
                            CipherFailure(
                                SQLITE_NOTADB,
                                E3DBError(
                                    .keyMissing,
                                    "a database with a plaintext header needs its salt: cipher_salt, or a raw key with its salt",
                                    context: .init(part: "cipher_salt"))))
                    }
                    salt = external
                } else if header == PageCodec.sqliteHeader {
                    return .failure(
                        CipherFailure(
                            SQLITE_NOTADB,
                            E3DBError(
                                .databaseNotEncrypted,
                                "\(cipher.path) is a plaintext SQLite database, or an encrypted one with a plaintext header (cipher_plaintext_header_size)"
                            )))
                } else {
                    salt = header
                }
                guard size >= Int64(SQLCipherSettings.saltByteCount) else {
                    return .failure(
                        CipherFailure(
                            SQLITE_NOTADB,
                            E3DBError(
                                .invalidLength, "the database is shorter than its salt",
                                context: .init(part: "database", actual: Int(size)))))
                }
                let codec = try PageCodecCache.shared.codec(key: key, salt: salt, settings: settings)
                guard size >= Int64(pageSize), rc == SQLITE_OK else { return .success((codec, false)) }
                let opened = try unsafe probePlain.withBytes(pageSize) { (page1) throws(E3DBError) -> Bool in
                    do throws(E3DBError) {
                        try unsafe codec.decrypt(page: UnsafeRawBufferPointer(first), number: 1, into: page1)
                        try unsafe Self.checkHeader(UnsafeRawBufferPointer(page1), settings: settings)
                        return true
                    } catch  where error.code == .pageTampered {
                        return false  // a wrong key, or the right key under another page size
                    }
                }
                return .success((codec, opened))
            }
            let codec: PageCodec
            switch probe {
            case .failure(let failure): return .failure(failure)
            case .success(let (probed, opened)):
                if opened {
                    cipher.codec = probed
                    return .success(probed)
                }
                codec = probed
            }
            if let actual = otherPageSize(codec, fileSize: size) {
                return .failure(
                    CipherFailure(
                        SQLITE_NOTADB,
                        E3DBError(
                            .pageSizeMismatch,
                            "the database's pages are \(actual) bytes, the cipher settings say \(pageSize)",
                            context: .init(part: "cipher_page_size", expected: pageSize, actual: actual))))
            }
            guard size >= Int64(pageSize) else {
                return .failure(
                    CipherFailure(
                        SQLITE_NOTADB,
                        E3DBError(
                            .invalidLength, "the database is shorter than one page",
                            context: .init(part: "database", expected: pageSize, actual: Int(size)))))
            }
            if anotherPageAuthenticates(codec, fileSize: size) {
                // The key opens the other pages: page 1 itself is damaged (torn by a crash, which a hot journal
                // repairs, or changed). The codec stands; reading page 1 reports it as tampered.
                cipher.codec = codec
                return .success(codec)
            }
            return .failure(
                CipherFailure(
                    SQLITE_NOTADB,
                    E3DBError(
                        .wrongKey, "the key does not open \(cipher.path) (page 1 did not authenticate)")))
        } catch {
            let code: Int32 = error.code == .wrongKey ? SQLITE_NOTADB : SQLITE_ERROR
            return .failure(CipherFailure(code, error))
        }
    }

    // Safety: `stored` and `page` are lent by the probe buffers for `candidate` bytes, inside their closures only;
    // `readRaw` fills exactly `stored.count` bytes and `decrypt` checks both sizes against `other`'s page size, which
    // is `candidate`.
    /// A page size under which page 1 authenticates with the same keys, if the settings' one is not it.
    private func otherPageSize(_ codec: PageCodec, fileSize: Int64) -> Int? {
        var candidate = 512
        while candidate <= 65536 {
            defer { candidate *= 2 }
            guard candidate != codec.settings.pageSize, Int64(candidate) <= fileSize,
                let other = try? codec.withPageSize(candidate)
            else { continue }
            let opens = unsafe probeRaw.withBytes(candidate) { stored in
                guard unsafe readRaw(stored, at: 0) == SQLITE_OK else { return false }
                return unsafe probePlain.withBytes(candidate) { page in
                    (try? unsafe other.decrypt(page: UnsafeRawBufferPointer(stored), number: 1, into: page)) != nil
                }
            }
            if opens { return candidate }
        }
        return nil
    }

    // Safety: `stored` and `page` are lent by the probe buffers for `pageSize` bytes, inside their closures only;
    // `readRaw`, `isAllZero` and `decrypt` stay within those counts (`decrypt` checks them).
    /// Whether one of the pages after page 1 (the first few that are not all zero) authenticates with `codec`:
    /// then the key is right and page 1 was tampered with.
    private func anotherPageAuthenticates(_ codec: PageCodec, fileSize: Int64) -> Bool {
        let pageSize = codec.settings.pageSize
        let pages = fileSize / Int64(pageSize)
        var index: Int64 = 1
        while index < min(pages, 9) {
            defer { index += 1 }
            let number = UInt32(index + 1)
            let authenticates: Bool? = unsafe probeRaw.withBytes(pageSize) { stored in
                guard unsafe readRaw(stored, at: index * Int64(pageSize)) == SQLITE_OK,
                    unsafe !isAllZero(UnsafeRawBufferPointer(stored))
                else { return nil }
                return unsafe probePlain.withBytes(pageSize) { page in
                    (try? unsafe codec.decrypt(page: UnsafeRawBufferPointer(stored), number: number, into: page)) != nil
                }
            }
            if let authenticates { return authenticates }
        }
        return false
    }

    // Safety: callers pass a whole page (at least 512 bytes: settings are validated), so offsets 16, 17 and 20
    // are in bounds.
    /// Page 1's plaintext header must give the settings' page size and reserve at least the cipher's bytes.
    static func checkHeader(_ page: UnsafeRawBufferPointer, settings: SQLCipherSettings) throws(E3DBError) {
        let encoded = unsafe Int(page[16]) << 8 | Int(page[17])
        let pageSize = encoded == 1 ? 65536 : encoded
        guard pageSize == settings.pageSize else {
            throw E3DBError(
                .pageSizeMismatch,
                "the database header gives \(pageSize)-byte pages, the cipher settings \(settings.pageSize)",
                context: .init(part: "cipher_page_size", expected: settings.pageSize, actual: pageSize))
        }
        // More than the cipher needs is allowed: SQLCipher 4 switched to `cipher_compatibility = 3` after the key
        // keeps SQLite's 80 bytes while the v3 codec uses 48 of them.
        let reserve = unsafe Int(page[20])
        guard reserve >= settings.reserveByteCount else {
            throw E3DBError(
                .reserveMismatch,
                "the database reserves \(reserve) bytes per page, the cipher needs \(settings.reserveByteCount)",
                context: .init(part: "reserve", expected: settings.reserveByteCount, actual: reserve))
        }
    }

    // MARK: I/O

    // Safety: SQLite lends `buffer` for the call. Each turn covers `count <= buffer.count - done` bytes, so
    // `target` (the rest of `buffer`) holds `count` bytes, and `pageSize` of them when a whole page is read;
    // `within + count <= pageSize` keeps the copy from the page buffer inside it. `stored` and `output` are the
    // page buffers lent by `withBytes` for `pageSize` bytes, used inside their closures only.
    override func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        var codec: PageCodec
        switch resolveCodec() {
        case .success(let resolved): codec = resolved
        case .failure(let failure):
            // SQLite reads the 100-byte header when it opens a database, before `PRAGMA key` can be run; zeros
            // make it take the header from page 1 at the first transaction instead.
            if failure.error.code == .keyMissing, offset == 0, buffer.count <= 100 {
                unsafe buffer.initializeMemory(as: UInt8.self, repeating: 0)
                return SQLITE_OK
            }
            return cipher.fail(failure)
        }
        let pageSize = codec.settings.pageSize
        var done = 0
        while done < buffer.count {
            let position = offset + Int64(done)
            let pageIndex = position / Int64(pageSize)
            let within = Int(position - pageIndex * Int64(pageSize))
            let count = min(pageSize - within, buffer.count - done)
            let target = unsafe UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
            // The page's status when the read ends here, nil when it goes on.
            let stop: Int32? = unsafe raw.withBytes(pageSize) { stored in
                let rc = unsafe readRaw(stored, at: pageIndex * Int64(pageSize))
                let number = UInt32(clamping: pageIndex + 1)
                if rc == SQLITE_IOERR_SHORT_READ {
                    unsafe target.initializeMemory(as: UInt8.self, repeating: 0)
                    // A page that starts at or past the end of the file: zeros, as SQLite expects of a short read.
                    // One the file holds only part of was cut: tampering, never zeros in its place.
                    var size: Int64 = 0
                    guard fileSize(&size) == SQLITE_OK, size > pageIndex * Int64(pageSize) else {
                        return SQLITE_IOERR_SHORT_READ
                    }
                    return cipher.fail(
                        CipherFailure(
                            SQLITE_IOERR_DATA,
                            E3DBError(
                                .pageTampered,
                                "page \(number) of \(cipher.path) is cut short: the file holds "
                                    + "\(size - pageIndex * Int64(pageSize)) of its \(pageSize) bytes",
                                context: .init(part: "database", actual: Int(number)))))
                }
                guard rc == SQLITE_OK else { return rc }
                if number == 1, codec.settings.plaintextHeaderSize == 0,
                    unsafe !UnsafeRawBufferPointer(rebasing: stored[0..<SQLCipherSettings.saltByteCount])
                        .elementsEqual(codec.salt)
                {
                    // Another connection gave the file its page 1 (and salt) after this one first looked at it.
                    cipher.codec = nil
                    switch resolveCodec() {
                    case .success(let resolved): codec = resolved
                    case .failure(let failure): return cipher.fail(failure)
                    }
                    // The new page 1 may be of another format or page size than the buffers this read holds.
                    guard codec.settings.pageSize == pageSize else {
                        return cipher.fail(
                            CipherFailure(
                                SQLITE_NOTADB,
                                E3DBError(
                                    .pageSizeMismatch,
                                    "page 1 of \(cipher.path) was rewritten with \(codec.settings.pageSize)-byte pages "
                                        + "while this connection reads \(pageSize)-byte pages",
                                    context: .init(
                                        part: "cipher_page_size", expected: pageSize,
                                        actual: codec.settings.pageSize))))
                    }
                }
                // An all-zero page does not authenticate either (SQLCipher 4.12 refuses it too).
                func decrypt(into output: UnsafeMutableRawBufferPointer) -> Int32? {
                    do throws(E3DBError) {
                        try unsafe codec.decrypt(page: UnsafeRawBufferPointer(stored), number: number, into: output)
                        return nil
                    } catch {
                        unsafe target.initializeMemory(as: UInt8.self, repeating: 0)
                        return cipher.fail(
                            CipherFailure(
                                SQLITE_IOERR_DATA,
                                E3DBError(
                                    .pageTampered, "page \(number) of \(cipher.path) did not authenticate",
                                    context: .init(part: "database", actual: Int(number)))))
                    }
                }
                let whole = within == 0 && count == pageSize
                if number == 1 {
                    if !whole, let known = pageOneCodec, known === codec,
                        unsafe pageOneStored.withBytes(pageSize, { unsafe $0.elementsEqual(stored) })
                    {
                        unsafe pageOnePlain.withBytes(pageSize) { known in
                            unsafe UnsafeMutableRawBufferPointer(rebasing: target[0..<count])
                                .copyMemory(from: UnsafeRawBufferPointer(rebasing: known[within..<(within + count)]))
                        }
                        return nil
                    }
                    pageOneCodec = nil
                    let failure = unsafe pageOnePlain.withBytes(pageSize) { output in unsafe decrypt(into: output) }
                    if let failure { return failure }
                    unsafe pageOneStored.withBytes(pageSize) {
                        unsafe $0.copyMemory(from: UnsafeRawBufferPointer(stored))
                    }
                    pageOneCodec = codec
                    unsafe pageOnePlain.withBytes(pageSize) { known in
                        unsafe UnsafeMutableRawBufferPointer(rebasing: target[0..<count])
                            .copyMemory(from: UnsafeRawBufferPointer(rebasing: known[within..<(within + count)]))
                    }
                    return nil
                }
                if whole {
                    return unsafe decrypt(into: UnsafeMutableRawBufferPointer(rebasing: target[0..<pageSize]))
                }
                return unsafe plain.withBytes(pageSize) { output in
                    if let failure = unsafe decrypt(into: output) { return failure }
                    unsafe UnsafeMutableRawBufferPointer(rebasing: target[0..<count])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: output[within..<(within + count)]))
                    return nil
                }
            }
            if let stop { return stop }
            done += count
        }
        return SQLITE_OK
    }

    // Safety: SQLite lends `buffer` for the call; it is used only after the guard has checked `buffer.count ==
    // pageSize`, which is what `checkHeader` (offsets up to 20) and `encryptAndWrite` (whose `encrypt` checks it again)
    // need.
    override func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        let codec: PageCodec
        switch resolveCodec(forWrite: true) {
        case .success(let resolved): codec = resolved
        case .failure(let failure): return cipher.fail(failure)
        }
        let pageSize = codec.settings.pageSize
        guard buffer.count == pageSize, offset % Int64(pageSize) == 0 else {
            return cipher.fail(
                CipherFailure(
                    SQLITE_IOERR_WRITE,
                    E3DBError(
                        .invalidLength, "a write that is not one whole page was refused",
                        context: .init(part: "database", expected: pageSize, actual: buffer.count, offset: Int(offset)))
                ))
        }
        let number = UInt32(clamping: offset / Int64(pageSize) + 1)
        if number == 1 {
            do throws(E3DBError) {
                try unsafe Self.checkHeader(buffer, settings: codec.settings)
            } catch {
                return cipher.fail(CipherFailure(SQLITE_IOERR_WRITE, error))
            }
        }
        return unsafe raw.encryptAndWrite(buffer, number: number, codec: codec, to: self, at: offset, cipher: cipher)
    }

    override func lock(_ level: Int32) -> Int32 {
        let rc = super.lock(level)
        // Only on the way to SHARED: the exclusive lock taken and released here must not drop a lock SQLite holds.
        if rc == SQLITE_OK, level == SQLITE_LOCK_SHARED, !checkedEmpty {
            initializeIfEmpty()
        }
        return rc
    }

    // Safety: `page` is lent by `plain.withBytes` for exactly `settings.pageSize` bytes, inside the closure only: the
    // whole page `emptyDatabasePage` fills and `write` checks.
    /// Gives an empty database its encrypted page 1 (under an exclusive lock, so two connections creating the
    /// same file agree on one salt). Only a connection's main database, opened for writing, with a key.
    private func initializeIfEmpty() {
        guard cipher.isConnectionMain, !cipher.readOnly, let (_, settings) = cipher.effectiveKey() else { return }
        var size: Int64 = 0
        guard fileSize(&size) == SQLITE_OK else { return }
        guard size == 0 else {
            checkedEmpty = true
            return
        }
        guard super.lock(SQLITE_LOCK_RESERVED) == SQLITE_OK else { return }
        defer { _ = super.unlock(SQLITE_LOCK_SHARED) }
        guard super.lock(SQLITE_LOCK_EXCLUSIVE) == SQLITE_OK, fileSize(&size) == SQLITE_OK, size == 0 else { return }
        let written = unsafe plain.withBytes(settings.pageSize) { page in
            unsafe Self.emptyDatabasePage(page, settings: settings)
            cipher.codec = nil
            return unsafe write(UnsafeRawBufferPointer(page), at: 0)
        }
        if written == SQLITE_OK, sync(SQLITE_SYNC_NORMAL) == SQLITE_OK {
            checkedEmpty = true
        }
    }

    /// Page 1 of an empty database, as SQLite's own `newDatabase` lays it out, with the cipher's reserve.
    // Safety: `page` is a whole page of validated settings (at least 512 bytes); the highest offset written is 106.
    static func emptyDatabasePage(_ page: UnsafeMutableRawBufferPointer, settings: SQLCipherSettings) {
        unsafe page.initializeMemory(as: UInt8.self, repeating: 0)
        unsafe PageCodec.sqliteHeader.withUnsafeBytes {
            unsafe UnsafeMutableRawBufferPointer(rebasing: page[0..<16]).copyMemory(from: $0)
        }
        let encodedSize = settings.pageSize == 65536 ? 1 : settings.pageSize
        unsafe page[16] = UInt8(encodedSize >> 8)
        unsafe page[17] = UInt8(encodedSize & 0xff)
        unsafe page[18] = 1  // write version: rollback journal
        unsafe page[19] = 1  // read version
        unsafe page[20] = UInt8(settings.reserveByteCount)
        unsafe page[21] = 64  // maximum embedded payload fraction
        unsafe page[22] = 32  // minimum embedded payload fraction
        unsafe page[23] = 32  // leaf payload fraction
        unsafe page[27] = 1  // file change counter
        unsafe page[31] = 1  // database size in pages
        unsafe page[95] = 1  // version-valid-for (= the change counter)
        let version = UInt32(sqlite3_libversion_number())
        for index in 0..<4 { unsafe page[96 + index] = UInt8(truncatingIfNeeded: version >> (24 - 8 * UInt32(index))) }
        // The b-tree header of an empty table leaf (sqlite_schema): no cells, content starting at the usable end.
        let usable = settings.pageSize - settings.reserveByteCount
        unsafe page[100] = 0x0d
        unsafe page[105] = UInt8(truncatingIfNeeded: usable >> 8)
        unsafe page[106] = UInt8(truncatingIfNeeded: usable)
    }

    override func fileControl(_ op: Int32, _ argument: UnsafeMutableRawPointer?) -> Int32 {
        switch op {
        case SQLITE_FCNTL_PDB:
            // Safety: for this op SQLite passes a pointer to its `sqlite3*`; only the handle's address is kept.
            if let argument = unsafe argument {
                unsafe cipher.attach(connection: unsafe argument.load(as: OpaquePointer?.self))
            }
            return unsafe super.fileControl(op, argument)
        case SQLITE_FCNTL_PRAGMA:
            guard let argument = unsafe argument else { return SQLITE_NOTFOUND }
            return unsafe CipherPragmas.handle(
                argument.assumingMemoryBound(to: UnsafeMutablePointer<CChar>?.self), file: self)
                ?? super.fileControl(op, argument)
        default:
            return unsafe super.fileControl(op, argument)
        }
    }

    /// Authenticates the pages of the file as it is on disk (not the WAL), up to the page count of page 1's header
    /// (when page 1 authenticates and its count is valid; else the file's size): the pages that fail, and the bytes
    /// after the last page, so the cost follows the header, not a sparse file's apparent size.
    func verifyPages() -> Result<PageVerification, CipherFailure> {
        let codec: PageCodec
        switch resolveCodec() {
        case .success(let resolved): codec = resolved
        case .failure(let failure): return .failure(failure)
        }
        var size: Int64 = 0
        let rc = fileSize(&size)
        guard rc == SQLITE_OK else {
            return .failure(CipherFailure(rc, E3DBError(.databaseError, "the database's size is unknown")))
        }
        let pageSize = Int64(codec.settings.pageSize)
        let filePages = (size + pageSize - 1) / pageSize
        // The header's "in-header database size" (bytes 28-31), valid when its version-valid-for number (92-95)
        // equals the change counter (24-27), as SQLite reads it.
        // Safety: both buffers are lent for `pageSize` bytes by `withBytes` and used only inside its closure; the
        // header fields read are at offsets 24, 28 and 92, inside page 1.
        let declared: Int64? = unsafe raw.withBytes(Int(pageSize)) { stored in
            guard unsafe readRaw(stored, at: 0) == SQLITE_OK else { return nil }
            return unsafe plain.withBytes(Int(pageSize)) { page in
                guard (try? unsafe codec.decrypt(page: UnsafeRawBufferPointer(stored), number: 1, into: page)) != nil
                else { return nil }
                let header = UnsafeRawBufferPointer(page)
                let count = unsafe bigEndian32(header, 28)
                return unsafe count > 0 && bigEndian32(header, 24) == bigEndian32(header, 92) ? Int64(count) : nil
            }
        }
        var found = PageVerification()
        found.pageCount = declared ?? filePages
        found.trailingBytes = max(0, size - found.pageCount * pageSize)
        var index: Int64 = 0
        while index < found.pageCount {
            let number = UInt32(clamping: index + 1)
            // A page past the end of the file (a header counting more pages than the file has) is bad unread.
            var authenticates = false
            if index < filePages {
                authenticates = unsafe raw.withBytes(Int(pageSize)) { stored in
                    guard unsafe readRaw(stored, at: index * pageSize) == SQLITE_OK else { return false }
                    return unsafe plain.withBytes(Int(pageSize)) { page in
                        (try? unsafe codec.decrypt(page: UnsafeRawBufferPointer(stored), number: number, into: page))
                            != nil
                    }
                }
            }
            if !authenticates { found.add(bad: number) }
            index += 1
        }
        return .success(found)
    }

    // MARK: The wal-index

    /// The wal-index regions SQLite mapped through this file (the -shm, shared with other connections and
    /// processes), by region number; empty when the wal-index is in heap memory (exclusive locking mode) or read
    /// from a read-only -shm (SQLite then works from a private copy).
    private var walIndexRegions: [Int32: (address: Int, size: Int)] = [:]

    // Safety: `out` is SQLite's out-pointer, valid for the call; the mapped region's address is kept only as an integer
    // with its size, and `walIndexPage` reads through it only while `shmUnmap` has not forgotten it.
    override func shmMap(
        _ region: Int32, _ size: Int32, _ extend: Int32, _ out: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
    ) -> Int32 {
        let rc = unsafe super.shmMap(region, size, extend, out)
        if rc == SQLITE_OK, let out = unsafe out, let base = unsafe out.pointee {
            walIndexRegions[region] = (Int(bitPattern: base), Int(size))
        } else {
            walIndexRegions[region] = nil
        }
        return rc
    }

    override func shmUnmap(_ delete: Int32) -> Int32 {
        walIndexRegions.removeAll()
        return super.shmUnmap(delete)
    }

    // Safety: see the note before the load: the address comes from a region SQLite mapped through `shmMap` and has not
    // unmapped.
    /// The page number the wal-index gives WAL frame `frame` (1-based: `aPgno[]` of SQLite's wal.c, in native byte
    /// order; region 0 holds frames 1-4062 after its 136-byte header, each later region 4096), nil when that region
    /// is not mapped here.
    func walIndexPage(frame: Int64) -> UInt32? {
        let firstRegionFrames: Int64 = 4062
        guard frame >= 1 else { return nil }
        let (region, offset): (Int64, Int64) =
            frame <= firstRegionFrames
            ? (0, 136 + 4 * (frame - 1))
            : ((frame - firstRegionFrames - 1) / 4096 + 1, 4 * ((frame - firstRegionFrames - 1) % 4096))
        guard let mapped = walIndexRegions[Int32(clamping: region)], Int(offset) + 4 <= mapped.size,
            let base = unsafe UnsafeRawPointer(bitPattern: mapped.address)
        else { return nil }
        // Safety: the region is mapped (SQLite unmaps it through shmUnmap, which forgets it) and `offset + 4` is
        // within its size.
        return unsafe base.loadUnaligned(fromByteOffset: Int(offset), as: UInt32.self)
    }
}

// Safety: reads `bytes` within its own count; callers lend a page buffer for the call.
/// Whether every byte is zero (not constant time: the bytes are ciphertext).
func isAllZero(_ bytes: UnsafeRawBufferPointer) -> Bool {
    unsafe !bytes.contains { $0 != 0 }
}

/// A page-sized scratch buffer in wiped storage (plaintext passes through it), resized when the page size changes.
/// The bytes are lent only inside ``withBytes(_:_:)``, so no pointer outlives the call that uses them.
struct PageBuffer {
    private var storage: WipedBuffer?

    // Safety: `current` keeps the `WipedBuffer` alive for the whole call, so the pointer lent to `body` is valid for
    // exactly `size` bytes until `body` returns; callers do not keep it.
    /// Calls `body` with `size` writable bytes: zeros after a resize, otherwise what the last call left in them.
    /// The buffer is held for the whole call (a nested `withBytes` on the same buffer is an exclusivity violation).
    mutating func withBytes<R, E: Error>(
        _ size: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        let current: WipedBuffer
        if let storage, storage.count == size {
            current = storage
        } else {
            current = WipedBuffer(count: size)
            storage = current
        }
        return try unsafe current.withUnsafeMutableBytes(body)
    }

    // Safety: `page` is the caller's whole page (its count checked against the page size by the caller and again by
    // `encrypt`); `stored` is lent by `withBytes` for `pageSize` bytes inside the closure only.
    /// Encrypts `page` as page `number` in this buffer and writes the ciphertext to `file` at `offset`; a failure
    /// to encrypt is `cipher`'s `SQLITE_IOERR_WRITE`.
    mutating func encryptAndWrite(
        _ page: UnsafeRawBufferPointer, number: UInt32, codec: PageCodec, to file: PassThroughFile, at offset: Int64,
        cipher: DatabaseCipher
    ) -> Int32 {
        unsafe withBytes(codec.settings.pageSize) { stored in
            do throws(E3DBError) {
                try unsafe codec.encrypt(page: page, number: number, into: stored)
            } catch {
                return cipher.fail(CipherFailure(SQLITE_IOERR_WRITE, error))
            }
            return unsafe file.writeRaw(UnsafeRawBufferPointer(stored), at: offset)
        }
    }

    mutating func release() { storage = nil }
}
