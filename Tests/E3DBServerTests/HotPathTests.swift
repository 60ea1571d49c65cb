import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation
import Logging
import NIOCore
import Synchronization
import Testing

@testable import E3DBServer

/// The server's fast paths against the code they replace: record responses spliced from stored JSON text,
/// group commit of record inserts, and the bearer-token cache.
@Suite("Server hot paths")
struct HotPathTests {
    /// Runs `body` with a migrated SQLite storage in a fresh directory, removed afterwards.
    static func withStorage(_ body: (SQLiteStorage, URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("e3dbkit-hotpath-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteStorage(directory: directory)
        try await storage.migrate()
        try await body(storage, directory)
        try await storage.close()
    }

    static func row(type: String = "bench", plain: [String: String], data: [String: String], recSig: String?)
        -> RecordRow
    {
        RecordRow(
            index: 7, recordID: .random(), writerID: .random(), userID: .random(), type: type,
            plainJSON: text(plain), dataJSON: text(data), recSig: recSig,
            fileMetaJSON: nil, created: 1_764_070_496_123_456, lastModified: 1_764_070_496_123_457,
            version: RecordRow.newVersion())
    }

    /// The JSON text of a map as a client could have sent it (JSONEncoder's, keys sorted).
    static func text(_ map: [String: String]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(map)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Members of a JSON object, recursively, as Foundation reads them.
    static func object(_ data: Data) throws -> NSDictionary {
        try #require(try JSONSerialization.jsonObject(with: data) as? NSDictionary)
    }

    @Test("a spliced record response has exactly the members and values of the record")
    func splicedRecordMatchesEncoder() throws {
        let hostile = "q\"uote \\ back/slash \n\r\t\u{8}\u{c}\u{1}\u{1f} é 🙂 </script>"
        let cases: [(type: String, plain: [String: String], data: [String: String], recSig: String?)] = [
            ("bench", [:], ["a": "x"], nil),
            (hostile, ["k": hostile, hostile: "v"], ["f1": "a.b.c.d", "f2": hostile], hostile),
            ("bench", ["n": "1"], [:], "sig"),
        ]
        for c in cases {
            var row = Self.row(type: c.type, plain: c.plain, data: c.data, recSig: c.recSig)
            let meta = API.Meta(
                recordID: row.recordID.text, writerID: row.writerID.text, userID: row.userID.text, type: c.type,
                plain: RecordData(c.plain), created: APITimestamp.format(micros: row.created),
                lastModified: APITimestamp.format(micros: row.lastModified), version: row.version)
            let expected = API.Record(meta: meta, data: RecordData(c.data), recSig: c.recSig)
            let spliced = Data(try RecordJSON.render(row).readableBytesView)
            let encoded = expected.jsonData()
            #expect(
                try Self.object(spliced) == (try Self.object(encoded)), "\(String(decoding: spliced, as: UTF8.self))")
            #expect(try API.Record.decodeJSON(spliced) == expected)
            // A write's answer splices the request's text without reading it again: the same bytes.
            #expect(Data(try RecordJSON.render(row, textRead: true).readableBytesView) == spliced)
            if c.plain.count + c.data.count <= 1 {
                // One meta writer: where the stored text is what the writer writes (one member at most, nothing
                // escaped differently), the response is the client's encoding byte for byte, member order included.
                #expect(
                    spliced == encoded,
                    "\(String(decoding: spliced, as: UTF8.self)) != \(String(decoding: encoded, as: UTF8.self))")
            }
            // A field filter keeps the named members' stored text; an update echoes the request's plain.
            let filtered = Data(try RecordJSON.render(row, fields: ["f2", "zz"]).readableBytesView)
            var only = expected
            only.data = RecordData(c.data.filter { $0.key == "f2" })
            #expect(try API.Record.decodeJSON(filtered) == only)
            let echoed = Data(try RecordJSON.render(row, plain: .request(nil)).readableBytesView)
            var withoutPlain = expected
            withoutPlain.meta.plain = nil
            #expect(try Self.object(echoed) == (try Self.object(withoutPlain.jsonData())))
            // A file record's file_meta carries the response's URL.
            let fileMeta = API.FileMeta(fileURL: nil, fileName: hostile, checksum: "c/+=", size: 12)
            row.fileMetaJSON = JSONText.fileMeta(fileMeta)
            var file = expected
            file.meta.fileMeta = fileMeta
            file.meta.fileMeta?.fileURL = "https://h/x?a=b&c=/d"
            let fileBody = Data(try RecordJSON.render(row, fileURL: "https://h/x?a=b&c=/d").readableBytesView)
            #expect(try Self.object(fileBody) == (try Self.object(file.jsonData())))
        }
    }

    @Test("stored text that is not what the server stores is storageCorrupted naming the column and the record")
    func corruptedStoredText() throws {
        let good = Self.row(plain: ["n": "1"], data: ["f": "x"], recSig: nil)
        let record = good.recordID.text
        /// `body` throws `storageCorrupted` whose message starts with `column` of the record and says `why`.
        func expectCorrupted(
            _ column: String, _ why: String, sourceLocation: SourceLocation = #_sourceLocation,
            _ body: () throws -> Void
        ) {
            do {
                try body()
                Issue.record("\(column): accepted", sourceLocation: sourceLocation)
            } catch let error as E3DBError {
                #expect(error.code == .storageCorrupted, "\(error)", sourceLocation: sourceLocation)
                #expect(
                    error.message.hasPrefix("\(column) of stored record \(record) ") && error.message.contains(why),
                    "\(error)", sourceLocation: sourceLocation)
            } catch {
                Issue.record("\(column): \(error)", sourceLocation: sourceLocation)
            }
        }
        let bad: [(WritableKeyPath<RecordRow, String>, String, String, String)] = [
            (\.plainJSON, #"{"n":1}"#, "records.plain", "not a string at byte 5"),
            (\.dataJSON, #"{"f":"x"} {"#, "records.data", "bytes after the stored object"),
            (\.dataJSON, "[]", "records.data", "is not a JSON object"),
            // A name repeated by code units: a search would match the first value, the SDKs show the last.
            (\.plainJSON, #"{"role":"user","role":"admin"}"#, "records.plain", #"repeated member "role""#),
            (\.dataJSON, #"{"f":"x","\u0066":"y"}"#, "records.data", #"repeated member "f""#),
        ]
        for (path, text, column, why) in bad {
            var row = good
            row[keyPath: path] = text
            for fields in [[], ["f"]] {
                expectCorrupted(column, why) { _ = try RecordJSON.render(row, fields: fields) }
            }
            var search = JSONTextWriter()
            expectCorrupted(column, why) {
                try RecordJSON.writeSearchResult(row, includeData: true, accessKey: nil, into: &search)
            }
            if path == \.plainJSON { expectCorrupted(column, why) { _ = try RecordJSON.plainMembers(row) } }
        }
        var file = good
        file.fileMetaJSON = #"{"size":"12"}"#
        expectCorrupted("records.file_meta", "not a file_meta object") { _ = try RecordJSON.render(file) }
        var plain = good
        plain.plainJSON = #"{"n":"#
        expectCorrupted("records.plain", "not a string at byte 5") { _ = try RecordJSON.plainMembers(plain) }
        // Names that differ only in normalization are two members, as the SDKs keep them.
        plain.plainJSON = #"{"\u00e9":"a","e\u0301":"b"}"#
        _ = try RecordJSON.plainMembers(plain)
        _ = try RecordJSON.render(plain)
    }

    @Test("every control character is escaped as JSONEncoder reads it back")
    func stringEscapes() throws {
        var all = String()
        for scalar in (0..<0x80).compactMap(Unicode.Scalar.init) { all.unicodeScalars.append(scalar) }
        all += "ü€𝄞"
        var writer = JSONTextWriter()
        writer.string(all)
        #expect(try JSONDecoder().decode(String.self, from: Data(writer.bytes)) == all)
    }

    @Test("an id parses as UUID(uuidString:) on 8-4-4-4-12 hex of either case and refuses everything else")
    func idParsingMatchesFoundation() {
        var inputs = [
            "", "x", "5F1C1A6E-2A55-4A55-9B1E-3F6A2F9C0D11", "5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c0d11",
            "5f1c1a6e2a554a559b1e3f6a2f9c0d11", "{5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c0d11}",
            "5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c0d1", "5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c0d111",
            "5f1c1a6e_2a55-4a55-9b1e-3f6a2f9c0d11", "5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c0d1g",
            "5f1c1a6e--a55-4a55-9b1e-3f6a2f9c0d11", "5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c0d1é",
            " 5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c0d1", "5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c-d11",
        ]
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefABCDEFgG-_ ")
        for _ in 0..<2000 {
            var chars = Array(UUID().uuidString)
            for _ in 0..<Int.random(in: 0...2, using: &generator) {
                chars[Int.random(in: 0..<36, using: &generator)] = alphabet.randomElement(using: &generator) ?? "-"
            }
            inputs.append(String(chars))
        }
        for input in inputs {
            let foundation = UUID(uuidString: input).map { $0.uuidString.lowercased() }
            let strict =
                input.utf8.count == 36
                && input.enumerated().allSatisfy { i, c in
                    [8, 13, 18, 23].contains(i) ? c == "-" : c.isHexDigit && c.isASCII
                }
            // Foundation's parser (sscanf "%2hhx") also takes a few malformed forms ("-a" as 0xf6, " 4" as 0x04);
            // an id refuses them and agrees everywhere else, and its text is the lowercase form.
            #expect(ClientID(input)?.text == (strict ? foundation : nil), "\(input)")
            #expect(ClientID(input)?.uuid == (strict ? UUID(uuidString: input) : nil), "\(input)")
            if strict { #expect(foundation != nil, "\(input)") }
        }
    }

    @Test("new ids and versions are distinct lowercase version-4 UUIDs that parse back")
    func newIDs() {
        var seen = Set<String>()
        for _ in 0..<500 {
            let id = RecordID.random()
            #expect(RecordID(id.text) == id)
            for text in [id.text, RecordRow.newVersion()] {
                #expect(text == text.lowercased() && UUID(uuidString: text)?.uuidString.lowercased() == text)
                #expect(Array(text)[14] == "4")
                #expect("89ab".contains(Array(text)[19]))
                seen.insert(text)
            }
        }
        #expect(seen.count == 1000)
    }

    @Test("trimmedWhitespace trims as trimmingCharacters(in: .whitespaces)")
    func trimming() {
        for input in ["", " ", "\t abc \t", "abc", "  a b  ", "\u{a0}abc\u{2003}", "abc\n", "\nabc", " é "] {
            #expect(trimmedWhitespace(Substring(input)) == input.trimmingCharacters(in: .whitespaces), "\(input)")
        }
    }

    @Test("wire timestamps around the four-digit-year fast path")
    func timestampEdges() {
        #expect(APITimestamp.format(micros: 253_402_300_799_999_999) == "9999-12-31T23:59:59.999999Z")
        #expect(APITimestamp.format(micros: 253_402_300_800_000_000) == "10000-01-01T00:00:00.000000Z")
        #expect(APITimestamp.format(micros: -5) == "1970-01-01T00:00:00.000000Z")
        #expect(APITimestamp.format(micros: 1_764_070_496_000_042) == "2025-11-25T11:34:56.000042Z")
    }

    enum Bad: Error { case item }

    /// A body that ignores cancellation, as a postgres-nio query waiting behind a lock (a future nothing cancels):
    /// it ends only when the test opens the gate (or after fifteen minutes, so that a withDeadline that waits for its
    /// body fails these tests instead of hanging them), and holds no thread meanwhile. The tests check the order of
    /// events, not wall-clock bounds: in the full parallel run on two cores, CPU-bound suites have kept the
    /// cooperative threads busy for minutes, delaying any timer as long. With a two-minute safety opening, a
    /// 100 ms deadline's error reached its caller after the gate had opened in a run with one more busy process.
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

        init() { DispatchQueue.global().asyncAfter(deadline: .now() + 900) { [self] in open() } }

        var isOpen: Bool { state.withLock { $0.open } }

        func open() {
            let waiters = state.withLock { state in
                state.open = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }

        func uncooperativeBody() async -> Int {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if !state.open { state.waiters.append(continuation) }
                    return state.open
                }
                if resumeNow { continuation.resume() }
            }
            return 1
        }
    }

    @Test("withDeadline: a body that ignores cancellation still gives its caller the deadline error, not its wait")
    func deadlineWithAnUncooperativeBody() async throws {
        let gate = Gate()
        let started = ContinuousClock.now
        await #expect(throws: DeadlineExceeded.self) {
            try await withDeadline(.milliseconds(100)) { await gate.uncooperativeBody() }
        }
        #expect(ContinuousClock.now - started >= .milliseconds(100))
        #expect(!gate.isOpen, "the deadline error waited for the body")
        gate.open()
    }

    @Test("withDeadline: a cancelled caller leaves at once, even while its body ignores cancellation")
    func deadlineCallerCancelled() async throws {
        let gate = Gate()
        let caller = Task { try await withDeadline(.seconds(300)) { await gate.uncooperativeBody() } }
        try await Task.sleep(for: .milliseconds(50))
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(!gate.isOpen, "the cancelled caller waited for its body")
        gate.open()
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await withDeadline(.seconds(30)) { 1 }
        }
        await #expect(throws: CancellationError.self) { try await early.value }
    }

    @Test("withDeadline: a body's value or error is the caller's, and a cooperative body stops at the deadline")
    func deadlineOutcomes() async throws {
        #expect(try await withDeadline(.seconds(30)) { 42 } == 42)
        await #expect(throws: Bad.self) {
            try await withDeadline(.seconds(30)) { () async throws -> Int in throw Bad.item }
        }
        let stopped = Atomic<Bool>(false)
        await #expect(throws: DeadlineExceeded.self) {
            try await withDeadline(.milliseconds(50)) {
                do { try await Task.sleep(for: .seconds(30)) } catch { stopped.store(true, ordering: .relaxed) }
            }
        }
        #expect(try await AccessRulesTests.eventually { stopped.load(ordering: .relaxed) }, "the body was cancelled")
    }

    @Test("concurrent submissions are written in groups, each caller gets its own output")
    func groupCommitGroups() async throws {
        let batches = Mutex<[Int]>([])
        let commit = GroupCommit<Int, Int>(maxBatch: 64) { items in
            batches.withLock { $0.append(items.count) }
            try await Task.sleep(for: .milliseconds(5))
            return items.map { $0 * 2 }
        }
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for i in 0..<300 { group.addTask { (i, try await commit.submit(i)) } }
            var out: [Int: Int] = [:]
            for try await (i, r) in group { out[i] = r }
            return out
        }
        #expect(results.count == 300)
        #expect(results.allSatisfy { $0.value == $0.key * 2 })
        let sizes = batches.withLock { $0 }
        #expect(sizes.reduce(0, +) == 300)
        #expect(sizes.max() ?? 0 > 1, "no group formed: \(sizes)")
        #expect(sizes.max() ?? 0 <= 64)
    }

    @Test("with several lanes, up to that many groups are written at once, never more", arguments: [1, 3])
    func groupCommitLanes(lanes: Int) async throws {
        struct Running { var now = 0, most = 0, batches = 0 }
        let running = Mutex(Running())
        let commit = GroupCommit<Int, Int>(maxBatch: 16, lanes: lanes) { items in
            running.withLock {
                $0.now += 1
                $0.most = max($0.most, $0.now)
                $0.batches += 1
            }
            try await Task.sleep(for: .milliseconds(20))
            running.withLock { $0.now -= 1 }
            return items.map { -$0 }
        }
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for i in 0..<200 {
                group.addTask { (i, try await commit.submit(i)) }
            }
            return try await group.reduce(into: [Int: Int]()) { $0[$1.0] = $1.1 }
        }
        #expect(results.count == 200 && results.allSatisfy { $0.value == -$0.key })
        let seen = running.withLock { $0 }
        #expect(seen.now == 0)
        #expect(seen.most <= lanes, "\(seen.most) groups at once with \(lanes) lane(s)")
        if lanes > 1 { #expect(seen.most > 1, "the lanes were never used together") }
        #expect(seen.batches < 200, "no group formed")
    }

    @Test("idle() returns once every submitted item is written, and at once when nothing runs")
    func groupCommitIdle() async throws {
        let written = Mutex(0)
        let started = StartedTasks()
        let commit = GroupCommit<Int, Int>(maxBatch: 8) { items in
            try await Task.sleep(for: .milliseconds(10))
            written.withLock { $0 += items.count }
            return items
        }
        await commit.idle()  // nothing submitted: returns at once
        // Submitted by unstructured tasks that nobody awaits, as a request whose client left.
        for i in 0..<40 {
            Task {
                started.count.withLock { $0 += 1 }
                _ = try? await commit.submit(i)
            }
        }
        while started.count.withLock({ $0 }) < 40 { try await Task.sleep(for: .milliseconds(1)) }
        try await Task.sleep(for: .milliseconds(2))  // each task is inside submit now
        #expect(written.withLock { $0 } < 40, "the items were written before idle() was called")
        await commit.idle()
        #expect(written.withLock { $0 } == 40)
        await commit.idle()
    }

    @Test("a failing item fails only its own caller")
    func groupCommitIsolatesFailures() async throws {
        let commit = GroupCommit<Int, Int>(maxBatch: 64) { items in
            try await Task.sleep(for: .milliseconds(2))
            if items.contains(13) { throw Bad.item }
            return items
        }
        // Each task yields its item when written, or -(item + 1) when its write failed.
        let outcomes = await withTaskGroup(of: Int.self) { group in
            for i in 0..<100 {
                group.addTask { (try? await commit.submit(i)) == i ? i : -i - 1 }
            }
            var out: [Int] = []
            for await value in group { out.append(value) }
            return out
        }
        #expect(outcomes.filter { $0 < 0 } == [-14])
        #expect(outcomes.filter { $0 >= 0 }.count == 99)
    }

    @Test("an unavailable backend fails a whole group at once, with no per-item retries")
    func groupCommitFailsGroupsWhenUnavailable() async throws {
        let writes = Mutex(0)
        let commit = GroupCommit<Int, Int>(maxBatch: 64) { items in
            writes.withLock { $0 += 1 }
            try await Task.sleep(for: .milliseconds(5))
            throw E3DBError(.storageUnavailable, "the database is down")
        }
        let failures = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<60 { group.addTask { (try? await commit.submit(i)) == nil } }
            var failures = 0
            for await failed in group where failed { failures += 1 }
            return failures
        }
        #expect(failures == 60)
        // Groups, not items: far fewer writes than submissions (a retry per item would make at least 60).
        #expect(writes.withLock { $0 } < 60)
    }

    @Test("a submitter cancelled while its item waits leaves the queue at once, unwritten; a later one is served")
    func groupCommitWaiterCancellation() async throws {
        let gate = AsyncStream<Void>.makeStream()
        let written = Mutex<[Int]>([])
        let commit = GroupCommit<Int, Int>(maxBatch: 64) { items in
            if items.contains(0) { for await _ in gate.stream { break } }
            written.withLock { $0 += items }
            return items
        }
        let holder = Task { try await commit.submit(0) }  // a lane is free: it writes alone, held by the gate
        #expect(try await AccessRulesTests.eventually { commit.snapshot.busy == 1 })
        let waiter = Task { try await commit.submit(1) }
        #expect(try await AccessRulesTests.eventually { commit.snapshot.queued == 1 })
        waiter.cancel()
        #expect(
            try await AccessRulesTests.eventually { commit.snapshot.queued == 0 }, "the cancelled submitter left")
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await commit.submit(3)
        }
        #expect(
            try await AccessRulesTests.eventually { early.isCancelled && commit.snapshot.queued == 0 },
            "a submitter cancelled before it queued is never queued")
        let later = Task { try await commit.submit(2) }
        #expect(try await AccessRulesTests.eventually { commit.snapshot.queued == 1 }, "only the later one waits")
        // Every outcome is awaited after the gate opens, so that a waiter that stayed fails this test, not hangs it.
        gate.continuation.yield()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(try await holder.value == 0)
        #expect(try await later.value == 2)
        await commit.idle()
        #expect(written.withLock { $0 } == [0, 2], "the cancelled items were never written")
        #expect(commit.snapshot.queued == 0 && commit.snapshot.busy == 0)
    }

    @Test("SQLite: concurrent inserts all land with distinct indexes; a duplicate id fails alone")
    func sqliteGroupedInserts() async throws {
        try await Self.withStorage { storage, _ in try await Self.checkGroupedInserts(storage) }
    }

    static func checkGroupedInserts(_ storage: SQLiteStorage) async throws {
        let rows = (0..<200).map { Self.row(plain: ["n": "\($0)"], data: ["f": "\($0)"], recSig: nil) }
        var duplicate = rows[0]
        duplicate.version = "dup"
        let all = rows + [duplicate]
        let stored = await withTaskGroup(of: RecordRow?.self) { group in
            for row in all { group.addTask { try? await storage.insertRecord(row) } }
            var out: [RecordRow] = []
            for await r in group { if let r { out.append(r) } }
            return out
        }
        #expect(stored.count == 200)
        #expect(Set(stored.map(\.index)).count == 200)
        #expect(stored.allSatisfy { $0.index > 0 })
        for row in rows {
            let read = try await storage.record(id: row.recordID)
            #expect(read?.plainJSON == row.plainJSON)
        }
        #expect(try await storage.statistics()["records"] == 200)
    }

    @Test("the token cache honours the token's expiry and its own lifetime")
    func tokenCacheExpiry() throws {
        let cache = BearerTokenCache(lifetime: 100, capacity: 2)
        let client = ClientRow(
            clientID: .random(), name: "c", publicKey: "k", signingKey: nil, apiKeyID: "id",
            apiSecretHash: Data(), registrationTokenHash: Data(), created: 0)
        let a = Data(repeating: 1, count: 32)
        let b = Data(repeating: 2, count: 32)
        let c = Data(repeating: 3, count: 32)
        cache.insert(hash: a, client: client, tokenExpires: 1_050, now: 1_000)
        #expect(cache.client(hash: a, now: 1_049) == client)
        #expect(cache.client(hash: a, now: 1_050) == nil)
        cache.insert(hash: b, client: client, tokenExpires: 10_000, now: 1_000)
        #expect(cache.client(hash: b, now: 1_099) == client)
        #expect(cache.client(hash: b, now: 1_100) == nil)
        cache.insert(hash: a, client: client, tokenExpires: 999, now: 1_000)
        #expect(cache.client(hash: a, now: 1_000) == nil)
        cache.insert(hash: a, client: client, tokenExpires: 10_000, now: 1_000)
        cache.insert(hash: b, client: client, tokenExpires: 10_000, now: 1_000)
        cache.insert(hash: c, client: client, tokenExpires: 10_000, now: 1_000)
        #expect(cache.client(hash: c, now: 1_001) == client)
        #expect(cache.client(hash: a, now: 1_001) == nil, "a full cache starts over")
    }
}

/// How many unstructured tasks have started (shared with them).
private final class StartedTasks: Sendable {
    let count = Mutex(0)
}
