import E3DBPrimitives
import E3DBTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How many SIGUSR1 signals the handler of `interruptedReadsAreRetried` has taken.
private let signalsTaken = Atomic<Int>(0)

/// The package's one atomic writer, descriptor helper and directory sync (`AtomicFile`, `FileIO`).
@Suite("E3DBPrimitives: AtomicFile, FileIO and syncDirectory")
struct FilePlumbingTests {
    /// A fresh directory (removed by the caller) holding `name` with the bytes `old`, and that file's URL.
    static func directory(holding name: String) throws -> (URL, URL) {
        let dir = try CLIRunner.temporaryDirectory()
        let target = dir.appendingPathComponent(name)
        try Data("old".utf8).write(to: target)
        return (dir, target)
    }

    static func names(_ directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    /// The device and inode `fd` refers to now; nil when it is not open.
    static func identity(_ fd: Int32) -> (dev_t, ino_t)? {
        var st = stat()
        // Safety: `fstat` writes into the local `st`, for the call only.
        guard unsafe fstat(fd, &st) == 0 else { return nil }
        return (st.st_dev, st.st_ino)
    }

    /// Opens `path` and returns its descriptor's number and a task that reads it a moment later: the task is its
    /// only holder once this returns.
    static func reader(of path: String) throws -> (Int32, Task<Data, any Error>) {
        let file = try OwnedDescriptor(opening: path, flags: O_RDONLY)
        let reader = Task { [file] () -> Data in
            try await Task.sleep(for: .milliseconds(50))
            var bytes = [UInt8](repeating: 0, count: 16)
            let n = try unsafe bytes.withUnsafeMutableBytes { try unsafe FileIO.read(file.fd, into: $0, at: 0) }
            return Data(bytes[..<n])
        }
        return (file.fd, reader)
    }

    @Test("an OwnedDescriptor keeps its file open while any holder has it, and closes it when the last one goes")
    func ownedDescriptorLivesWithItsHolders() async throws {
        let (dir, target) = try Self.directory(holding: "body")
        defer { try? FileManager.default.removeItem(at: dir) }
        // A reader elsewhere (as an HTTP client's body task) holds it after its opener returned.
        let fd: Int32
        let file: (dev_t, ino_t)
        do {
            let (number, reader) = try Self.reader(of: target.path)
            fd = number
            file = try #require(Self.identity(fd), "still open while the reader holds it")
            #expect(try await reader.value == Data("old".utf8))
        }
        // Closed once its last holder (the finished task) is gone: the number is then closed, or names another file
        // (another suite's open).
        let deadline = ContinuousClock.now + .seconds(5)
        while Self.identity(fd).map({ $0 == file }) == true && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(Self.identity(fd).map { $0 == file } != true)
        #expect(throws: FileIOError.self) {
            try OwnedDescriptor(opening: dir.appendingPathComponent("none").path, flags: O_RDONLY)
        }
    }

    @Test("a committed file replaces the old one whole, with exactly the mode asked for, and leaves no temporary")
    func commitReplaces() throws {
        let (dir, target) = try Self.directory(holding: "out")
        defer { try? FileManager.default.removeItem(at: dir) }
        // Write for others: the usual umask (022) would take it away from a plain open(2).
        let file = try AtomicFile(path: target.path, mode: 0o606)
        try Data(repeating: 7, count: 100_000).withUnsafeBytes { try file.write($0) }
        // Until the commit, the old file is what the name shows, and no other name is in the directory on Linux.
        #expect(try Data(contentsOf: target) == Data("old".utf8))
        let temporary = URL(fileURLWithPath: file.temporaryPath).lastPathComponent
        #expect(try Self.names(dir) == (file.isUnnamedUntilCommit ? ["out"] : [temporary, "out"].sorted()))
        try file.commit()
        #expect(try Data(contentsOf: target) == Data(repeating: 7, count: 100_000))
        #expect(try Self.names(dir) == ["out"])
        let mode = try FileManager.default.attributesOfItem(atPath: target.path)[.posixPermissions] as? Int
        #expect(mode == 0o606, "the umask did not narrow the mode")
    }

    @Test("a write that fails halfway leaves the old file intact and no temporary file behind")
    func failedWriteLeavesTheOldFile() throws {
        let (dir, target) = try Self.directory(holding: "keys.json")
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let file = try AtomicFile(path: target.path)
            try Data(repeating: 1, count: 4096).withUnsafeBytes { try file.write($0) }
            // The descriptor now names a read-only file: the next write fails as a full disk or an I/O error would.
            let readOnly = open("/dev/null", O_RDONLY | O_CLOEXEC)
            #expect(readOnly >= 0)
            #expect(dup2(readOnly, file.descriptor) == file.descriptor)
            close(readOnly)
            let failure = #expect(throws: FileIOError.self) {
                try Data(repeating: 2, count: 4096).withUnsafeBytes { try file.write($0) }
            }
            #expect(failure?.operation == "write")
            #expect(failure?.errno == EBADF)
            #expect(failure?.path == file.temporaryPath, "the error names the file written")
            // The caller gives up: the file goes out of scope uncommitted (deinit aborts).
        }
        #expect(try Data(contentsOf: target) == Data("old".utf8))
        #expect(try Self.names(dir) == ["keys.json"])
    }

    @Test("createNew never replaces a name, even one taken while the file was written; nothing is left behind")
    func createNewRefusesATakenName() throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let target = dir.appendingPathComponent("new")
        let file = try AtomicFile(path: target.path, mode: 0o644, publication: .createNew)
        try Data("mine".utf8).withUnsafeBytes { try file.write($0) }
        try Data("theirs".utf8).write(to: target)
        let failure = #expect(throws: FileIOError.self) { try file.commit() }
        #expect(failure?.errno == EEXIST)
        #expect(failure?.path == target.path)
        file.abort()
        #expect(try Data(contentsOf: target) == Data("theirs".utf8))
        #expect(try Self.names(dir) == ["new"])

        let fresh = try AtomicFile(path: dir.appendingPathComponent("fresh").path, publication: .createNew)
        try Data("x".utf8).withUnsafeBytes { try fresh.write($0) }
        try fresh.commit()
        #expect(try Self.names(dir) == ["fresh", "new"])
    }

    @Test(
        "without /proc/self/fd (a container, a chroot) the file is named from the start and commits the same file",
        arguments: [AtomicFile.Publication.replace, .createNew])
    func withoutDescriptorNames(publication: AtomicFile.Publication) throws {
        var committed: [Data] = []
        for procMounted in [true, false] {
            let dir = try CLIRunner.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let target = dir.appendingPathComponent("out")
            if publication == .replace { try Data("old".utf8).write(to: target) }
            let descriptors =
                procMounted ? UnnamedFile.descriptorDirectory : dir.appendingPathComponent("no-proc/self/fd").path
            let file = try AtomicFile(
                path: target.path, mode: 0o640, publication: publication, descriptorDirectory: descriptors)
            #if os(Linux)
                #expect(file.isUnnamedUntilCommit == procMounted)
            #else
                #expect(!file.isUnnamedUntilCommit)
            #endif
            try Data(repeating: 3, count: 10_000).withUnsafeBytes { try file.write($0) }
            let temporary = URL(fileURLWithPath: file.temporaryPath).lastPathComponent
            let before = publication == .replace ? ["out"] : []
            #expect(try Self.names(dir) == (file.isUnnamedUntilCommit ? before : (before + [temporary]).sorted()))
            try file.commit()
            #expect(try Self.names(dir) == ["out"])
            let mode = try FileManager.default.attributesOfItem(atPath: target.path)[.posixPermissions] as? Int
            #expect(mode == 0o640)
            committed.append(try Data(contentsOf: target))
        }
        #expect(committed == [Data(repeating: 3, count: 10_000), Data(repeating: 3, count: 10_000)])
    }

    @Test("an unnamed file is used only when the descriptor directory shows that very file")
    func unnamedFilesNeedTheirDescriptorName() throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let probe = UnnamedFile.open(inDirectory: dir.path, readable: false)
        guard probe >= 0 else {
            // No O_TMPFILE here (macOS, or a file system without it): open's errno, and AtomicFile names its file.
            let reason = errno
            let refused = UnnamedFile.openLinkable(inDirectory: dir.path, through: UnnamedFile.descriptorDirectory)
            let refusal = errno
            #expect(refused == -1 && refusal == reason)
            print("FilePlumbingTests: no unnamed files here (errno \(reason)); the descriptor-name checks are skipped")
            return
        }
        defer { close(probe) }
        let missing = UnnamedFile.openLinkable(inDirectory: dir.path, through: dir.appendingPathComponent("fd").path)
        let missingErrno = errno
        #expect(missing == -1 && missingErrno == ENOENT, "a file made, then closed: no name for it")
        #expect(try Self.names(dir).isEmpty)
        // Where procfs is mounted it names the descriptor (the test machines are Linux with /proc).
        #expect(UnnamedFile.isNamed(probe, in: UnnamedFile.descriptorDirectory), "procfs names the descriptor")
        let real = UnnamedFile.openLinkable(inDirectory: dir.path, through: UnnamedFile.descriptorDirectory)
        #expect(real >= 0)
        if real >= 0 { close(real) }

        // Decoys of this very descriptor's entry (its number as their name): existing files, so only the device
        // and inode comparison can tell them apart.
        let decoys = dir.appendingPathComponent("decoys")
        try FileManager.default.createDirectory(at: decoys, withIntermediateDirectories: false)
        let entry = decoys.appendingPathComponent("\(probe)").path
        try Data().write(to: URL(fileURLWithPath: entry))
        #expect(!UnnamedFile.isNamed(probe, in: decoys.path), "an ordinary file")
        let other = UnnamedFile.open(inDirectory: dir.path, readable: false)
        defer { if other >= 0 { close(other) } }
        try #require(other >= 0)
        // A link to another unnamed file in the same directory: same device, another inode.
        try FileManager.default.removeItem(atPath: entry)
        try FileManager.default.createSymbolicLink(
            atPath: entry, withDestinationPath: "\(UnnamedFile.descriptorDirectory)/\(other)")
        #expect(!UnnamedFile.isNamed(probe, in: decoys.path), "another file on the same device")
        // The same kind of link to the descriptor's own entry passes: the comparison, not the entry, decided.
        try FileManager.default.removeItem(atPath: entry)
        try FileManager.default.createSymbolicLink(
            atPath: entry, withDestinationPath: "\(UnnamedFile.descriptorDirectory)/\(probe)")
        #expect(UnnamedFile.isNamed(probe, in: decoys.path), "a link to the descriptor's own procfs entry")
        #expect(try Self.names(dir) == ["decoys"])
    }

    @Test(
        "a named temporary file is removed when its commit fails",
        arguments: [AtomicFile.Publication.replace, .createNew])
    func namedTemporaryLeavesNothingOnFailure(publication: AtomicFile.Publication) throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // A non-empty directory has the name: rename(2) cannot replace it, link(2) finds it taken.
        let target = dir.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: false)
        try Data("kept".utf8).write(to: target.appendingPathComponent("inside"))
        do {
            let file = try AtomicFile(
                path: target.path, publication: publication,
                descriptorDirectory: dir.appendingPathComponent("no-proc").path)
            #expect(!file.isUnnamedUntilCommit)
            try Data(repeating: 9, count: 4096).withUnsafeBytes { try file.write($0) }
            #expect(try Self.names(dir).count == 2, "the temporary file has its name")
            let failure = #expect(throws: FileIOError.self) { try file.commit() }
            #expect(failure?.path == target.path)
            // The caller gives up: the file goes out of scope uncommitted (deinit aborts).
        }
        #expect(try Self.names(dir) == ["out"])
        #expect(try Data(contentsOf: target.appendingPathComponent("inside")) == Data("kept".utf8))
    }

    @Test("the temporary name is short and the same scheme everywhere: .e3dbkit-<16 hex>.tmp")
    func temporaryNames() throws {
        let name = AtomicFile.temporaryName()
        #expect(name.hasPrefix(".e3dbkit-") && name.hasSuffix(".tmp") && name.count == 29)
        #expect(AtomicFile.temporaryName() != name)
        #expect(AtomicFile.temporaryPath(in: "/").hasPrefix("/.e3dbkit-"))
        #expect(AtomicFile.temporaryPath(in: "a/b").hasPrefix("a/b/.e3dbkit-"))
        #expect(FileIO.directory(of: "name") == ".")
        #expect(FileIO.directory(of: "/name") == "/")
        #expect(FileIO.directory(of: "a/b/c") == "a/b")
    }

    @Test("syncDirectory syncs a directory, and names the call, the path and errno when it cannot")
    func syncDirectory() throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileIO.syncDirectory(dir.path)
        try FileIO.syncDirectory(containing: dir.appendingPathComponent("anything").path)
        let missing = dir.appendingPathComponent("gone").path
        let gone = #expect(throws: FileIOError.self) { try FileIO.syncDirectory(missing) }
        #expect(gone == FileIOError("open", path: missing, errno: ENOENT))
        #expect(gone?.description == "open \(missing): \(String(cString: strerror(ENOENT)))")
        let file = dir.appendingPathComponent("file")
        try Data().write(to: file)
        let notDirectory = #expect(throws: FileIOError.self) { try FileIO.syncDirectory(file.path) }
        #expect(notDirectory?.errno == ENOTDIR)
        // The stated policy: a directory that cannot be opened for reading (EACCES) counts as synced. Root reads
        // every directory, so the case exists only for other users.
        if geteuid() != 0 {
            let locked = dir.appendingPathComponent("locked")
            try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: false)
            chmod(locked.path, 0o300)
            defer { chmod(locked.path, 0o700) }
            try FileIO.syncDirectory(locked.path)
        }
    }

    @Test("reads interrupted by a signal (EINTR) are retried, not reported")
    func interruptedReadsAreRetried() async throws {
        // A handler without SA_RESTART, so that the signal interrupts a blocked read(2) with EINTR.
        var action = sigaction()
        #if canImport(Glibc)
            action.__sigaction_handler.sa_handler = { _ in signalsTaken.add(1, ordering: .relaxed) }
        #else
            action.__sigaction_u.__sa_handler = { _ in signalsTaken.add(1, ordering: .relaxed) }
        #endif
        action.sa_flags = 0
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        #expect(sigaction(SIGUSR1, &action, &previous) == 0)
        defer { sigaction(SIGUSR1, &previous, nil) }

        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { for end in ends { close(end) } }
        let reader = ends[0]
        let shared = ReaderState()
        let worker = Thread {
            // The runtime may start threads with signals blocked; this one takes SIGUSR1.
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, SIGUSR1)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            shared.thread.withLock { $0 = pthread_self() }
            var byte: UInt8 = 0
            let n = FileIO.retryingInterrupted {
                shared.attempts.add(1, ordering: .relaxed)
                return read(reader, &byte, 1)
            }
            shared.result.withLock { $0 = n == 1 ? Int(byte) : -1 }
        }
        worker.start()
        // Signal the blocked reader until its read has been interrupted and retried at least twice, then feed it: a
        // few milliseconds. Done off the cooperative pool, so that the test does not depend on when a cooperative
        // thread is free (other suites' synchronous tests can keep them busy for minutes).
        let writer = ends[1]
        try await offCooperativePool {
            let deadline = Date().addingTimeInterval(30)
            while shared.attempts.load(ordering: .relaxed) < 3, Date() < deadline {
                if let target = shared.thread.withLock({ $0 }) { pthread_kill(target, SIGUSR1) }
                usleep(5_000)
            }
            var byte: UInt8 = 42
            _ = write(writer, &byte, 1)
            while shared.result.withLock({ $0 }) == nil, Date() < deadline { usleep(1_000) }
        }
        #expect(shared.attempts.load(ordering: .relaxed) >= 3, "the read was interrupted and retried")
        #expect(signalsTaken.load(ordering: .relaxed) >= 2)
        #expect(shared.result.withLock { $0 } == 42, "the retried read returned the byte, not an error")
    }
}

/// What the reading thread of `interruptedReadsAreRetried` shares with the test.
private final class ReaderState: Sendable {
    let thread = Mutex<pthread_t?>(nil)
    let attempts = Atomic<Int>(0)
    let result = Mutex<Int?>(nil)
}
