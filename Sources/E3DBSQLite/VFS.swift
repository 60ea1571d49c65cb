internal import CE3DBSQLite3
internal import E3DBPrimitives

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

// Safety: ownership and lifetimes across the C boundary, and the four process-wide registries.
//
// Memory handed to SQLite, allocated once and never freed (SQLite keeps pointers to it for the process's life):
// the `sqlite3_vfs` struct, its `zName` (a `strdup`) and the two `sqlite3_io_methods` tables. `register()` fills
// them once per process (it runs inside the one-time initialisation of `registration`, a `static let`), before
// `sqlite3_vfs_register` makes them reachable; the VFS is never unregistered. `CipherVFS.base`, the wrapped
// default VFS, is SQLite's; it is written in that same one-time initialisation, before any file can be opened
// through this VFS, and only read afterwards (hence `nonisolated(unsafe)`).
//
// Per open file: SQLite allocates `szOsFile` bytes, the C shim's `E3DBSQLiteFile` header followed by the base VFS's
// own `sqlite3_file` (`inner`). A successful `xOpen` stores one retained reference (`Unmanaged.passRetained`) to the
// Swift `VFSFile` in the header and only then sets `pMethods`; `xClose` releases it and clears `state` and
// `pMethods`. A failed open leaves `pMethods` nil, so SQLite calls no method on it. SQLite calls no method of a
// file after `xClose`, so `CipherVFS.object`, which reads the reference without retaining it, always finds it
// alive; `inner` lives in the same allocation for the same span, and the `PassThroughFile` that holds it is
// released by that `xClose`. Buffers SQLite passes to `xRead`, `xWrite` and `xFileControl` are valid for the call
// only and never kept.
//
// Process-wide registries, each behind a `Mutex`, holding Swift references or values, never pointers:
// 1. `DatabaseCipher.open`: address of a main database's filename pointer -> its `DatabaseCipher`. Added by
//    `DatabaseCipher.init` in `xOpen`, removed by `DatabaseCipher.close()` (the main file's `xClose`, or `discard()`
//    when the base open failed). The address is only a key, never dereferenced: SQLite keeps a main database's
//    filename allocated while the file is open, and its journal and WAL find the entry through
//    `sqlite3_filename_database`, which returns that same pointer; the entry is gone before SQLite frees it.
// 2. `DatabaseCipher.connectionMains`: `sqlite3*` address -> the cipher of that connection's main database. Added by
//    the first `SQLITE_FCNTL_PDB` a connection sends (its main database), removed when that file closes, which
//    closing the connection does before its memory can be reused. Attached databases and `VACUUM INTO` targets
//    borrow their connection's key through it.
// 3. `KeyRegistry.shared`: random URI handle (`e3db_key=`) -> key and settings. Added by `E3DBSQLite.uri`,
//    `restoreKey`, `SQLiteConnection.init` and the operations in `Operations.swift`; removed by `forgetKey(inURI:)`,
//    by `SQLiteConnection` when it closes, by the operations when they return, and by `forgetAllKeys()`, which
//    removes the keys the app registered through the public `uri(forDatabaseAt:key:settings:)` only (each entry
//    has a `KeyOwner`; an `EncryptedStore`'s keys are this package's and stay). A `DatabaseCipher` takes
//    its key at open, so removing a handle stops new opens only.
// 4. `FailureLog`: the last typed failure (an `E3DBError`, no key material) by canonical path and by connection
//    address, so that the bare `Int32` SQLite returns can be explained afterwards. `SQLiteConnection` and the
//    operations clear their entries before they read them; other entries stay until overwritten, one small value
//    per path or connection address.
// Threads: SQLite calls one connection, and so its files, from one thread at a time; that is why `DatabaseCipher`
// can be `@unchecked Sendable` and the `VFSFile` objects unsynchronised. What connections share lives only in
// these registries and in `PageCodecCache.shared`, each under its own lock.

/// The registered `sqlite3_vfs` and the two method tables of its files.
///
/// The VFS wraps the process's default VFS ("unix" on Linux and Apple platforms). Each file SQLite opens through it
/// is an `E3DBSQLiteFile` (see the C shim): the wrapper's own header, then the underlying VFS's file. Which Swift
/// object handles a file depends on what SQLite opens it as:
/// - a main database: ``MainDatabaseFile`` (pages encrypted and authenticated, SQLCipher 4's layout);
/// - its rollback journal: ``JournalFile``; its WAL: ``WALFile`` (page bodies encrypted, checksums over ciphertext);
/// - temporary databases, temporary journals, statement journals and VACUUM's transient database: ``MemoryFile``,
///   in wiped process memory, never on disk;
/// - a super-journal (file names only): ``PassThroughFile``.
///
/// The method table is version 2: SQLite then never memory-maps a file, whatever `PRAGMA mmap_size` says, so it
/// can never see ciphertext as pages.
enum CipherVFS {
    static let name = "e3dbkit-sqlcipher"

    /// Registers the VFS once per process (not as the default).
    static let registration: Result<Void, E3DBError> = register()

    // Written once, under registration's one-time initialisation, before any file is opened; read-only after.
    nonisolated(unsafe) static var base: UnsafeMutablePointer<sqlite3_vfs>?
    /// The two method tables, allocated once and never freed (SQLite keeps pointers to them).
    nonisolated(unsafe) static let wrapperMethods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
    nonisolated(unsafe) static let memoryMethods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)

    // Safety: runs once, inside `registration`'s one-time initialisation (the note at the top of this file). `vfs`, its
    // `zName` and the method tables are allocated here, never freed, and fully initialised before
    // `sqlite3_vfs_register` makes them reachable. Every forwarding closure passes SQLite's own arguments, valid for
    // the call, unchanged to the same method of `base`, SQLite's default VFS, which lives as long as the process; a
    // method the base VFS lacks answers an error instead of calling through nil.
    private static func register() -> Result<Void, E3DBError> {
        guard sqlite3_initialize() == SQLITE_OK, let base = unsafe sqlite3_vfs_find(nil) else {
            return .failure(E3DBError(.databaseError, "SQLite has no default VFS to wrap"))
        }
        if unsafe sqlite3_vfs_find(name) != nil { return .success(()) }
        unsafe Self.base = base
        fillWrapperMethods()
        fillMemoryMethods()
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        unsafe vfs.initialize(to: sqlite3_vfs())
        unsafe vfs.pointee.iVersion = 2
        unsafe vfs.pointee.szOsFile = e3db_sqlite_file_header_size() + base.pointee.szOsFile
        unsafe vfs.pointee.mxPathname = base.pointee.mxPathname
        unsafe vfs.pointee.zName = UnsafePointer(strdup(name))
        unsafe vfs.pointee.pAppData = UnsafeMutableRawPointer(base)
        unsafe vfs.pointee.xOpen = { vfs, name, file, flags, outFlags in
            unsafe CipherVFS.open(name: name, file: file, flags: flags, outFlags: outFlags)
        }
        unsafe vfs.pointee.xDelete = { _, name, syncDir in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xDelete else { return SQLITE_ERROR }
            return unsafe call(base, name, syncDir)
        }
        unsafe vfs.pointee.xAccess = { _, name, flags, out in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xAccess else { return SQLITE_ERROR }
            return unsafe call(base, name, flags, out)
        }
        unsafe vfs.pointee.xFullPathname = { _, name, count, out in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xFullPathname else {
                return SQLITE_ERROR
            }
            return unsafe call(base, name, count, out)
        }
        unsafe vfs.pointee.xDlOpen = { _, name in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xDlOpen else { return nil }
            return unsafe call(base, name)
        }
        unsafe vfs.pointee.xDlError = { _, count, out in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xDlError else { return }
            unsafe call(base, count, out)
        }
        unsafe vfs.pointee.xDlSym = { _, handle, symbol in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xDlSym else { return nil }
            return unsafe call(base, handle, symbol)
        }
        unsafe vfs.pointee.xDlClose = { _, handle in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xDlClose else { return }
            unsafe call(base, handle)
        }
        unsafe vfs.pointee.xRandomness = { _, count, out in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xRandomness else { return 0 }
            return unsafe call(base, count, out)
        }
        unsafe vfs.pointee.xSleep = { _, microseconds in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xSleep else { return 0 }
            return unsafe call(base, microseconds)
        }
        unsafe vfs.pointee.xCurrentTime = { _, out in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xCurrentTime else {
                return SQLITE_ERROR
            }
            return unsafe call(base, out)
        }
        unsafe vfs.pointee.xGetLastError = { _, count, out in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xGetLastError else { return 0 }
            return unsafe call(base, count, out)
        }
        unsafe vfs.pointee.xCurrentTimeInt64 = { _, out in
            guard let base = unsafe CipherVFS.base, let call = unsafe base.pointee.xCurrentTimeInt64 else {
                return SQLITE_ERROR
            }
            return unsafe call(base, out)
        }
        let rc = unsafe sqlite3_vfs_register(vfs, 0)
        guard rc == SQLITE_OK else {
            return .failure(E3DBError(.databaseError, "sqlite3_vfs_register failed", context: .init(actual: Int(rc))))
        }
        return .success(())
    }

    // Safety: `file` is SQLite's `szOsFile`-byte allocation for this file: the `E3DBSQLiteFile` header, then the
    // base VFS's `sqlite3_file` at `e3db_sqlite_file_header_size()`, which is `inner` (see the note at the top of
    // this file). `name` is SQLite's and outlives the open file; `DatabaseCipher` copies what it keeps of it.
    /// `xOpen`: picks the file class by what SQLite opens.
    private static func open(
        name: sqlite3_filename?, file: UnsafeMutablePointer<sqlite3_file>?, flags: Int32,
        outFlags: UnsafeMutablePointer<Int32>?
    ) -> Int32 {
        guard let file = unsafe file, let base = unsafe base else { return SQLITE_CANTOPEN }
        let wrapper = unsafe UnsafeMutableRawPointer(file).assumingMemoryBound(to: E3DBSQLiteFile.self)
        unsafe wrapper.pointee.base.pMethods = nil
        unsafe wrapper.pointee.inner = nil
        unsafe wrapper.pointee.state = nil
        let kind = flags & 0x000F_FF00
        let unnamed = unsafe name == nil
        let temporary =
            kind == SQLITE_OPEN_TEMP_DB || kind == SQLITE_OPEN_TEMP_JOURNAL
            || kind == SQLITE_OPEN_TRANSIENT_DB || kind == SQLITE_OPEN_SUBJOURNAL || unnamed
        if temporary {
            let state = MemoryFile()
            unsafe wrapper.pointee.state = Unmanaged.passRetained(state as VFSFile).toOpaque()
            unsafe wrapper.pointee.base.pMethods = UnsafePointer(memoryMethods)
            if let outFlags = unsafe outFlags { unsafe outFlags.pointee = flags }
            return SQLITE_OK
        }
        // The cipher context the file belongs to: its own for a main database, the main database's for a journal
        // or WAL (SQLite names both after it: sqlite3_filename_database gives the main file's name pointer).
        let state: PassThroughFile
        let inner = unsafe (UnsafeMutableRawPointer(file) + Int(e3db_sqlite_file_header_size()))
            .assumingMemoryBound(to: sqlite3_file.self)
        switch kind {
        case SQLITE_OPEN_MAIN_DB:
            guard let name = unsafe name else { return SQLITE_CANTOPEN }
            let cipher = unsafe DatabaseCipher(filename: name, readOnly: flags & SQLITE_OPEN_READONLY != 0)
            state = unsafe MainDatabaseFile(inner: inner, cipher: cipher)
        case SQLITE_OPEN_MAIN_JOURNAL, SQLITE_OPEN_WAL:
            guard let name = unsafe name, let database = unsafe sqlite3_filename_database(name),
                let cipher = unsafe DatabaseCipher.open(filename: database)
            else {
                // Never a journal or WAL whose pages could not be encrypted.
                return SQLITE_CANTOPEN
            }
            state =
                kind == SQLITE_OPEN_WAL
                ? unsafe WALFile(inner: inner, cipher: cipher) : unsafe JournalFile(inner: inner, cipher: cipher)
        default:
            // A super-journal holds the names of the journals of a multi-database commit, no page content.
            state = unsafe PassThroughFile(inner: inner)
        }
        guard let open = unsafe base.pointee.xOpen else { return SQLITE_CANTOPEN }
        let rc = unsafe open(base, name, inner, flags, outFlags)
        guard rc == SQLITE_OK else {
            state.discard()
            return rc
        }
        unsafe wrapper.pointee.inner = inner
        unsafe wrapper.pointee.state = Unmanaged.passRetained(state as VFSFile).toOpaque()
        unsafe wrapper.pointee.base.pMethods = UnsafePointer(wrapperMethods)
        return SQLITE_OK
    }

    // Safety: `state` holds the retained reference `open` stored, released only by `close`, after which SQLite
    // calls nothing on the file (the note at the top of this file); taking it unretained here is therefore valid.
    /// The Swift object behind an `sqlite3_file` of this VFS.
    @inline(__always)
    static func object(_ file: UnsafeMutablePointer<sqlite3_file>?) -> VFSFile? {
        guard let file = unsafe file else { return nil }
        let wrapper = unsafe UnsafeMutableRawPointer(file).assumingMemoryBound(to: E3DBSQLiteFile.self)
        guard let state = unsafe wrapper.pointee.state else { return nil }
        return unsafe Unmanaged<VFSFile>.fromOpaque(state).takeUnretainedValue()
    }

    // Safety: `file` is SQLite's allocation for an open file of this VFS; `state` holds the one reference `open`
    // retained. It is released exactly once, here, and `state` and `pMethods` are cleared before returning, so
    // `object(_:)` can never find a released object (SQLite calls nothing on a closed file anyway).
    private static func close(_ file: UnsafeMutablePointer<sqlite3_file>?) -> Int32 {
        guard let file = unsafe file else { return SQLITE_OK }
        let wrapper = unsafe UnsafeMutableRawPointer(file).assumingMemoryBound(to: E3DBSQLiteFile.self)
        guard let state = unsafe wrapper.pointee.state else { return SQLITE_OK }
        let object = unsafe Unmanaged<VFSFile>.fromOpaque(state)
        let rc = unsafe object.takeUnretainedValue().close()
        unsafe object.release()
        unsafe wrapper.pointee.state = nil
        unsafe wrapper.pointee.base.pMethods = nil
        return rc
    }

    // Safety: `wrapperMethods` is this type's never-freed allocation, initialised here before registration publishes
    // it. The shared-memory closures hand SQLite's arguments (the out-pointer of `xShmMap` included, valid for the
    // call) to the base file's own method; `object(_:)` finds the file's Swift object as its note explains.
    private static func fillWrapperMethods() {
        unsafe wrapperMethods.initialize(to: sqlite3_io_methods())
        unsafe wrapperMethods.pointee.iVersion = 2
        unsafe fillCommonMethods(&wrapperMethods.pointee)
        unsafe wrapperMethods.pointee.xShmMap = { file, region, size, extend, out in
            guard let object = unsafe CipherVFS.object(file) as? PassThroughFile else { return SQLITE_IOERR }
            return unsafe object.shmMap(region, size, extend, out)
        }
        unsafe wrapperMethods.pointee.xShmLock = { file, offset, count, flags in
            guard let object = unsafe CipherVFS.object(file) as? PassThroughFile else { return SQLITE_IOERR }
            return object.shmLock(offset, count, flags)
        }
        unsafe wrapperMethods.pointee.xShmBarrier = { file in
            guard let object = unsafe CipherVFS.object(file) as? PassThroughFile else { return }
            object.shmBarrier()
        }
        unsafe wrapperMethods.pointee.xShmUnmap = { file, delete in
            guard let object = unsafe CipherVFS.object(file) as? PassThroughFile else { return SQLITE_IOERR }
            return object.shmUnmap(delete)
        }
    }

    // Safety: `memoryMethods` is this type's never-freed allocation, initialised here before registration publishes it.
    private static func fillMemoryMethods() {
        unsafe memoryMethods.initialize(to: sqlite3_io_methods())
        unsafe memoryMethods.pointee.iVersion = 1
        unsafe fillCommonMethods(&memoryMethods.pointee)
    }

    // Safety: SQLite lends `amount` bytes at `buffer` to `xRead` and `xWrite`, and the out-pointers of `xFileSize`
    // and `xCheckReservedLock`, for the call only; the file objects use them inside it and keep none.
    private static func fillCommonMethods(_ methods: inout sqlite3_io_methods) {
        unsafe methods.xClose = { file in unsafe CipherVFS.close(file) }
        unsafe methods.xRead = { file, buffer, amount, offset in
            guard let object = unsafe CipherVFS.object(file), let buffer = unsafe buffer, amount >= 0 else {
                return SQLITE_IOERR_READ
            }
            return unsafe object.read(UnsafeMutableRawBufferPointer(start: buffer, count: Int(amount)), at: offset)
        }
        unsafe methods.xWrite = { file, buffer, amount, offset in
            guard let object = unsafe CipherVFS.object(file), let buffer = unsafe buffer, amount >= 0 else {
                return SQLITE_IOERR_WRITE
            }
            return unsafe object.write(UnsafeRawBufferPointer(start: buffer, count: Int(amount)), at: offset)
        }
        unsafe methods.xTruncate = { file, size in
            guard let object = unsafe CipherVFS.object(file) else { return SQLITE_IOERR_TRUNCATE }
            return object.truncate(size)
        }
        unsafe methods.xSync = { file, flags in
            guard let object = unsafe CipherVFS.object(file) else { return SQLITE_IOERR_FSYNC }
            return object.sync(flags)
        }
        unsafe methods.xFileSize = { file, out in
            guard let object = unsafe CipherVFS.object(file), let out = unsafe out else { return SQLITE_IOERR_FSTAT }
            var size: sqlite3_int64 = 0
            let rc = object.fileSize(&size)
            unsafe out.pointee = size
            return rc
        }
        unsafe methods.xLock = { file, level in
            guard let object = unsafe CipherVFS.object(file) else { return SQLITE_IOERR_LOCK }
            return object.lock(level)
        }
        unsafe methods.xUnlock = { file, level in
            guard let object = unsafe CipherVFS.object(file) else { return SQLITE_IOERR_UNLOCK }
            return object.unlock(level)
        }
        unsafe methods.xCheckReservedLock = { file, out in
            guard let object = unsafe CipherVFS.object(file), let out = unsafe out else {
                return SQLITE_IOERR_CHECKRESERVEDLOCK
            }
            var reserved: Int32 = 0
            let rc = object.checkReservedLock(&reserved)
            unsafe out.pointee = reserved
            return rc
        }
        unsafe methods.xFileControl = { file, op, argument in
            guard let object = unsafe CipherVFS.object(file) else { return SQLITE_NOTFOUND }
            return unsafe object.fileControl(op, argument)
        }
        unsafe methods.xSectorSize = { file in
            guard let object = unsafe CipherVFS.object(file) else { return 4096 }
            return object.sectorSize()
        }
        unsafe methods.xDeviceCharacteristics = { file in
            guard let object = unsafe CipherVFS.object(file) else { return 0 }
            return object.deviceCharacteristics()
        }
    }
}

/// A file of the VFS. Subclasses override what they transform; SQLite calls one file from one thread at a time.
class VFSFile {
    func close() -> Int32 { SQLITE_OK }
    func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 { SQLITE_IOERR_READ }
    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 { SQLITE_IOERR_WRITE }
    func truncate(_ size: Int64) -> Int32 { SQLITE_IOERR_TRUNCATE }
    func sync(_ flags: Int32) -> Int32 { SQLITE_OK }
    func fileSize(_ size: inout Int64) -> Int32 { SQLITE_IOERR_FSTAT }
    func lock(_ level: Int32) -> Int32 { SQLITE_OK }
    func unlock(_ level: Int32) -> Int32 { SQLITE_OK }
    func checkReservedLock(_ reserved: inout Int32) -> Int32 {
        reserved = 0
        return SQLITE_OK
    }
    func fileControl(_ op: Int32, _ argument: UnsafeMutableRawPointer?) -> Int32 { SQLITE_NOTFOUND }
    func sectorSize() -> Int32 { 4096 }
    func deviceCharacteristics() -> Int32 { 0 }
}

// Safety: (`@safe`) `inner` is the base VFS's file inside SQLite's allocation for this file, valid from the
// successful `xOpen` that made this object to the `xClose` that releases it, and only passed back to the base
// VFS's own methods (whose table SQLite keeps alive). Buffers are forwarded with their own counts.
/// Forwards every call to the underlying VFS's file.
@safe class PassThroughFile: VFSFile {
    let inner: UnsafeMutablePointer<sqlite3_file>

    init(inner: UnsafeMutablePointer<sqlite3_file>) {
        unsafe self.inner = inner
    }

    /// Called when the underlying open failed: nothing to close.
    func discard() {}

    var methods: sqlite3_io_methods { unsafe inner.pointee.pMethods.pointee }

    override func close() -> Int32 {
        guard let call = unsafe methods.xClose else { return SQLITE_OK }
        return unsafe call(inner)
    }

    /// Reads raw bytes from the underlying file; a short read is zero-filled and answered
    /// `SQLITE_IOERR_SHORT_READ`, as the VFS contract says.
    final func readRaw(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        guard let call = unsafe methods.xRead, let base = buffer.baseAddress else { return SQLITE_IOERR_READ }
        return unsafe call(inner, base, Int32(buffer.count), offset)
    }

    final func writeRaw(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        guard let call = unsafe methods.xWrite, let base = buffer.baseAddress else { return SQLITE_IOERR_WRITE }
        return unsafe call(inner, base, Int32(buffer.count), offset)
    }

    override func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        unsafe readRaw(buffer, at: offset)
    }

    override func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        unsafe writeRaw(buffer, at: offset)
    }

    override func truncate(_ size: Int64) -> Int32 {
        guard let call = unsafe methods.xTruncate else { return SQLITE_IOERR_TRUNCATE }
        return unsafe call(inner, size)
    }

    override func sync(_ flags: Int32) -> Int32 {
        guard let call = unsafe methods.xSync else { return SQLITE_IOERR_FSYNC }
        return unsafe call(inner, flags)
    }

    override func fileSize(_ size: inout Int64) -> Int32 {
        guard let call = unsafe methods.xFileSize else { return SQLITE_IOERR_FSTAT }
        return unsafe call(inner, &size)
    }

    override func lock(_ level: Int32) -> Int32 {
        guard let call = unsafe methods.xLock else { return SQLITE_IOERR_LOCK }
        return unsafe call(inner, level)
    }

    override func unlock(_ level: Int32) -> Int32 {
        guard let call = unsafe methods.xUnlock else { return SQLITE_IOERR_UNLOCK }
        return unsafe call(inner, level)
    }

    override func checkReservedLock(_ reserved: inout Int32) -> Int32 {
        guard let call = unsafe methods.xCheckReservedLock else { return SQLITE_IOERR_CHECKRESERVEDLOCK }
        return unsafe call(inner, &reserved)
    }

    override func fileControl(_ op: Int32, _ argument: UnsafeMutableRawPointer?) -> Int32 {
        // Memory mapping stays off: the method table is version 2, and the size hint is not forwarded either.
        if op == SQLITE_FCNTL_MMAP_SIZE { return SQLITE_NOTFOUND }
        guard let call = unsafe methods.xFileControl else { return SQLITE_NOTFOUND }
        return unsafe call(inner, op, argument)
    }

    override func sectorSize() -> Int32 {
        guard let call = unsafe methods.xSectorSize else { return 4096 }
        return unsafe call(inner)
    }

    override func deviceCharacteristics() -> Int32 {
        guard let call = unsafe methods.xDeviceCharacteristics else { return SQLITE_IOCAP_POWERSAFE_OVERWRITE }
        // An allow-list: atomic, batch-atomic, safe-append and sequential writes would change how SQLite writes the
        // journal and WAL (skipping the journal, spilling it in chunks, records of unknown length), which this VFS
        // classifies. Power-safe overwrite is always declared: SQLite then never pads the WAL to a sector boundary
        // by splitting a frame (`psow=0` is not honoured); every write here is a whole page or frame anyway.
        let kept = SQLITE_IOCAP_UNDELETABLE_WHEN_OPEN | SQLITE_IOCAP_IMMUTABLE
        return (unsafe call(inner) & kept) | SQLITE_IOCAP_POWERSAFE_OVERWRITE
    }

    func shmMap(_ region: Int32, _ size: Int32, _ extend: Int32, _ out: UnsafeMutablePointer<UnsafeMutableRawPointer?>?)
        -> Int32
    {
        guard let call = unsafe methods.xShmMap else { return SQLITE_IOERR_SHMMAP }
        return unsafe call(inner, region, size, extend, out)
    }

    func shmLock(_ offset: Int32, _ count: Int32, _ flags: Int32) -> Int32 {
        guard let call = unsafe methods.xShmLock else { return SQLITE_IOERR_SHMLOCK }
        return unsafe call(inner, offset, count, flags)
    }

    func shmBarrier() {
        guard let call = unsafe methods.xShmBarrier else { return }
        unsafe call(inner)
    }

    func shmUnmap(_ delete: Int32) -> Int32 {
        guard let call = unsafe methods.xShmUnmap else { return SQLITE_OK }
        return unsafe call(inner, delete)
    }
}
