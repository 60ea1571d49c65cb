internal import CE3DBSQLite3
internal import E3DBPrimitives

/// A temporary file (temporary database, its journal, a statement journal, VACUUM's transient copy) kept in
/// process memory, in wiped chunks: never on disk, so nothing to encrypt. Its size is the data's size, which is
/// what `temp_store = MEMORY` would cost too.
final class MemoryFile: VFSFile {
    private static let chunkSize = 65536
    private var chunks: [WipedBuffer] = []
    private var size: Int64 = 0

    override func close() -> Int32 {
        chunks = []
        return SQLITE_OK
    }

    // Safety: (read and write) SQLite lends `buffer` for the call; each turn copies `count <= buffer.count - done`
    // bytes, at most to the end of one chunk (`within + count <= chunkSize`), and the chunks cover `size` (write
    // appends them first; truncate keeps every chunk below `size`). `withUnsafe(Mutable)Bytes(in:)` checks its range.
    override func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        var done = 0
        while done < buffer.count {
            let position = offset + Int64(done)
            guard position < size else {
                unsafe UnsafeMutableRawBufferPointer(rebasing: buffer[done...]).initializeMemory(
                    as: UInt8.self, repeating: 0)
                return SQLITE_IOERR_SHORT_READ
            }
            let chunk = Int(position / Int64(Self.chunkSize))
            let within = Int(position % Int64(Self.chunkSize))
            let count = min(Self.chunkSize - within, buffer.count - done, Int(size - position))
            unsafe chunks[chunk].withUnsafeBytes(in: within..<(within + count)) { source in
                unsafe UnsafeMutableRawBufferPointer(rebasing: buffer[done..<(done + count)]).copyMemory(from: source)
            }
            done += count
        }
        return SQLITE_OK
    }

    // Safety: as for `read`: chunks are appended until they cover `end` first, then each turn copies `count <=
    // buffer.count - done` bytes into one chunk (`within + count <= chunkSize`), through a range
    // `withUnsafeMutableBytes(in:)` checks.
    override func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        let end = offset + Int64(buffer.count)
        while Int64(chunks.count * Self.chunkSize) < end {
            chunks.append(WipedBuffer(count: Self.chunkSize))
        }
        var done = 0
        while done < buffer.count {
            let position = offset + Int64(done)
            let chunk = Int(position / Int64(Self.chunkSize))
            let within = Int(position % Int64(Self.chunkSize))
            let count = min(Self.chunkSize - within, buffer.count - done)
            unsafe chunks[chunk].withUnsafeMutableBytes(in: within..<(within + count)) { target in
                unsafe target.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[done..<(done + count)]))
            }
            done += count
        }
        size = max(size, end)
        return SQLITE_OK
    }

    override func truncate(_ newSize: Int64) -> Int32 {
        guard newSize < size else { return SQLITE_OK }
        size = max(newSize, 0)
        let keep = Int((size + Int64(Self.chunkSize) - 1) / Int64(Self.chunkSize))
        if keep < chunks.count { chunks.removeLast(chunks.count - keep) }
        // Zero the tail of the last kept chunk, so a later extension reads zeros.
        if keep > 0 {
            let within = Int(size - Int64(keep - 1) * Int64(Self.chunkSize))
            chunks[keep - 1].wipe(within..<Self.chunkSize)
        }
        return SQLITE_OK
    }

    override func fileSize(_ out: inout Int64) -> Int32 {
        out = size
        return SQLITE_OK
    }
}
