internal import CE3DBSQLite3
internal import E3DBPageCodec
internal import E3DBPrimitives

// Safety: callers guarantee `offset + 4 <= bytes.count`: the 4-byte journal fields are checked to be exactly 4
// bytes, WAL headers 24 or 32 bytes, WAL checksum words are read while `index + 8 <= count`.
/// Big-endian 32-bit helpers for the journal and WAL formats.
@inline(__always) func bigEndian32(_ bytes: UnsafeRawBufferPointer, _ offset: Int = 0) -> UInt32 {
    unsafe UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
        | UInt32(bytes[offset + 3])
}

// Safety: as `bigEndian32`, callers pass `offset + 4 <= bytes.count`: a 4-byte journal field, or the checksum words at
// 16 and 20 of a 24-byte WAL frame header.
@inline(__always) func putBigEndian32(_ value: UInt32, _ bytes: UnsafeMutableRawBufferPointer, _ offset: Int = 0) {
    unsafe bytes[offset] = UInt8(truncatingIfNeeded: value >> 24)
    unsafe bytes[offset + 1] = UInt8(truncatingIfNeeded: value >> 16)
    unsafe bytes[offset + 2] = UInt8(truncatingIfNeeded: value >> 8)
    unsafe bytes[offset + 3] = UInt8(truncatingIfNeeded: value)
}

/// A rollback journal. SQLite writes each record as three calls: the page number (4 bytes), the page (encrypted
/// here with that page number, as SQLCipher and SQLite3 Multiple Ciphers do), and a checksum (4 bytes).
///
/// The chacha20 format keeps SQLite3 Multiple Ciphers' journal instead, so that a hot journal plays back on either
/// side: its record checksum is stored as SQLite computed it, over the plaintext (a 32-bit sum of every 200th byte
/// of the page plus the journal's nonce, readable to whoever holds the file while the journal exists). For the
/// SQLCipher format:
///
/// SQLite's checksum is a 32-bit nonce plus every 200th byte of the page, computed over the plaintext; stored as
/// it is, it would put a plaintext-derived value on disk. This file stores instead the same checksum over the
/// ciphertext (SQLCipher's journal format, so that either implementation can play back the other's hot journal),
/// and when SQLite reads a record back, it answers with the plaintext checksum SQLite expects (a stored checksum
/// that does not match the ciphertext stays a mismatch, so SQLite stops the playback at a torn record as it does for
/// a plain journal). A record page that does not authenticate is an error (`pageTampered`, part `journal`).
final class JournalFile: PassThroughFile {
    let cipher: DatabaseCipher
    private var raw = PageBuffer()
    private var writtenNumber: (offset: Int64, number: UInt32)?
    private var writtenPage: (offset: Int64, plainSum: UInt32, cipherSum: UInt32)?
    private var readNumber: (offset: Int64, number: UInt32)?
    private var readPage: (offset: Int64, plainSum: UInt32, cipherSum: UInt32)?

    init(inner: UnsafeMutablePointer<sqlite3_file>, cipher: DatabaseCipher) {
        self.cipher = cipher
        // Safety: `inner` is the base VFS's file in SQLite's allocation for this file, whose lifetime `PassThroughFile`
        // describes.
        unsafe super.init(inner: inner)
    }

    override func close() -> Int32 {
        raw.release()
        return super.close()
    }

    // Safety: `index` runs down from `count - 200` while positive, so it stays inside `page`.
    /// SQLite's `pager_cksum` without its nonce.
    static func checksumSum(_ page: UnsafeRawBufferPointer) -> UInt32 {
        var sum: UInt32 = 0
        var index = page.count - 200
        while index > 0 {
            sum &+= UInt32(unsafe page[index])
            index -= 200
        }
        return sum
    }

    private func codec() -> Result<PageCodec, CipherFailure> { cipher.resolvedCodec() }

    // Safety: SQLite lends `buffer` for the call. The 4-byte branch reads and writes exactly 4 bytes (`buffer.count ==
    // 4`, and `stored` is a 4-byte array lent for its closure). A page is encrypted only when `buffer.count ==
    // pageSize`, into `stored`, which `raw.withBytes` lends for `pageSize` bytes inside its closure only; `encrypt`
    // checks both sizes again. Other writes are forwarded with their own count.
    override func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        if buffer.count == 4 {
            if let page = writtenPage, let codec = try? codec().get(),
                page.offset + Int64(codec.settings.pageSize) == offset
            {
                writtenPage = nil
                let value = unsafe bigEndian32(buffer) &- page.plainSum &+ page.cipherSum
                var stored = [UInt8](repeating: 0, count: 4)
                return unsafe stored.withUnsafeMutableBytes { bytes in
                    unsafe putBigEndian32(value, bytes)
                    return unsafe writeRaw(UnsafeRawBufferPointer(bytes), at: offset)
                }
            }
            writtenNumber = unsafe (offset, bigEndian32(buffer))
            return unsafe writeRaw(buffer, at: offset)
        }
        let codec: PageCodec
        switch self.codec() {
        case .success(let resolved): codec = resolved
        case .failure(let failure): return cipher.fail(failure)
        }
        let pageSize = codec.settings.pageSize
        // A record's page is the page-sized write right after its page number. Anything else SQLite writes to a
        // rollback journal is a header (its magic may still be zero: SQLite writes it at the sync), a header field
        // or the super-journal's name, never longer than a page and without page content.
        guard buffer.count == pageSize, let number = writtenNumber, number.offset + 4 == offset else {
            guard buffer.count <= pageSize else {
                return cipher.fail(
                    CipherFailure(
                        SQLITE_IOERR_WRITE,
                        E3DBError(
                            .invalidLength, "a journal write longer than a page was refused",
                            context: .init(
                                part: "journal", expected: pageSize, actual: buffer.count, offset: Int(offset)))))
            }
            writtenNumber = nil
            return unsafe writeRaw(buffer, at: offset)
        }
        return unsafe raw.withBytes(pageSize) { stored in
            do throws(E3DBError) {
                try unsafe codec.encrypt(page: buffer, number: number.number, into: stored)
            } catch {
                return cipher.fail(CipherFailure(SQLITE_IOERR_WRITE, error))
            }
            let plainSum = unsafe Self.checksumSum(buffer)
            let storedSum =
                codec.journalChecksumOverCiphertext
                ? unsafe Self.checksumSum(UnsafeRawBufferPointer(stored)) : plainSum
            writtenPage = (offset, plainSum, storedSum)
            writtenNumber = nil
            return unsafe writeRaw(UnsafeRawBufferPointer(stored), at: offset)
        }
    }

    // Safety: SQLite lends `buffer` for the call. The 4-byte branch reads and rewrites exactly those 4 bytes. A page is
    // decrypted only when `buffer.count == pageSize`, from `stored`, lent by `raw.withBytes` for that many bytes inside
    // its closure; `decrypt` checks both sizes again. Zero-filling and `readRaw` use `buffer`'s own count.
    override func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        if buffer.count == 4 {
            let rc = unsafe readRaw(buffer, at: offset)
            guard rc == SQLITE_OK else { return rc }
            if let page = readPage, let codec = try? codec().get(),
                page.offset + Int64(codec.settings.pageSize) == offset
            {
                readPage = nil
                let value = unsafe bigEndian32(UnsafeRawBufferPointer(buffer)) &- page.cipherSum &+ page.plainSum
                unsafe putBigEndian32(value, buffer)
            } else {
                readNumber = unsafe (offset, bigEndian32(UnsafeRawBufferPointer(buffer)))
            }
            return SQLITE_OK
        }
        guard let number = readNumber, number.offset + 4 == offset, let codec = try? codec().get() else {
            return unsafe readRaw(buffer, at: offset)
        }
        let pageSize = codec.settings.pageSize
        guard buffer.count == pageSize else {
            // A record of another page size (SQLite takes it from the journal header): never played back as raw
            // bytes. Other reads after a 4-byte field (the super-journal name's checksum and magic) are short.
            guard buffer.count >= 512, buffer.count & (buffer.count - 1) == 0 else {
                return unsafe readRaw(buffer, at: offset)
            }
            unsafe buffer.initializeMemory(as: UInt8.self, repeating: 0)
            return cipher.fail(
                CipherFailure(
                    SQLITE_IOERR_DATA,
                    E3DBError(
                        .pageSizeMismatch,
                        "the journal of \(cipher.path) holds \(buffer.count)-byte pages, the cipher \(pageSize)",
                        context: .init(part: "journal", expected: pageSize, actual: buffer.count, offset: Int(offset)))
                ))
        }
        readNumber = nil
        return unsafe raw.withBytes(buffer.count) { stored in
            let rc = unsafe readRaw(stored, at: offset)
            guard rc == SQLITE_OK else {
                unsafe buffer.initializeMemory(as: UInt8.self, repeating: 0)
                return rc
            }
            do throws(E3DBError) {
                try unsafe codec.decrypt(page: UnsafeRawBufferPointer(stored), number: number.number, into: buffer)
            } catch {
                // Never zeros in its place: a savepoint rollback does not check the record checksum and would write
                // them.
                return cipher.fail(
                    CipherFailure(
                        SQLITE_IOERR_DATA,
                        E3DBError(
                            .pageTampered,
                            "page \(number.number) in the journal of \(cipher.path) did not authenticate",
                            context: .init(part: "journal", actual: Int(number.number), offset: Int(offset)))))
            }
            let plainSum = unsafe Self.checksumSum(UnsafeRawBufferPointer(buffer))
            let storedSum =
                codec.journalChecksumOverCiphertext
                ? unsafe Self.checksumSum(UnsafeRawBufferPointer(stored)) : plainSum
            readPage = (offset, plainSum, storedSum)
            return SQLITE_OK
        }
    }
}
