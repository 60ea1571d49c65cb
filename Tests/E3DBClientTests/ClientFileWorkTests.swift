import Dispatch
import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBClient
import E3DBFiles
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Feeds the FIFOs that `writeFile` calls read as their plaintext, from a thread of its own: the structural test of
/// rule 11 for the client's file work (not a timing).
private final class FIFOFeeder: Sendable {
    let paths: [String]
    let size: Int
    private let reached = DispatchSemaphore(value: 0)
    private let proceed = DispatchSemaphore(value: 0)

    init(paths: [String], size: Int) {
        self.paths = paths
        self.size = size
    }

    /// The byte at `offset` of every FIFO's content.
    static func byte(_ offset: Int) -> UInt8 { UInt8(truncatingIfNeeded: offset &* 31 &+ 7) }

    /// Waits (off the cooperative pool) until every FIFO has its reader at the same time, for at most 20 s; then,
    /// once `proceed()` was called (or after 60 s), or at once when not every reader came, writes `size` bytes into
    /// each FIFO and closes it, also those whose reader comes later (for at most 60 s more, so that a regression's
    /// readers are let go and the test ends). Blocking: run it on a thread of its own.
    /// - Returns: whether every reader was there at once.
    func feed() -> Bool {
        var writers = [Int32?](repeating: nil, count: paths.count)
        let deadline = Date().addingTimeInterval(20)
        var allAtOnce = false
        while Date() < deadline {
            for (i, path) in paths.enumerated() where writers[i] == nil {
                let fd = Self.openWriter(path)
                if fd >= 0 { writers[i] = fd }
            }
            if writers.allSatisfy({ $0 != nil }) {
                allAtOnce = true
                break
            }
            usleep(2_000)
        }
        reached.signal()
        if allAtOnce { _ = proceed.wait(timeout: .now() + 60) }
        let content = Data((0..<size).map(Self.byte))
        let late = Date().addingTimeInterval(60)
        while writers.contains(where: { $0 != -1 }) && Date() < late {
            for (i, path) in paths.enumerated() where writers[i] != -1 {
                let fd = writers[i] ?? Self.openWriter(path)
                guard fd >= 0 else { continue }
                // Blocking writes from here: the reader drains the FIFO as it encrypts.
                _ = fcntl(fd, F_SETFL, 0)
                try? FileIO.writeAll(fd, content.bytes)
                close(fd)
                writers[i] = -1
            }
            usleep(2_000)
        }
        return allAtOnce
    }

    /// Waits (off the cooperative pool) until `feed()` knows whether every reader came.
    func waitUntilDecided() throws {
        guard reached.wait(timeout: .now() + 90) == .success else { throw Timeout() }
    }

    /// Lets `feed()` write the content.
    func letWrite() { proceed.signal() }

    /// Opens the FIFO at `path` for writing without blocking: -1 (ENXIO) until a reader has it open.
    static func openWriter(_ path: String) -> Int32 { unsafe open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC) }

    struct Timeout: Error {}
}

/// Runs `body` while the caller holds every permit of `pools` (`FileWork.limit` each), given back however it ends.
private func holdingEveryPermit<T>(
    of pools: [AsyncPermits<Never>], _ body: () async throws -> T
) async throws -> T {
    var held: [AsyncPermits<Never>] = []
    defer { for pool in held { pool.release() } }
    for pool in pools {
        for _ in 0..<FileWork.limit {
            try await pool.acquire()
            held.append(pool)
        }
    }
    return try await body()
}

/// How many times a body ran.
private final class RunCount: Sendable {
    let count = Atomic<Int>(0)
}

@Suite("E3DBClient's file work runs off the cooperative pool", .serialized)
struct ClientFileWorkTests {
    /// More `writeFile` calls than cooperative threads (one a processor; `FileWork.limit` is at least twice that)
    /// wait inside their encryption at once, each blocked reading a FIFO that nothing writes yet, and a plain task
    /// still runs meanwhile. Encrypting on the caller's task (as before) held every cooperative thread in `open` or
    /// `read` of a FIFO: the other calls never reached theirs, and the test failed after 20 s.
    @Test("concurrent writeFile calls wait for their plaintext on threads of their own; a plain task still runs")
    func writeFileLeavesThePool() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice")
        let scratch = try Scratch()
        // The access key for the type exists before the concurrent calls (they would otherwise race to create it).
        let first = scratch.path("first")
        #expect(FileManager.default.createFile(atPath: first, contents: Data("first".utf8)))
        _ = try await alice.writeFile(type: "fifo", path: first)

        let count = FileWork.limit
        #expect(count > ProcessInfo.processInfo.activeProcessorCount)
        let paths = (0..<count).map { scratch.path("fifo\($0)") }
        for path in paths { #expect(mkfifo(path, 0o600) == 0) }
        let feeder = FIFOFeeder(paths: paths, size: 100_000)
        let feeding = Task { try await offCooperativePool { feeder.feed() } }
        let writes = Task {
            try await withThrowingTaskGroup { group in
                for path in paths { group.addTask { try await alice.writeFile(type: "fifo", path: path) } }
                return try await group.reduce(into: [ClientRecord]()) { $0.append($1) }
            }
        }
        try await offCooperativePool { try feeder.waitUntilDecided() }
        let answer = await Task.detached { 42 }.value
        #expect(answer == 42)
        // Every whole-file permit is held by an encryption waiting for its FIFO: a download into a file (its
        // creation, write and `fsync`, I/O steps) still completes. With one pool for both it waited for them.
        let stalledOut = scratch.path("while-encrypting")
        let downloaded = RunCount()
        let download = Task {
            defer { downloaded.count.add(1, ordering: .relaxed) }
            return try await AsyncHTTPClientTransport().download(
                try HTTPRequest(method: .get, checkedURL: server.url + "/v1/none"), to: stalledOut,
                timeout: .seconds(60))
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while downloaded.count.load(ordering: .relaxed) == 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let downloadedWhileEncrypting = downloaded.count.load(ordering: .relaxed) == 1
        feeder.letWrite()
        #expect(try await feeding.value, "not every writeFile call was inside its encryption at once")
        let written = try await writes.value
        _ = try await download.value
        #expect(downloadedWhileEncrypting, "download(to:) waited for the encryptions' permits")
        #expect(written.count == count && written.allSatisfy { $0.meta.fileMeta?.size ?? 0 > 100_000 })

        let id = try #require(written.first?.id)
        let out = scratch.path("out")
        _ = try await alice.readFile(id, to: out)
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data((0..<100_000).map(FIFOFeeder.byte)))
    }

    @Test("a writeFile cancelled while it encrypts stops at the next chunk with requestCancelled")
    func writeFileCancelledDuringEncryption() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice")
        let scratch = try Scratch()
        let path = try scratch.file("plain", count: 1 << 20)
        let gate = ProgressGate()
        let upload = Task { try await alice.writeFile(type: "big", path: path, progress: gate.callback) }
        try await gate.waitUntilReached()  // the encrypting thread is held after its first chunk
        upload.cancel()
        gate.open()
        await #expect(throws: E3DBError(.requestCancelled)) { _ = try await upload.value }
        var files = 0
        for try await _ in alice.query(RecordQuery(types: ["big"])) { files += 1 }
        #expect(files == 0)
    }

    @Test("file work cancelled before it starts runs nothing; a caller queued for a permit leaves when cancelled")
    func cancelledBeforeStart() async throws {
        let ran = RunCount()
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await FileWork.run("test work", kind: .io) { _ in ran.count.add(1, ordering: .relaxed) }
        }
        await #expect(throws: E3DBError(.requestCancelled)) { try await early.value }
        #expect(ran.count.load(ordering: .relaxed) == 0)

        // Every permit of a pool of the test's own taken: a caller waits, suspended, and its cancellation ends it
        // at once.
        let pool = AsyncPermits<Never>(2)
        try await pool.acquire()
        try await pool.acquire()
        defer {
            pool.release()
            pool.release()
        }
        let queued = Task {
            try await FileWork.run("test work", permits: pool) { _ in ran.count.add(1, ordering: .relaxed) }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while pool.snapshot.waiting < 1 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(pool.snapshot.waiting == 1)
        queued.cancel()
        await #expect(throws: E3DBError(.requestCancelled)) { try await queued.value }
        #expect(pool.snapshot.waiting == 0)
        #expect(ran.count.load(ordering: .relaxed) == 0)
    }

    /// `readFile`'s decryption waits for the network, and a transport may need a permit to feed it
    /// (`URLSessionTransport` reads its spill file through `FileWork`): were the decryption to hold a permit,
    /// `FileWork.limit` slow downloads could wait forever for one. It takes none: a download completes while every
    /// permit is held.
    @Test("readFile's decryption takes no FileWork permit: a download completes while every permit is held")
    func readFileNeedsNoPermit() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice", transport: .urlSession)
        let scratch = try Scratch()
        let path = try scratch.file("plain", count: 200_000)
        let record = try await alice.writeFile(type: "file", path: path)
        let id = try #require(record.id)
        let out = scratch.path("out")
        let download = Task { try await alice.readFile(id, to: out) }
        // Bounded: with a permit needed, the download would wait until they are given back below.
        let completedWhileHeld = try await holdingEveryPermit(of: [FileWork.wholeFilePermits, FileWork.ioPermits]) {
            let deadline = ContinuousClock.now + .seconds(20)
            while !FileManager.default.fileExists(atPath: out) && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            return FileManager.default.fileExists(atPath: out)
        }
        _ = try await download.value
        #expect(completedWhileHeld, "the download waited for a FileWork permit")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data(contentsOf: URL(fileURLWithPath: path)))
    }
}
