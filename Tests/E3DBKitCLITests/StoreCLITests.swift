import E3DBKit
import E3DBTestSupport
import Foundation
import GRDB
import Testing

/// `e3dbkit store`: every command through the binary, with its failure exits.
@Suite("CLI: e3dbkit store")
struct StoreCLITests {
    let dir: URL
    let passphrase: String
    let store: String

    init() throws {
        dir = try CLIRunner.temporaryDirectory()
        passphrase = dir.appendingPathComponent("pass").path
        try Data("correct horse battery\n".utf8).write(to: URL(fileURLWithPath: passphrase))
        store = dir.appendingPathComponent("store").path
    }

    func run(_ arguments: [String], stdin: Data? = nil) async throws -> CLIRunner.Result {
        try await CLIRunner.run(arguments, stdin: stdin)
    }

    func storeRun(_ command: String, _ arguments: [String], passphrase: String? = nil, stdin: Data? = nil) async throws
        -> CLIRunner.Result
    {
        try await run(
            ["store", command, "--store", store, "--passphrase-file", passphrase ?? self.passphrase] + arguments,
            stdin: stdin)
    }

    func json(_ result: CLIRunner.Result) throws -> JSONValue {
        try CanonicalJSON.parse(result.stdout)
    }

    func file(_ name: String, _ text: String) throws -> String {
        let path = dir.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("init, put, get, find, ndjson, delete with versions; a wrong passphrase exits 77")
    func records() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let created = try await storeRun("init", ["--kdf", "interactive"])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try json(created)["kdf"] == .string("argon2id-interactive"))
        #expect(try json(created)["database"] == .string("encrypted"))
        #expect(try await storeRun("init", ["--kdf", "interactive"]).status == 64)

        let data = try file("d.json", #"{"name":"Ada","ssn":"078-05-1120"}"#)
        let plain = try file("p.json", #"{"team":"blue"}"#)
        let put = try await storeRun("put", ["--collection", "people", "--type", "person", "--plain", plain, data])
        #expect(put.status == 0, "\(put.stderr)")
        guard case .string(let id) = try json(put)["id"] ?? .null else {
            Issue.record("no id")
            return
        }
        #expect(try json(put)["version"] == .number(1))

        let got = try await storeRun("get", ["--collection", "people", id])
        #expect(got.status == 0, "\(got.stderr)")
        #expect(try json(got)["data"] == .object(["name": "Ada", "ssn": "078-05-1120"]))
        #expect(try json(got)["meta"]?["plain"] == .object(["team": "blue"]))
        #expect(try json(got)["meta"]?["type"] == .string("person"))
        #expect(try json(got)["meta"]?["record_id"] == .string(id))

        let batch = try await storeRun(
            "put", ["--collection", "people", "--ndjson", "-"], stdin: Data("{\"n\":\"1\"}\r\n\n{\"n\":\"2\"}\n".utf8))
        #expect(batch.status == 0, "\(batch.stderr)")
        #expect(batch.stdoutText.split(separator: "\n").count == 2)
        let badBatch = try await storeRun(
            "put", ["--collection", "people", "--ndjson", "-"], stdin: Data("{\"n\":\"3\"}\n{\"n\":4}\n".utf8))
        #expect(badBatch.status == 65)
        #expect(badBatch.stderr.contains("line 2"))

        let all = try await storeRun("find", ["--collection", "people"])
        #expect(all.stdoutText.split(separator: "\n").count == 3, "a failed batch stores nothing")
        let byField = try await storeRun("find", ["--collection", "people", "--where", "n=2"])
        #expect(byField.stdoutText.split(separator: "\n").count == 1)
        #expect(byField.stdoutText.contains(#""n":"2""#))
        let indexed = try await storeRun("index", ["--collection", "people", "--field", "n", "--bits", "8"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        #expect(try json(indexed) == .object(["bits": .number(8), "name": .string("n"), "records": .number(3)]))
        #expect(try await storeRun("index", ["--collection", "people", "--field", "n"]).status == 64)
        #expect(try await storeRun("index", ["--collection", "people", "--field", "n", "--bits", "300"]).status == 64)
        let byIndex = try await storeRun("find", ["--collection", "people", "--where", "n=1"])
        #expect(byIndex.stdoutText.split(separator: "\n").count == 1)
        #expect(byIndex.stdoutText.contains(#""n":"1""#))
        let byPlain = try await storeRun("find", ["--collection", "people", "--plain", "team=blue"])
        #expect(byPlain.stdoutText.split(separator: "\n").count == 1)
        #expect(try await storeRun("find", ["--collection", "people", "--where", "novalue"]).status == 64)

        let wrong = try file("wrong", "wrong horse")
        let denied = try await storeRun("get", ["--collection", "people", id], passphrase: wrong)
        #expect(denied.status == 77)
        #expect(denied.stdout.isEmpty)
        #expect(try await storeRun("get", ["--collection", "people", "not-a-uuid"]).status == 64)
        #expect(try await storeRun("get", ["--collection", "people", UUID().uuidString]).status == 64)

        #expect(try await storeRun("delete", ["--collection", "people", "--version", "2", id]).status == 64)
        #expect(try await storeRun("delete", ["--collection", "people", "--version", "1", id]).status == 0)
        #expect(try await storeRun("get", ["--collection", "people", id]).status == 64)
        #expect(
            try await run(["store", "get", "--store", store, "--collection", "people", id], stdin: Data()).status == 64,
            "no passphrase source and no terminal")
    }

    @Test("passwd, export for a reader, import, verify reports a tampered record by id (exit 2), stats")
    func keysSharingAndVerify() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        // A plain database file, so that the test can edit a record row with SQL below.
        let created = try await storeRun("init", ["--kdf", "interactive", "--plain-database"])
        #expect(try json(created)["database"] == .string("plain"))
        let data = try file("d.json", #"{"secret":"s1"}"#)
        var ids: [String] = []
        for _ in 0..<3 {
            let put = try await storeRun("put", ["--collection", "c", data])
            if case .string(let id) = try json(put)["id"] ?? .null { ids.append(id) }
        }
        #expect(ids.count == 3)
        let newPass = try file("new", "new passphrase")
        #expect(try await storeRun("passwd", ["--new-passphrase-file", newPass, "--kdf", "interactive"]).status == 0)
        #expect(try await storeRun("stats", []).status == 77)
        let stats = try await storeRun("stats", [], passphrase: newPass)
        #expect(try json(stats)["collections"] == .object(["c": .number(3)]))
        #expect(try json(stats)["database"] == .string("plain"))

        let reader = dir.appendingPathComponent("reader.json").path
        #expect(try await run(["keygen", "--out", reader, "--client-id", UUID().uuidString]).status == 0)
        let exportDir = dir.appendingPathComponent("export").path
        let exported = try await storeRun(
            "export", ["--collection", "c", "--reader-identity", reader, "--out", exportDir], passphrase: newPass)
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(try json(exported)["records"] == .number(3))
        // The exported key opens with the reader's identity through the ordinary commands.
        let ak = try await run(["eak", "unwrap", "--identity", reader, exportDir + "/eak.json"])
        #expect(ak.status == 0, "\(ak.stderr)")
        let imported = try await storeRun(
            "import", ["--identity", reader, "--collection", "copy", exportDir], passphrase: newPass)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdoutText.split(separator: "\n").count == 3)

        #expect(try await storeRun("verify", [], passphrase: newPass).status == 0)
        let database = try DatabaseQueue(path: store + "/store.sqlite")
        let tampered = ids[1]
        try await database.write { db in
            try db.execute(sql: "UPDATE records SET version = version + 1 WHERE id = ?", arguments: [tampered])
        }
        let verified = try await storeRun("verify", [], passphrase: newPass)
        #expect(verified.status == 2)
        #expect(verified.stderr.contains(ids[1]))
        #expect(verified.stderr.contains("recordTampered"))
        // The tampered record no longer counts among the collection's authenticated records.
        #expect(verified.stderr.contains("c: storeTampered"), "\(verified.stderr)")
        #expect(try json(verified)["problems"] == .number(2))
        #expect(try await storeRun("get", ["--collection", "c", ids[1]], passphrase: newPass).status == 2)
    }
}

extension StoreCLITests {
    @Test(
        "an edited type column: find --type exits 2 naming the record, verify exits 2; a damaged page exits 65, verify reports it and goes on"
    )
    func tamperingAndCorruption() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        // A plain database file: the test edits it with SQL (encryptedFileDamage below for the encrypted file).
        #expect(try await storeRun("init", ["--kdf", "interactive", "--plain-database"]).status == 0)
        let filler = String(repeating: "x", count: 300)
        let lines = (0..<400).map { "{\"n\":\"\($0)\",\"f\":\"\(filler)\"}" }.joined(separator: "\n")
        let put = try await storeRun(
            "put", ["--collection", "c", "--type", "note", "--ndjson", "-"], stdin: Data(lines.utf8))
        #expect(put.status == 0, "\(put.stderr)")
        let ids = put.stdoutText.split(separator: "\n").compactMap { line -> String? in
            if case .string(let id) = try? CanonicalJSON.parse(Data(line.utf8))["id"] ?? .null { return id }
            return nil
        }
        #expect(ids.count == 400)
        let database = store + "/store.sqlite"
        try await DatabaseQueue(path: database).write { db in
            try db.execute(sql: "UPDATE records SET type = 'memo' WHERE id = ?", arguments: [ids[0]])
        }
        let found = try await storeRun("find", ["--collection", "c", "--type", "memo"])
        #expect(found.status == 2, "\(found.stderr)")
        #expect(found.stderr.contains(ids[0]) && found.stderr.contains("type column was edited"), "\(found.stderr)")
        let verified = try await storeRun("verify", [])
        #expect(verified.status == 2)
        #expect(verified.stderr.contains(ids[0]), "\(verified.stderr)")
        try await DatabaseQueue(path: database).write { db in
            try db.execute(sql: "UPDATE records SET type = 'note' WHERE id = ?", arguments: [ids[0]])
        }
        #expect(try await storeRun("verify", []).status == 0)

        // A zeroed leaf page of the records table, in the middle of the collection.
        let (page, pageSize) = try await DatabaseQueue(path: database).writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            let pages = try Int.fetchAll(
                db, sql: "SELECT pageno FROM dbstat WHERE name = 'records' AND pagetype = 'leaf' ORDER BY pageno")
            return (pages[pages.count / 2], try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096)
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: database))
        try handle.seek(toOffset: UInt64((page - 1) * pageSize))
        try handle.write(contentsOf: Data(count: pageSize))
        try handle.close()
        let listed = try await storeRun("find", ["--collection", "c"])
        #expect(listed.status == 65, "\(listed.stderr)")
        #expect(listed.stderr.contains("damaged"), "\(listed.stderr)")
        let damaged = try await storeRun("verify", [])
        #expect(damaged.status == 65, "\(damaged.stderr)")
        #expect(damaged.stderr.contains("storeCorrupted"), "\(damaged.stderr)")
        guard case .number(let checked) = try json(damaged)["checked"] ?? .null else {
            Issue.record("no count: \(damaged.stdoutText)")
            return
        }
        #expect(checked > 350 && checked < 400, "verify went on past the damaged page")
    }
}

extension StoreCLITests {
    @Test("rekey: a new master key under a new passphrase; the old passphrase no longer opens; verify is clean")
    func rekey() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", ["--kdf", "interactive"]).status == 0)
        let data = try file("d.json", #"{"name":"Ada"}"#)
        let put = try await storeRun("put", ["--collection", "people", "--type", "person", data])
        guard case .string(let id) = try json(put)["id"] ?? .null else {
            Issue.record("no id: \(put.stderr)")
            return
        }
        let newPassphrase = try file("new", "a new passphrase")
        let keyFile = try file("key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        #expect(
            try await storeRun("rekey", ["--new-passphrase-file", newPassphrase, "--new-key-file", keyFile]).status
                == 64)
        let rekeyed = try await storeRun("rekey", ["--new-passphrase-file", newPassphrase])
        #expect(rekeyed.status == 0, "\(rekeyed.stderr)")
        #expect(try json(rekeyed)["records"] == .number(1))
        #expect(try json(rekeyed)["resumed"] == .bool(false))
        #expect(rekeyed.stderr.contains("rekey: 1/1"))
        #expect(try await storeRun("get", ["--collection", "people", id]).status == 77)
        let got = try await storeRun("get", ["--collection", "people", id], passphrase: newPassphrase)
        #expect(got.status == 0, "\(got.stderr)")
        #expect(try json(got)["data"] == .object(["name": .string("Ada")]))
        #expect(try await storeRun("verify", [], passphrase: newPassphrase).status == 0)
        // One database file is left: the one the key header names (the old one and its journals are removed).
        let files = try FileManager.default.contentsOfDirectory(atPath: store).filter { $0.hasPrefix("store") }
        #expect(files.count == 1 && files[0] != "store.sqlite", "\(files)")
    }

    @Test(
        "an encrypted database file: SQL cannot read or edit it without the key; a changed byte exits 65, verify names the page and goes on"
    )
    func encryptedFileDamage() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", ["--kdf", "interactive"]).status == 0)
        let filler = String(repeating: "x", count: 300)
        let lines = (0..<400).map { "{\"n\":\"\($0)\",\"f\":\"\(filler)\"}" }.joined(separator: "\n")
        let put = try await storeRun(
            "put", ["--collection", "c", "--type", "note", "--ndjson", "-"], stdin: Data(lines.utf8))
        #expect(put.status == 0, "\(put.stderr)")
        let stats = try await storeRun("stats", [])
        #expect(try json(stats)["database"] == .string("encrypted"))
        let verified = try await storeRun("verify", [])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try json(verified)["database"] == .string("encrypted"))
        // SQLite without the key does not read the file, so it cannot edit a query table.
        let database = store + "/store.sqlite"
        await #expect(throws: DatabaseError.self) {
            try await DatabaseQueue(path: database).read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM records")
            }
        }
        // One byte changed in a page in the middle of the file (the process closed it: no WAL is left).
        let size = try FileManager.default.attributesOfItem(atPath: database)[.size] as? Int ?? 0
        #expect(size > 40 * 4096)
        let page = size / 4096 / 2
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: database))
        let offset = UInt64((page - 1) * 4096 + 200)
        try handle.seek(toOffset: offset)
        let byte = try handle.read(upToCount: 1)?.first ?? 0
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data([byte ^ 0x80]))
        try handle.close()
        let damaged = try await storeRun("verify", [])
        #expect(damaged.status == 65, "\(damaged.stderr)")
        #expect(damaged.stderr.contains("pages that did not authenticate: \(page)"), "\(damaged.stderr)")
    }
}

/// `kill -9` at random moments of bulk inserts, index builds and passphrase changes: the store always opens
/// afterwards, every committed transaction is whole, nothing half-written is visible.
@Suite("CLI: e3dbkit store survives kill -9")
struct StoreCrashTests {
    /// Starts `e3dbkit` with `arguments` and stdin from `input`, kills it with SIGKILL after `delay` seconds
    /// (if it is still running) and returns whether it had finished by itself.
    static func runAndKill(_ arguments: [String], input: URL, delay: Double) async throws -> Bool {
        let process = try CLIRunner.start(arguments, stdin: try Data(contentsOf: input), reading: nil)
        let killed = await process.signal(SIGKILL, after: .seconds(delay))
        try await process.exit()
        return !killed
    }

    /// A new directory with passphrase files `a` and `b`, and a store in it created under `a`.
    static func storeWithTwoPassphrases(init extra: [String] = []) async throws -> (
        dir: URL, store: String, a: URL, b: URL
    ) {
        let dir = try CLIRunner.temporaryDirectory()
        let store = dir.appendingPathComponent("store").path
        let passA = dir.appendingPathComponent("a")
        let passB = dir.appendingPathComponent("b")
        try Data("passphrase A".utf8).write(to: passA)
        try Data("passphrase B".utf8).write(to: passB)
        #expect(
            try await CLIRunner.run(
                [
                    "store", "init", "--store", store, "--passphrase-file", passA.path, "--kdf", "interactive",
                ] + extra
            ).status == 0)
        return (dir, store, passA, passB)
    }

    /// Checks that exactly one of the two passphrases opens the store, makes it `current`, and returns its
    /// `store stats`.
    static func exactlyOneOpens(_ store: String, _ current: inout URL, _ other: inout URL, _ label: String)
        async throws -> CLIRunner.Result
    {
        let withCurrent = try await CLIRunner.run([
            "store", "stats", "--store", store, "--passphrase-file", current.path,
        ])
        let withOther = try await CLIRunner.run([
            "store", "stats", "--store", store, "--passphrase-file", other.path,
        ])
        #expect(
            (withCurrent.status == 0) != (withOther.status == 0), "\(label): \(withCurrent.stderr) \(withOther.stderr)")
        if withOther.status == 0 { swap(&current, &other) }
        return withCurrent.status == 0 ? withCurrent : withOther
    }

    @Test("bulk inserts, index builds and passphrase changes killed at random points")
    func killNine() async throws {
        let (dir, store, passA, passB) = try await Self.storeWithTwoPassphrases()
        defer { try? FileManager.default.removeItem(at: dir) }
        let batchSize = 2000
        var lines = ""
        for i in 0..<batchSize { lines += "{\"n\":\"\(i)\",\"v\":\"value \(i) \(UUID().uuidString)\"}\n" }
        let input = dir.appendingPathComponent("batch.ndjson")
        try Data(lines.utf8).write(to: input)
        let empty = dir.appendingPathComponent("empty")
        try Data().write(to: empty)

        var generator = SystemRandomNumberGenerator()
        var current = passA
        var other = passB
        var killed = 0
        var finished = 0
        for round in 0..<16 {
            let delay = Double.random(in: 0.02...0.6, using: &generator)
            let arguments: [String]
            switch round % 4 {
            case 0, 1:
                arguments = [
                    "store", "put", "--store", store, "--passphrase-file", current.path, "--collection", "bulk",
                    "--ndjson", "-",
                ]
            case 2:
                arguments = [
                    "store", "passwd", "--store", store, "--passphrase-file", current.path,
                    "--new-passphrase-file", other.path, "--kdf", "interactive",
                ]
            default:
                arguments = [
                    "store", "rotate", "-q", "--store", store, "--passphrase-file", current.path, "--collection",
                    "bulk",
                ]
            }
            if try await Self.runAndKill(arguments, input: round % 4 < 2 ? input : empty, delay: delay) {
                finished += 1
            } else {
                killed += 1
            }

            let stats = try await Self.exactlyOneOpens(store, &current, &other, "round \(round)")
            let count: Int
            if case .object(let collections)? = try CanonicalJSON.parse(stats.stdout)["collections"],
                case .number(let n)? = collections["bulk"]
            {
                count = Int(n)
            } else {
                count = 0
            }
            #expect(count % batchSize == 0, "round \(round): \(count) records is not a whole number of batches")
        }
        let verify = try await CLIRunner.run(["store", "verify", "--store", store, "--passphrase-file", current.path])
        #expect(verify.status == 0, "\(verify.stderr)")
        // An interrupted rotation finishes when run again.
        let rotated = try await CLIRunner.run([
            "store", "rotate", "-q", "--store", store, "--passphrase-file", current.path, "--collection", "bulk",
        ])
        #expect(rotated.status == 0 || rotated.stderr.contains("no collection"), "\(rotated.stderr)")
        #expect(
            try await CLIRunner.run(["store", "verify", "--store", store, "--passphrase-file", current.path]).status
                == 0)
        #expect(killed > 0, "no run was killed mid-way (finished: \(finished))")
        let indexed = try await CLIRunner.run([
            "store", "index", "--store", store, "--passphrase-file", current.path,
            "--collection", "bulk", "--field", "n",
        ])
        #expect(indexed.status == 0 || indexed.stderr.contains("no collection"), "\(indexed.stderr)")
    }

    @Test(
        "store rekey killed after 1, 10 and every batch: the next open sees the old or the new store, whole",
        arguments: [[], ["--plain-database"]])
    func rekeyKillNine(initOptions: [String]) async throws {
        let (dir, store, passA, passB) = try await Self.storeWithTwoPassphrases(init: initOptions)
        defer { try? FileManager.default.removeItem(at: dir) }
        let count = 3000
        var lines = ""
        for i in 0..<count { lines += "{\"n\":\"\(i)\",\"v\":\"value \(i)\"}\n" }
        let put = try await CLIRunner.run(
            [
                "store", "put", "--store", store, "--passphrase-file", passA.path, "--collection", "bulk", "--ndjson",
                "-",
            ],
            stdin: Data(lines.utf8))
        #expect(put.status == 0, "\(put.stderr)")
        var current = passA
        var other = passB
        var killed = 0
        // Killed once the child has reported this many batches of 100 (30 is all: then it is finishing or swapping).
        for batches in [1, 10, 30, 30] {
            let process = try CLIRunner.start(
                [
                    "store", "rekey", "--store", store, "--passphrase-file", current.path, "--new-passphrase-file",
                    other.path, "--kdf", "interactive", "--batch-size", "100",
                ], reading: .standardError)
            _ = try await process.readOutput { seen in
                String(decoding: seen, as: UTF8.self).components(separatedBy: "rekey: ").count > batches
            }
            process.signal(SIGKILL)
            try await process.exit()
            if process.uncaughtSignal { killed += 1 }

            // Exactly one of the passphrases opens the store, with every record.
            let stats = try await Self.exactlyOneOpens(store, &current, &other, "after \(batches) batches")
            #expect(
                try CanonicalJSON.parse(stats.stdout)["collections"] == .object(["bulk": .number(Double(count))]),
                "after \(batches) batches: \(stats.stdoutText)")
            let verify = try await CLIRunner.run([
                "store", "verify", "--store", store, "--passphrase-file", current.path,
            ])
            #expect(verify.status == 0, "\(verify.stderr)")
        }
        #expect(killed > 0, "no rekey was killed mid-way")
        let finished = try await CLIRunner.run([
            "store", "rekey", "-q", "--store", store, "--passphrase-file", current.path, "--new-passphrase-file",
            other.path, "--kdf", "interactive",
        ])
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(
            try await CLIRunner.run(["store", "stats", "--store", store, "--passphrase-file", current.path]).status
                == 77)
        let verify = try await CLIRunner.run(["store", "verify", "--store", store, "--passphrase-file", other.path])
        #expect(verify.status == 0, "\(verify.stderr)")
        // One database file is left (the one the key header names): no copy, no old file, no journal.
        let files = try FileManager.default.contentsOfDirectory(atPath: store).filter { $0.hasPrefix("store") }
        #expect(files.count == 1 && files[0].hasPrefix("store-"), "\(files)")
    }
}

extension StoreCLITests {
    @Test(
        "update keeps type and plain unless told and refuses a stale version; keyed put, get, delete; settings set, get, list, remove"
    )
    func updateAndSettings() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", ["--kdf", "interactive"]).status == 0)
        let put = try await storeRun(
            "put", ["--collection", "c", "--type", "note", "--plain", try file("p.json", #"{"day":"mon"}"#), "-"],
            stdin: Data(#"{"body":"one"}"#.utf8))
        guard case .string(let id) = try json(put)["id"] ?? .null else {
            Issue.record("no id: \(put.stderr)")
            return
        }
        let updated = try await storeRun(
            "update", ["--collection", "c", "--version", "1", id, "-"], stdin: Data(#"{"body":"two"}"#.utf8))
        #expect(updated.status == 0, "\(updated.stderr)")
        #expect(try json(updated) == .object(["id": .string(id), "version": .number(2)]))
        let got = try json(try await storeRun("get", ["--collection", "c", id]))
        #expect(got["data"] == .object(["body": "two"]))
        #expect(got["meta"]?["type"] == .string("note"))
        #expect(got["meta"]?["plain"] == .object(["day": "mon"]))

        let stale = try await storeRun(
            "update", ["--collection", "c", "--version", "1", id, "-"], stdin: Data(#"{"body":"lost"}"#.utf8))
        #expect(stale.status == 64)
        #expect(stale.stderr.contains("version"))
        let retyped = try await storeRun(
            "update",
            ["--collection", "c", "--version", "2", "--type", "memo", "--plain", try file("q.json", "{}"), id, "-"],
            stdin: Data(#"{"body":"three"}"#.utf8))
        #expect(retyped.status == 0, "\(retyped.stderr)")
        let again = try json(try await storeRun("get", ["--collection", "c", id]))
        #expect(again["meta"]?["type"] == .string("memo"))
        #expect(again["meta"]?["plain"] == .object([:]))
        #expect(again["data"] == .object(["body": "three"]))
        #expect(
            try await storeRun(
                "update", ["--collection", "c", "--version", "1", UUID().uuidString, "-"], stdin: Data("{}".utf8)
            )
            .status == 64)

        // Keyed records: put --key creates, then replaces; get and delete by key.
        let keyed = try await storeRun(
            "put", ["--collection", "kv", "--key", "theme", "-"], stdin: Data(#"{"v":"dark"}"#.utf8))
        #expect(keyed.status == 0, "\(keyed.stderr)")
        let replaced = try await storeRun(
            "put", ["--collection", "kv", "--key", "theme", "-"], stdin: Data(#"{"v":"light"}"#.utf8))
        #expect(try json(replaced)["version"] == .number(2))
        #expect(try json(replaced)["id"] == (try json(keyed)["id"]))
        let byKey = try await storeRun("get", ["--collection", "kv", "--key", "theme"])
        #expect(try json(byKey)["data"] == .object(["v": "light"]), "\(byKey.stderr)")
        #expect(try await storeRun("get", ["--collection", "kv", "--key", "theme", id]).status == 64)
        #expect(
            try await storeRun("put", ["--collection", "kv", "--key", "t", "--ndjson", "-"], stdin: Data()).status == 64
        )
        #expect(try await storeRun("delete", ["--collection", "kv", "--key", "theme"]).status == 0)
        #expect(try await storeRun("get", ["--collection", "kv", "--key", "theme"]).status == 64)

        let value = #"{"theme":"dark","sizes":[12,14],"beta":true}"#
        let set = try await run(
            ["store", "setting", "set", "--store", store, "--passphrase-file", passphrase, "ui", "-"],
            stdin: Data(value.utf8))
        #expect(set.status == 0, "\(set.stderr)")
        func setting(_ arguments: [String], stdin: Data? = nil) async throws -> CLIRunner.Result {
            try await run(
                ["store", "setting"] + [arguments[0], "--store", store, "--passphrase-file", passphrase]
                    + arguments.dropFirst(), stdin: stdin)
        }
        let read = try await setting(["get", "ui"])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(try json(read) == (try CanonicalJSON.parse(Array(value.utf8))))
        #expect(try await setting(["set", "limit", "-"], stdin: Data("42".utf8)).status == 0)
        #expect(try await setting(["list"]).stdoutText == "limit\nui\n")
        #expect(try await setting(["set", "broken", "-"], stdin: Data("{".utf8)).status == 65)
        #expect(try await setting(["get", "missing"]).status == 64)
        #expect(try await setting(["remove", "ui"]).status == 0)
        #expect(try await setting(["get", "ui"]).status == 64)
        #expect(try await setting(["list"]).stdoutText == "limit\n")
    }
}
