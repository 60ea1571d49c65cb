import E3DBKit
import E3DBTestSupport
import Foundation
import GRDB
import Testing

@testable import E3DBStore

@Suite("E3DBStore: the fast read path gives what the general code gives")
struct ReadPathTests {
    @Test("the binding MAC's place is byte for byte the canonical JSON array, escapes and large numbers included")
    func placeMatchesCanonicalJSON() {
        let strings = [
            "", "notes", "quote \" and backslash \\", "tab\tnewline\n\u{01}", "naïve ☃ \u{1F600}", "a/b<c>&",
            "2026-11-25T12:15:00.123Z", "\u{7F}\u{80}",
        ]
        let numbers = [0, 1, -1, 42, 1 << 52, (1 << 53) - 1, 1 << 53, -(1 << 53), Int.max, Int.min]
        for collection in strings {
            for (i, version) in numbers.enumerated() {
                let created = strings[i % strings.count]
                let keyVersion = numbers[(i + 3) % numbers.count]
                let fast = BindingPlace.bytes(
                    storeID: "7d444840-9dc0-11d1-b245-5ffdce74fad2", collection: collection,
                    id: "0f8fad5b-d9cb-469f-a165-70867728950e", version: version, keyVersion: keyVersion,
                    created: created, updated: collection)
                let reference = CanonicalJSON.serializedBytes(
                    .array([
                        .string("E3DBStore record v1"), .string("7d444840-9dc0-11d1-b245-5ffdce74fad2"),
                        .string(collection),
                        .string("0f8fad5b-d9cb-469f-a165-70867728950e"), .number(Double(version)),
                        .number(Double(keyVersion)),
                        .string(created), .string(collection),
                    ]))
                #expect(fast == reference, "\(collection) \(version) \(keyVersion)")
            }
        }
    }

    @Test("stored documents scan to what the general parser gives; other shapes are left to it")
    func documentScanner() throws {
        let writer = UUID()
        let access = AccessKey()
        let plainSets: [RecordData] = [[:], ["k": "v", "é": "naïve ☃"]]
        for plain in plainSets {
            for data in [RecordData(), ["a": "1", "b": "", "c": "\u{1F600}"] as RecordData] {
                for signature in [nil, "sig-text"] as [String?] {
                    let document = EncryptedDocument(
                        meta: ClientMeta(writerID: writer, userID: UUID(), type: "t ☃", plain: plain),
                        data: FieldCipher.encrypt(data, accessKey: access), recordSignature: signature)
                    let bytes = document.jsonData()
                    let scanned = try #require(
                        StoredDocumentScanner.document(bytes), "\(String(decoding: bytes, as: UTF8.self))")
                    #expect(scanned == (try EncryptedDocument(jsonData: bytes)))
                    #expect(scanned.recordSignature == signature)
                }
            }
        }
        for other in [
            #"{"data":{},"meta":{"plain":{},"type":"t","user_id":"0f8fad5b-d9cb-469f-a165-70867728950e","writer_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}} "#,
            #"{"data":{"a":"x\u0041"},"meta":{"plain":{},"type":"t","user_id":"0f8fad5b-d9cb-469f-a165-70867728950e","writer_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}}"#,
            #"{"data":{"a":"1","a":"2"},"meta":{"plain":{},"type":"t","user_id":"0f8fad5b-d9cb-469f-a165-70867728950e","writer_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}}"#,
            #"{"data":{"a":1},"meta":{"plain":{},"type":"t","user_id":"0f8fad5b-d9cb-469f-a165-70867728950e","writer_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}}"#,
            #"{"data":{},"meta":{"plain":{},"type":"t","user_id":"not-a-uuid","writer_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}}"#,
            #"{"meta":{"plain":{},"type":"t","user_id":"0f8fad5b-d9cb-469f-a165-70867728950e","writer_id":"0f8fad5b-d9cb-469f-a165-70867728950e"},"data":{}}"#,
            #"{"data":{},"meta":{"plain":{},"type":"t","user_id":"0f8fad5b-d9cb-469f-a165-70867728950e","writer_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}"#,
        ] {
            #expect(StoredDocumentScanner.document(Data(other.utf8)) == nil, "\(other)")
        }
        var invalid = Data(#"{"data":{"a":""#.utf8)
        invalid.append(contentsOf: [0xC3, 0x28])
        invalid.append(
            contentsOf: Data(
                #""},"meta":{"plain":{},"type":"t","user_id":"0f8fad5b-d9cb-469f-a165-70867728950e","writer_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}}"#
                    .utf8))
        #expect(StoredDocumentScanner.document(invalid) == nil)
        // Every truncation and every single-byte change of a stored document: the scanner gives nil or exactly what
        // the general parser gives (the fast path never reads a document differently from the one parser).
        let document = EncryptedDocument(
            meta: ClientMeta(writerID: writer, userID: UUID(), type: "t", plain: ["p": "é"]),
            data: FieldCipher.encrypt(["a": "1"], accessKey: access), recordSignature: "s")
        let bytes = Array(document.jsonData())
        var variants = (0..<bytes.count).map { Array(bytes[0..<$0]) }
        for i in bytes.indices {
            for replacement: UInt8 in [0x22, 0x5C, 0x7B, 0x7D, 0x2C, 0x3A, 0x20, 0x00, 0xC3, 0x31]
            where bytes[i] != replacement {
                var changed = bytes
                changed[i] = replacement
                variants.append(changed)
            }
        }
        var scannedCount = 0
        for variant in variants {
            guard let scanned = StoredDocumentScanner.document(Data(variant)) else { continue }
            scannedCount += 1
            #expect(
                scanned == (try? EncryptedDocument(jsonData: Data(variant))),
                "\(String(decoding: variant, as: UTF8.self))")
        }
        // Some changes (inside a string) still scan; the check above ran on them.
        #expect(scannedCount > 0)
    }

    @Test("the store's timestamp text is byte for byte what Foundation's ISO 8601 formatter wrote for the same instant")
    func timestampFormatting() {
        var foundation = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        foundation.timeZone = TimeZone(identifier: "UTC") ?? .current
        // What the store formats: now (rounded to the millisecond), instants parsed back from its text, and any other.
        var dates = (0..<2000).map { _ in
            StoreTime.now().addingTimeInterval(Double(Int.random(in: -1_000_000...1_000_000)))
        }
        for _ in 0..<2000 {
            let milliseconds = Int64.random(in: -2_000_000_000_000...4_000_000_000_000)
            dates.append(Date(timeIntervalSince1970: Double(milliseconds) / 1000))
            dates.append(Date(timeIntervalSince1970: Double.random(in: -2e9...4e9)))
        }
        dates += [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.001), Date(timeIntervalSince1970: 0.0005),
            Date(timeIntervalSince1970: 951_868_799.999), Date(timeIntervalSince1970: 253_402_300_799.999),
        ]
        var mismatches: [String] = []
        for date in dates where StoreTime.format(date) != date.formatted(foundation) {
            mismatches.append("\(date.timeIntervalSince1970): \(StoreTime.format(date)) \(date.formatted(foundation))")
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) of \(dates.count): \(mismatches.prefix(5))")
    }

    @Test("timestamps in the store's form parse to the same instant as Foundation's parser gives; others fall back")
    func timestampParsing() throws {
        var samples = [
            "1970-01-01T00:00:00.000Z", "2000-02-29T23:59:59.999Z", "2026-11-25T12:15:00.123Z",
            "1969-12-31T23:59:59.999Z",
            "2100-12-31T00:00:00.001Z", "1900-03-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z",
        ]
        for _ in 0..<200 {
            samples.append(
                StoreTime.format(Date(timeIntervalSince1970: Double.random(in: -2e12...4e12).rounded() / 1000)))
        }
        for text in samples {
            #expect(StoreTime.milliseconds(text) != nil, "\(text)")
            let reference = try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
            let parsed = try #require(StoreTime.parse(text))
            #expect(
                parsed == reference,
                "\(text): \(parsed.timeIntervalSinceReferenceDate) \(reference.timeIntervalSinceReferenceDate)")
            #expect(StoreTime.format(parsed) == StoreTime.format(reference))
        }
        for other in [
            "2026-02-30T00:00:00.000Z", "2026-02-29T00:00:00.000Z", "2026-04-31T00:00:00.000Z",
            "2026-01-00T00:00:00.000Z", "2026-11-25T12:15:00Z", "2026-11-25T12:15:00.123+00:00",
            "2026-13-01T00:00:00.000Z", "x",
        ] {
            #expect(StoreTime.milliseconds(other) == nil, "\(other)")
        }
        // Foundation still reads what the fast path leaves to it, but not a date that does not exist (which it would
        // move into the next month).
        #expect(StoreTime.parse("2026-11-25T12:15:00.5+01:00").map(StoreTime.format) == "2026-11-25T11:15:00.500Z")
        for impossible in ["2026-02-31T00:00:00.000Z", "2026-02-29T12:15:00.5+01:00", "2026-04-31T00:00:00.000+00:00"] {
            #expect(StoreTime.parse(impossible) == nil, "\(impossible)")
        }
    }

    @Test("one data key per record: fields share edk.edkN with distinct nonces, read back, and tampering is caught")
    func perRecordKeys() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        #expect(store.fieldKeyMode == .perField)
        let perField = try store.put(collection: "c", type: "t", data: ["a": "one", "b": "two", "c": "three"])
        store.fieldKeyMode = .perRecord
        let data: RecordData = [
            "a": "alpha", "b": "", "c": "naïve ☃ \u{1F600}", "d": String(repeating: "x", count: 5000),
        ]
        let shared = try store.put(collection: "c", type: "t", data: data, plain: ["k": "v"])
        var batch: [(type: String, data: RecordData, plain: RecordData)] = []
        for i in 0..<600 { batch.append(("t", ["n": "\(i)", "m": "value \(i)"], ["i": "\(i)"])) }
        let many = try store.put(collection: "c", records: batch)
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        func document(_ id: UUID) throws -> EncryptedDocument {
            let bytes = try raw.read { db in
                try Data.fetchOne(
                    db, sql: "SELECT document FROM records WHERE id = ?", arguments: [id.uuidString.lowercased()])
            }
            return try EncryptedDocument(jsonData: try #require(bytes))
        }
        func prefixes(_ document: EncryptedDocument) -> (keys: Set<String>, nonces: Set<String>) {
            var keys = Set<String>()
            var nonces = Set<String>()
            for (_, field) in document.data {
                let parts = field.split(separator: ".", omittingEmptySubsequences: false)
                keys.insert(String(parts[0]) + "." + String(parts[1]))
                nonces.insert(String(parts[3]))
            }
            return (keys, nonces)
        }
        let sharedParts = prefixes(try document(shared.id))
        #expect(sharedParts.keys.count == 1 && sharedParts.nonces.count == 4)
        #expect(prefixes(try document(perField.id)).keys.count == 3)
        #expect(prefixes(try document(many[599].id)).keys.count == 1)
        // Two records never share a data key.
        #expect(prefixes(try document(many[0].id)).keys != prefixes(try document(many[1].id)).keys)

        store.setCacheCapacity(0)
        #expect(try store.get(collection: "c", id: shared.id).data == data)
        #expect(try store.get(collection: "c", id: perField.id).data == ["a": "one", "b": "two", "c": "three"])
        #expect(try store.get(collection: "c", id: many[321].id).data == ["n": "321", "m": "value 321"])
        // The documents layer alone opens each field on its own, as the SDKs do.
        let access = try #require(try? store.accessKey(for: "c", create: false).key)
        for (key, field) in try document(shared.id).data {
            #expect(try FieldCipher.decrypt(field, accessKey: access, name: key) == data[key])
        }

        // A changed value of one field of a shared-key record is still caught by the field's own tag.
        var tampered = try document(shared.id)
        var parts = try #require(tampered.data["b"]).split(separator: ".").map(String.init)
        var ef = try Base64URL.decode(parts[2])
        ef[ef.count - 1] ^= 1
        parts[2] = Base64URL.encode(ef)
        tampered.data["b"] = parts.joined(separator: ".")
        do {
            _ = try tampered.decrypt(accessKey: access, verifyingKey: nil, verification: .init(policy: .ignore))
            Issue.record("an edited field of a shared-key record decrypted")
        } catch {
            #expect(error.code == .authenticationFailed && error.context.field == "b" && error.context.part == "ef")
        }
        // In the store, the binding MAC refuses the edited row first, naming the record.
        try raw.write { db in
            try db.execute(
                sql: "UPDATE records SET document = ? WHERE id = ?",
                arguments: [tampered.jsonData(), shared.id.uuidString.lowercased()])
        }
        expectStoreError(.recordTampered, item: shared.id.uuidString.lowercased()) {
            _ = try store.get(collection: "c", id: shared.id)
        }
    }

    @Test("records written with one data key per record decrypt in Tozny's Python SDK after an export")
    func perRecordKeysInPython() async throws {
        guard let python = StoreSharingTests.python() else {
            Issue.record("the project's Python environment (.venv, scripts/python-env.sh) is missing")
            return
        }
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        store.fieldKeyMode = .perRecord
        var expected: [JSONValue] = []
        var batch: [(type: String, data: RecordData, plain: RecordData)] = []
        for i in 0..<300 {
            let data: RecordData = [
                "a": "\(i)", "b": "naïve ☃ \(i) \u{1F600}", "c": "", "d": String(repeating: "z", count: i),
            ]
            batch.append(("memo", data, ["i": "\(i)"]))
            expected.append(
                .object([
                    "data": data.signableJSON, "plain": RecordData(["i": "\(i)"]).signableJSON, "type": .string("memo"),
                ]))
        }
        _ = try await store.put(collection: "shared", records: batch)
        let reader = ClientIdentity.generate(clientID: UUID())
        let exportDir = dir.url.appendingPathComponent("export")
        #expect(
            try await store.export(collection: "shared", to: exportDir, readerPublicKey: reader.publicKey).recordCount
                == 300)
        // Every exported record has one edk.edkN for all its fields.
        let lines = try String(contentsOf: exportDir.appendingPathComponent("records.ndjson"), encoding: .utf8)
            .split(separator: "\n")
        for line in lines {
            let document = try EncryptedDocument(jsonData: Data(line.utf8))
            #expect(
                Set(document.data.map { $0.value.split(separator: ".").prefix(2).joined(separator: ".") }).count == 1)
        }
        let result = try await StoreSharingTests.run(
            python, [StoreSharingTests.script, "decrypt", exportDir.path, reader.boxKey.base64URLEncoded])
        #expect(result.status == 0, "\(result.err)")
        #expect(try StoreSharingTests.lines(result.out) == expected)
    }

    @Test("a field reusing another field's edk.edkN text opens that key once; a wrong key still fails on every field")
    func dataKeyMemo() throws {
        let access = AccessKey()
        let other = AccessKey()
        let encrypted = FieldCipher.encryptSharingDataKey(
            ["a": "1", "b": "2", "c": "3"], accessKey: access, reservoir: EncryptedStore.reservoir)
        #expect(try FieldCipher.decrypt(encrypted, accessKey: access) == ["a": "1", "b": "2", "c": "3"])
        do {
            _ = try FieldCipher.decrypt(encrypted, accessKey: other)
            Issue.record("a wrong access key opened a shared data key")
        } catch {
            #expect(error.code == .authenticationFailed && error.context.part == "edk" && error.context.field == "a")
        }
        // Mixing a shared-key field with a per-field one: each opens its own key.
        var mixed = encrypted
        mixed["d"] = FieldCipher.encrypt("4", accessKey: access)
        mixed["e"] = encrypted["a"]
        #expect(
            try FieldCipher.decrypt(mixed, accessKey: access) == ["a": "1", "b": "2", "c": "3", "d": "4", "e": "1"])
    }

    @Test("lookups see indexes created and dropped after earlier lookups, and lock wipes the derived index keys")
    func lookupCaches() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        for i in 0..<40 { try store.put(collection: "u", type: "t", data: ["n": "\(i % 10)", "m": "\(i)"]) }
        func lookup(_ value: String) throws -> [String] {
            try store.find(RecordQuery(collection: "u", fields: [.equals("n", value)])).compactMap { $0.data["m"] }
                .sorted()
        }
        #expect(try lookup("3") == ["13", "23", "3", "33"])
        try store.createIndex(collection: "u", fields: ["n"], bits: 4)
        #expect(try lookup("3") == ["13", "23", "3", "33"])
        // Another connection (another process, say) drops the index: lookups fall back to reading every record.
        let other = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        try other.dropIndex(collection: "u", name: "n")
        #expect(try lookup("7") == ["17", "27", "37", "7"])
        try other.createIndex(collection: "u", fields: ["n"], name: "again", bits: 2)
        #expect(try lookup("7") == ["17", "27", "37", "7"])
        #expect(try other.find(RecordQuery(collection: "u", fields: [.equals("n", "0")])).count == 4)
        store.lock()
        expectStoreError(.storeLocked) { _ = try lookup("1") }
        try store.unlock(passphrase("p"))
        #expect(try lookup("1") == ["1", "11", "21", "31"])
    }
}
