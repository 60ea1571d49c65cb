import E3DBPrimitives
import E3DBTestSupport
import Foundation
import NIOCore
import Synchronization
import Testing

@testable import E3DBServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite("LocalFileBodyStore's disk work runs on threads of its own, never on the cooperative pool")
struct FileBodyThreadTests {
    /// As many reads as the store runs at once: at least 8, more than the cooperative pool (one thread per core).
    static let reads = max(8, 2 * ProcessInfo.processInfo.processorCount)

    @Test("Downloads of bodies whose reads wait (FIFOs) hold no cooperative thread: a task still runs meanwhile")
    func readsLeaveThePool() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-pool-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LocalFileBodyStore(directory: directory)
        // Each body is a FIFO: its `open(2)` waits for a writer, then its `read(2)` for bytes, as a slow disk would.
        let ids = (0..<Self.reads).map { _ in RecordID.random() }
        let paths = ids.map { directory.appendingPathComponent($0.text).path }
        // Safety: each path is lent to `mkfifo` as a NUL-terminated copy for the call only.
        for path in paths { #expect(unsafe mkfifo(path, 0o600) == 0) }
        let payload = 300_000  // more than one 256 KiB chunk
        let downloads = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for id in ids {
                    group.addTask {
                        let count = Mutex(0)
                        try await store.read(id: id) { buffer in count.withLock { $0 += buffer.readableBytes } }
                        return count.withLock { $0 }
                    }
                }
                return try await group.reduce(0, +)
            }
        }
        // One thread of the test's own watches and then feeds the FIFOs, needing no cooperative thread: before bodies
        // were read off the pool, the pool's threads all waited in `open(2)` or `read(2)`.
        let (reached, answered) = try await offCooperativePool { () -> (Bool, Bool) in
            // A writer's non-blocking open succeeds once a reader has the FIFO open: then that download waits in
            // `read(2)`. Before, only as many as the pool has threads got there.
            var writers = [Int32](repeating: -1, count: paths.count)
            let deadline = Date().addingTimeInterval(5)
            while writers.contains(-1) && Date() < deadline {
                for (i, path) in paths.enumerated() where writers[i] < 0 {
                    // Safety: the path is lent to `open` as a NUL-terminated copy for the call only.
                    writers[i] = unsafe open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                }
                usleep(10_000)
            }
            // With every download waiting for its "disk", a task on the cooperative pool still runs.
            let ran = DispatchSemaphore(value: 0)
            Task.detached { ran.signal() }
            let answered = ran.wait(timeout: .now() + 5) == .success
            // The bodies arrive, each from a thread of its own; a download not yet in its open (a failure above)
            // is served once it gets there.
            for (path, writer) in zip(paths, writers) {
                Thread.detachNewThread {
                    var fd = writer
                    if fd < 0 {
                        // Safety: the path is lent to `open` as a NUL-terminated copy for the call only.
                        fd = unsafe open(path, O_WRONLY | O_CLOEXEC)
                    }
                    defer { close(fd) }
                    _ = fcntl(fd, F_SETFL, 0)  // blocking writes: the pipe holds less than the payload
                    try? FileIO.writeAll(fd, [UInt8](repeating: 7, count: payload).span.bytes)
                }
            }
            return (!writers.contains(-1), answered)
        }
        #expect(reached, "every download reached its read")
        #expect(answered, "a cooperative task ran while the downloads waited")
        #expect(try await downloads.value == paths.count * payload)
    }

    @Test("An upload's disk work waits for a permit of the store's, suspended; a cancelled one leaves the queue")
    func uploadsWaitForAPermit() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-pool-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LocalFileBodyStore(directory: directory)
        let body = Data("an encrypted body".utf8)
        let id = RecordID.random()
        let limit = store.permits.snapshot.free
        #expect(limit == blockingThreadLimit)
        for _ in 0..<limit { try await store.permits.acquire() }
        let upload = Task {
            try await store.store(
                id: id, chunks: Self.chunks(body, size: body.count), expectedSize: Int64(body.count),
                expectedMD5: Hashes.md5(body))
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while store.permits.snapshot.waiting == 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(store.permits.snapshot.waiting == 1)
        upload.cancel()
        await #expect(throws: E3DBError(.cancelled)) { try await upload.value }
        #expect(store.permits.snapshot == (0, 0))
        #expect(throws: E3DBError.self) { try store.size(id: id) }
        for _ in 0..<limit { store.permits.release() }
        try await store.store(
            id: id, chunks: Self.chunks(body, size: body.count), expectedSize: Int64(body.count),
            expectedMD5: Hashes.md5(body))
        #expect(try store.size(id: id) == Int64(body.count))
        #expect(store.permits.snapshot == (limit, 0))
    }

    @Test("A body of several batches is stored and read back whole; a wrong MD5 or size leaves nothing behind")
    func batches() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-pool-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LocalFileBodyStore(directory: directory)
        let body = Data((0..<(5 * LocalFileBodyStore.batchBytes / 2 + 123)).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let id = RecordID.random()
        try await store.store(
            id: id, chunks: Self.chunks(body, size: 65_536), expectedSize: Int64(body.count),
            expectedMD5: Hashes.md5(body))
        var read = Data()
        var sizes: [Int] = []
        try await store.read(id: id) { buffer in
            sizes.append(buffer.readableBytes)
            read.append(contentsOf: buffer.readableBytesView)
        }
        #expect(read == body)
        #expect(sizes.allSatisfy { $0 <= BodyChunks.chunkBytes } && sizes.count == 11)

        let other = RecordID.random()
        await #expect(throws: E3DBError.self) {
            try await store.store(
                id: other, chunks: Self.chunks(body, size: 65_536), expectedSize: Int64(body.count),
                expectedMD5: Hashes.md5(Data("another body".utf8)))
        }
        await #expect(throws: E3DBError.self) {
            try await store.store(
                id: other, chunks: Self.chunks(body, size: 65_536), expectedSize: Int64(body.count - 1),
                expectedMD5: Hashes.md5(body))
        }
        #expect(throws: E3DBError.self) { try store.size(id: other) }
        // Nothing left: no temporary file named in tmp/, and none open (on Linux an upload's file has no name: only
        // an open descriptor keeps it).
        let tmp = directory.appendingPathComponent("tmp").path
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty)
        #expect(try Self.openFiles(in: tmp) == 0)
        #expect(store.permits.snapshot == (blockingThreadLimit, 0))
        #expect(store.readPermits.snapshot == (blockingThreadLimit, 0))
    }

    /// How many of this process's descriptors are files in `directory` (unnamed ones included: /proc shows them as
    /// `directory/#inode (deleted)`), or 0 where there is no /proc. Checked against an upload's file of its own
    /// first, so the count cannot be vacuous.
    static func openFiles(in directory: String) throws -> Int {
        guard FileManager.default.fileExists(atPath: "/proc/self/fd") else { return 0 }
        func count() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count { name in
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name)
                return target?.hasPrefix(directory + "/") == true
            }
        }
        let probe = try AtomicFile(path: directory + "/../probe", temporaryDirectory: directory)
        let seen = try count()
        probe.abort()
        #expect(seen >= 1, "an upload's open temporary file is counted")
        return try count()
    }

    @Test("Bodies of 0 bytes, exactly 1 MiB and 2 MiB (batch and read boundaries) are stored and read back whole")
    func boundaries() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-pool-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LocalFileBodyStore(directory: directory)
        for size in [0, LocalFileBodyStore.batchBytes, 2 * LocalFileBodyStore.batchBytes] {
            let body = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) })
            let id = RecordID.random()
            try await store.store(
                id: id, chunks: Self.chunks(body, size: 65_536), expectedSize: Int64(body.count),
                expectedMD5: Hashes.md5(body))
            #expect(try store.size(id: id) == Int64(size))
            var read = Data()
            var pieces = 0
            try await store.read(id: id) { buffer in
                pieces += 1
                #expect(buffer.readableBytes > 0 && buffer.readableBytes <= BodyChunks.chunkBytes)
                read.append(contentsOf: buffer.readableBytesView)
            }
            #expect(read == body, "a body of \(size) bytes")
            #expect(pieces == size / BodyChunks.chunkBytes, "a body of \(size) bytes")
        }
        #expect(try Self.openFiles(in: directory.appendingPathComponent("tmp").path) == 0)
        #expect(store.permits.snapshot == (blockingThreadLimit, 0))
        #expect(store.readPermits.snapshot == (blockingThreadLimit, 0))
    }

    @Test("A download does not wait for the store's write permits (an upload's fsync, an unlink): a pool of its own")
    func downloadsHaveTheirOwnPool() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-pool-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LocalFileBodyStore(directory: directory)
        let body = Data("an encrypted body".utf8)
        let id = RecordID.random()
        try await store.store(
            id: id, chunks: Self.chunks(body, size: body.count), expectedSize: Int64(body.count),
            expectedMD5: Hashes.md5(body))
        // Every write permit is taken, as by long commits.
        for _ in 0..<blockingThreadLimit { try await store.permits.acquire() }
        let ended = EndFlag()
        let download = Task {
            defer { ended.set() }
            let read = Mutex(Data())
            try await store.read(id: id) { buffer in read.withLock { $0.append(contentsOf: buffer.readableBytesView) } }
            return read.withLock { $0 }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while !ended.isSet && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        let done = ended.isSet
        for _ in 0..<blockingThreadLimit { store.permits.release() }
        #expect(done, "the download ended while every write permit was held")
        #expect(try await download.value == body)
        #expect(store.readPermits.snapshot == (blockingThreadLimit, 0))
    }

    /// Set once, read from any task.
    final class EndFlag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    @Test("A body sequence owns its file: it reads the right bytes after its opener returned and numbers were reused")
    func bodyChunksOwnTheirFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-pool-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = Data(repeating: 1, count: 3 * BodyChunks.readBytes / 2)
        let second = Data(repeating: 2, count: 3 * BodyChunks.readBytes / 2)
        try first.write(to: directory.appendingPathComponent("first"))
        try second.write(to: directory.appendingPathComponent("second"))
        // The opener returns the sequence (as the migration hands it to an HTTP client and moves on), then the next
        // body is opened: had the opener closed its descriptor, the next open would take the same number.
        let chunks = try Self.sequence(of: directory.appendingPathComponent("first").path)
        let next = try OwnedDescriptor(opening: directory.appendingPathComponent("second").path, flags: O_RDONLY)
        #expect(next.fd != chunks.file.fd)
        var read = Data()
        for try await buffer in chunks { read.append(contentsOf: buffer.readableBytesView) }
        #expect(read == first)
    }

    /// A body sequence over the file at `path`, whose only holder is the sequence once this returns.
    static func sequence(of path: String) throws -> BodyChunks {
        BodyChunks(file: try OwnedDescriptor(opening: path, flags: O_RDONLY), permits: AsyncPermits(1))
    }

    /// `body` in buffers of `size` bytes, as the network would hand it over.
    static func chunks(_ body: Data, size: Int) -> AsyncThrowingStream<ByteBuffer, any Error> {
        AsyncThrowingStream { continuation in
            var offset = 0
            while offset < body.count {
                let end = min(offset + size, body.count)
                continuation.yield(ByteBuffer(bytes: body[offset..<end]))
                offset = end
            }
            continuation.finish()
        }
    }
}
