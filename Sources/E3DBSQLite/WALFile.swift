internal import CE3DBSQLite3
internal import E3DBPageCodec
internal import E3DBPrimitives

/// A write-ahead log in SQLCipher's format: frame headers in the clear (page number, commit size, salts), page
/// bodies encrypted with their page number, and the frame checksum chain computed over the ciphertext.
///
/// A frame's page is served only for the page the wal-index (`aPgno[]` in the -shm, which SQLite used to pick the
/// frame) gives that frame: the page HMAC binds the page number in the frame's own header, so a -shm edit that
/// points page P at another page's frame is `pageTampered` (part `wal`), as SQLCipher refuses it.
///
/// Every I/O is classified, and what fits no class is refused: the 32-byte WAL header (whose page size must be
/// the cipher's), a 24-byte frame header, a frame's page (encrypted, decrypted), a whole frame read back (recovery,
/// `walRewriteChecksums`: the ciphertext), and small reads inside a header. SQLite writes a frame as two calls,
/// the header (with checksums over the plaintext) and then the page: the header is held back until the page
/// comes, and the frame is written at once with its checksums recomputed over header and ciphertext from the
/// previous frame's as stored. A header written alone (`walRewriteChecksums` after a page was rewritten in place)
/// gets its checksums recomputed over the ciphertext on disk the same way, so no checksum SQLite computed over
/// plaintext is ever written.
final class WALFile: PassThroughFile {
    let cipher: DatabaseCipher
    private var raw = PageBuffer()
    private var pendingHeader: (offset: Int64, bytes: [UInt8])?

    static let headerSize: Int64 = 32
    static let frameHeaderSize = 24

    init(inner: UnsafeMutablePointer<sqlite3_file>, cipher: DatabaseCipher) {
        self.cipher = cipher
        // Safety: `inner` is the base VFS's file in SQLite's allocation for this file, whose lifetime `PassThroughFile`
        // describes.
        unsafe super.init(inner: inner)
    }

    // Safety: (the frame code below) a frame buffer is `pageSize + frameHeaderSize` bytes lent by
    // `raw.withBytes`, and the pending header is exactly `frameHeaderSize` bytes (only a write of that size is held
    // back), so `frame[0..<24]` and `frame[24...]` (one page) are in bounds; pages are `pageSize` bytes (checked
    // before encrypting); the WAL header read at offset 8 is checked to be 32 (or at least 12) bytes.
    /// Writes a held-back header on its own (its page is already on disk).
    private func flush() -> Int32 {
        guard let pending = pendingHeader else { return SQLITE_OK }
        pendingHeader = nil
        let codec: PageCodec
        switch cipher.resolvedCodec() {
        case .success(let resolved): codec = resolved
        case .failure(let failure): return cipher.fail(failure)
        }
        let pageSize = codec.settings.pageSize
        return unsafe raw.withBytes(pageSize + Self.frameHeaderSize) { frame in
            unsafe pending.bytes.withUnsafeBytes {
                unsafe UnsafeMutableRawBufferPointer(rebasing: frame[0..<Self.frameHeaderSize]).copyMemory(from: $0)
            }
            let rc = unsafe readRaw(
                UnsafeMutableRawBufferPointer(rebasing: frame[Self.frameHeaderSize...]),
                at: pending.offset + Int64(Self.frameHeaderSize))
            guard rc == SQLITE_OK else {
                return cipher.fail(
                    CipherFailure(
                        SQLITE_IOERR_WRITE,
                        E3DBError(
                            .databaseError, "a WAL frame header came without its page",
                            context: .init(part: "wal", offset: Int(pending.offset)))))
            }
            return unsafe writeChecksummed(frame, at: pending.offset, pageSize: pageSize, headerOnly: true)
        }
    }

    private func isFrameStart(_ offset: Int64, frameSize: Int64) -> Bool {
        offset >= Self.headerSize && (offset - Self.headerSize) % frameSize == 0
    }

    override func close() -> Int32 {
        _ = flush()
        raw.release()
        return super.close()
    }

    override func sync(_ flags: Int32) -> Int32 {
        let rc = flush()
        return rc == SQLITE_OK ? super.sync(flags) : rc
    }

    override func truncate(_ size: Int64) -> Int32 {
        let rc = flush()
        return rc == SQLITE_OK ? super.truncate(size) : rc
    }

    override func fileSize(_ size: inout Int64) -> Int32 {
        let rc = flush()
        return rc == SQLITE_OK ? super.fileSize(&size) : rc
    }

    override func fileControl(_ op: Int32, _ argument: UnsafeMutableRawPointer?) -> Int32 {
        _ = flush()
        // Safety: `argument` is SQLite's, valid for the call, forwarded unchanged.
        return unsafe super.fileControl(op, argument)
    }

    private func refuse(_ code: Int32, _ what: String, _ count: Int, _ offset: Int64) -> Int32 {
        cipher.fail(
            CipherFailure(
                code,
                E3DBError(
                    .invalidLength, "\(what) that is not a WAL header or frame was refused",
                    context: .init(part: "wal", actual: count, offset: Int(offset)))))
    }

    // Safety: SQLite lends `buffer` for the call. A page goes to `writeFrame` or `encryptAndWrite` only when
    // `buffer.count == pageSize`; a held-back frame header is copied into an array (exactly `frameHeaderSize` bytes);
    // the WAL header is read at offset 8 only when `buffer.count == headerSize` (32). Everything else is refused or
    // forwarded with its own count.
    override func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        let codec: PageCodec
        switch cipher.resolvedCodec() {
        case .success(let resolved): codec = resolved
        case .failure(let failure): return cipher.fail(failure)
        }
        let pageSize = codec.settings.pageSize
        let frameSize = Int64(pageSize + Self.frameHeaderSize)
        if let pending = pendingHeader, buffer.count == pageSize, offset == pending.offset + Int64(Self.frameHeaderSize)
        {
            pendingHeader = nil
            return unsafe writeFrame(header: pending.bytes, page: buffer, at: pending.offset, codec: codec)
        }
        let rc = flush()
        guard rc == SQLITE_OK else { return rc }
        if buffer.count == Self.frameHeaderSize, isFrameStart(offset, frameSize: frameSize) {
            pendingHeader = unsafe (offset, Array(buffer))
            return SQLITE_OK
        }
        if buffer.count == pageSize, isFrameStart(offset - Int64(Self.frameHeaderSize), frameSize: frameSize) {
            // A page rewritten in place within the open transaction; SQLite rewrites the checksums before commit.
            guard let number = frameNumber(at: offset - Int64(Self.frameHeaderSize)) else {
                return cipher.fail(
                    CipherFailure(SQLITE_IOERR_WRITE, E3DBError(.databaseError, "a WAL frame header could not be read"))
                )
            }
            if let failure = unsafe Self.checkPageOne(buffer, number: number, codec: codec) {
                return cipher.fail(failure)
            }
            return unsafe raw.encryptAndWrite(
                buffer, number: number, codec: codec, to: self, at: offset, cipher: cipher)
        }
        if offset == 0, buffer.count == Int(Self.headerSize) {
            // The WAL header: magic, version, page size, checkpoint sequence, salts, its own checksum.
            guard unsafe Int(bigEndian32(buffer, 8)) == (pageSize == 65536 ? 1 : pageSize) else {
                return refuse(SQLITE_IOERR_WRITE, "a WAL header of another page size", buffer.count, offset)
            }
            return unsafe writeRaw(buffer, at: offset)
        }
        return refuse(SQLITE_IOERR_WRITE, "a write", buffer.count, offset)
    }

    // Safety: callers pass a whole page (`count == pageSize`, checked before the call), what `checkHeader` reads
    // (offsets up to 20).
    /// A WAL page 1 must keep the cipher's page size and reserve, as the database file's does (a backup from a
    /// database without the reserve would otherwise lose the last bytes of every page).
    static func checkPageOne(_ page: UnsafeRawBufferPointer, number: UInt32, codec: PageCodec) -> CipherFailure? {
        guard number == 1 else { return nil }
        do throws(E3DBError) {
            try unsafe MainDatabaseFile.checkHeader(page, settings: codec.settings)
            return nil
        } catch {
            return CipherFailure(SQLITE_IOERR_WRITE, error)
        }
    }

    // Safety: as for `flush`: `frame` is `pageSize + frameHeaderSize` bytes lent by `raw.withBytes` inside the closure
    // only, `header` is a held-back write of exactly `frameHeaderSize` bytes, and `page` was checked by the caller to
    // be `pageSize` bytes (`encrypt` checks it and the output room again).
    /// Encrypts `page` and writes header and ciphertext as one frame, with checksums over the ciphertext.
    private func writeFrame(header: [UInt8], page: UnsafeRawBufferPointer, at offset: Int64, codec: PageCodec) -> Int32
    {
        let pageSize = codec.settings.pageSize
        return unsafe raw.withBytes(pageSize + Self.frameHeaderSize) { frame in
            unsafe header.withUnsafeBytes {
                unsafe UnsafeMutableRawBufferPointer(rebasing: frame[0..<Self.frameHeaderSize]).copyMemory(from: $0)
            }
            let number = unsafe bigEndian32(UnsafeRawBufferPointer(frame))
            if let failure = unsafe Self.checkPageOne(page, number: number, codec: codec) {
                return cipher.fail(failure)
            }
            do throws(E3DBError) {
                try unsafe codec.encrypt(
                    page: page, number: number,
                    into: UnsafeMutableRawBufferPointer(rebasing: frame[Self.frameHeaderSize...]))
            } catch {
                return cipher.fail(CipherFailure(SQLITE_IOERR_WRITE, error))
            }
            return unsafe writeChecksummed(frame, at: offset, pageSize: pageSize, headerOnly: false)
        }
    }

    // Safety: `frame` is a whole frame buffer (`pageSize + frameHeaderSize` bytes) lent by the caller's
    // `raw.withBytes`; the checksum words go to header offsets 16 and 20. `magic` and `previous` are local arrays of 4
    // and 8 bytes, lent for their closures and read at offsets 0 and 4 at most.
    /// Sets the frame's two checksum words over its first 8 header bytes and its ciphertext, chained from the
    /// previous frame's (or the WAL header's) as stored, in the byte order the WAL magic names; writes the frame
    /// (or only its header).
    private func writeChecksummed(
        _ frame: UnsafeMutableRawBufferPointer, at offset: Int64, pageSize: Int, headerOnly: Bool
    ) -> Int32 {
        var magic = [UInt8](repeating: 0, count: 4)
        var previous = [UInt8](repeating: 0, count: 8)
        let previousOffset = offset == Self.headerSize ? 24 : offset - Int64(pageSize + Self.frameHeaderSize) + 16
        let rcMagic = unsafe magic.withUnsafeMutableBytes { unsafe readRaw($0, at: 0) }
        let rcPrevious = unsafe previous.withUnsafeMutableBytes { unsafe readRaw($0, at: previousOffset) }
        guard rcMagic == SQLITE_OK, rcPrevious == SQLITE_OK else {
            return cipher.fail(
                CipherFailure(
                    SQLITE_IOERR_WRITE, E3DBError(.databaseError, "the WAL's previous checksum could not be read")))
        }
        let bigEndianWords = magic[3] & 1 == 1
        var s1 = unsafe previous.withUnsafeBytes { unsafe bigEndian32($0, 0) }
        var s2 = unsafe previous.withUnsafeBytes { unsafe bigEndian32($0, 4) }
        unsafe Self.checksum(UnsafeRawBufferPointer(rebasing: frame[0..<8]), bigEndian: bigEndianWords, &s1, &s2)
        unsafe Self.checksum(
            UnsafeRawBufferPointer(rebasing: frame[Self.frameHeaderSize...]), bigEndian: bigEndianWords, &s1, &s2)
        unsafe putBigEndian32(s1, frame, 16)
        unsafe putBigEndian32(s2, frame, 20)
        let written =
            headerOnly
            ? unsafe UnsafeRawBufferPointer(rebasing: frame[0..<Self.frameHeaderSize]) : UnsafeRawBufferPointer(frame)
        return unsafe writeRaw(written, at: offset)
    }

    // Safety: a pair of words is read at `index` only while `index + 8 <= bytes.count`; `bytes` is the caller's, lent
    // for the call.
    /// SQLite's WAL checksum (`walChecksumBytes`): pairs of 32-bit words, in the byte order the WAL magic names.
    static func checksum(_ bytes: UnsafeRawBufferPointer, bigEndian: Bool, _ s1: inout UInt32, _ s2: inout UInt32) {
        var index = 0
        while index + 8 <= bytes.count {
            let first: UInt32
            let second: UInt32
            if bigEndian {
                first = unsafe bigEndian32(bytes, index)
                second = unsafe bigEndian32(bytes, index + 4)
            } else {
                first = unsafe bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self).littleEndian
                second = unsafe bytes.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self).littleEndian
            }
            s1 = s1 &+ first &+ s2
            s2 = s2 &+ second &+ s1
            index += 8
        }
    }

    // Safety: `bytes` is a local 4-byte array, lent for each closure; `readRaw` fills exactly its count.
    private func frameNumber(at offset: Int64) -> UInt32? {
        var bytes = [UInt8](repeating: 0, count: 4)
        let rc = unsafe bytes.withUnsafeMutableBytes { unsafe readRaw($0, at: offset) }
        guard rc == SQLITE_OK else { return nil }
        return unsafe bytes.withUnsafeBytes { unsafe bigEndian32($0) }
    }

    // Safety: SQLite lends `buffer` for the call. A page is decrypted into it only when `buffer.count == pageSize`,
    // from `stored`, lent by `raw.withBytes` for that many bytes inside its closure (`decrypt` checks both sizes). The
    // header words at offsets 0 and 8 are read only when `buffer.count >= 12`; zero-filling and `readRaw` use
    // `buffer`'s own count.
    override func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        let rc = flush()
        guard rc == SQLITE_OK else { return rc }
        let codec: PageCodec
        switch cipher.resolvedCodec() {
        case .success(let resolved): codec = resolved
        case .failure(let failure): return cipher.fail(failure)
        }
        let pageSize = codec.settings.pageSize
        let frameSize = Int64(pageSize + Self.frameHeaderSize)
        if buffer.count == pageSize, isFrameStart(offset - Int64(Self.frameHeaderSize), frameSize: frameSize) {
            guard let number = frameNumber(at: offset - Int64(Self.frameHeaderSize)) else { return SQLITE_IOERR_READ }
            // SQLite serves frame F for page P only when the wal-index says aPgno[F] == P: a frame whose own header
            // names another page was put there by an edit of the -shm (the page HMAC only proves the header's page).
            let frame = (offset - Int64(Self.frameHeaderSize) - Self.headerSize) / frameSize + 1
            if let indexed = cipher.main?.walIndexPage(frame: frame), indexed != number {
                unsafe buffer.initializeMemory(as: UInt8.self, repeating: 0)
                return cipher.fail(
                    CipherFailure(
                        SQLITE_IOERR_DATA,
                        E3DBError(
                            .pageTampered,
                            "WAL frame \(frame) of \(cipher.path) holds page \(number), the wal-index says page "
                                + "\(indexed)",
                            context: .init(part: "wal", actual: Int(indexed), offset: Int(offset)))))
            }
            return unsafe raw.withBytes(pageSize) { stored in
                let readRC = unsafe readRaw(stored, at: offset)
                guard readRC == SQLITE_OK else {
                    unsafe buffer.initializeMemory(as: UInt8.self, repeating: 0)
                    return readRC
                }
                do throws(E3DBError) {
                    try unsafe codec.decrypt(page: UnsafeRawBufferPointer(stored), number: number, into: buffer)
                } catch {
                    return cipher.fail(
                        CipherFailure(
                            SQLITE_IOERR_DATA,
                            E3DBError(
                                .pageTampered, "page \(number) in the WAL of \(cipher.path) did not authenticate",
                                context: .init(part: "wal", actual: Int(number), offset: Int(offset)))))
                }
                return SQLITE_OK
            }
        }
        // Ciphertext may be read as it is only inside the WAL header, inside a frame header, or as whole frames.
        let end = offset + Int64(buffer.count)
        let inHeader = offset >= 0 && end <= Self.headerSize
        let inFrameHeader =
            offset >= Self.headerSize
            && (offset - Self.headerSize) % frameSize + Int64(buffer.count) <= Int64(Self.frameHeaderSize)
        let wholeFrames = isFrameStart(offset, frameSize: frameSize) && Int64(buffer.count) % frameSize == 0
        guard inHeader || inFrameHeader || wholeFrames else {
            return refuse(SQLITE_IOERR_READ, "a read", buffer.count, offset)
        }
        let readRC = unsafe readRaw(buffer, at: offset)
        if readRC == SQLITE_OK, offset == 0, buffer.count >= 12 {
            let declared = unsafe Int(bigEndian32(UnsafeRawBufferPointer(buffer), 8))
            if declared != (pageSize == 65536 ? 1 : pageSize),
                unsafe bigEndian32(UnsafeRawBufferPointer(buffer), 0) & 0xffff_fffe == 0x377f_0682
            {
                return cipher.fail(
                    CipherFailure(
                        SQLITE_IOERR_DATA,
                        E3DBError(
                            .pageSizeMismatch,
                            "the WAL of \(cipher.path) declares \(declared)-byte pages, the cipher \(pageSize)",
                            context: .init(part: "wal", expected: pageSize, actual: declared))))
            }
        }
        return readRC
    }
}
