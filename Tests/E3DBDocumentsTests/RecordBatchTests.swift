import E3DBCanonicalJSON
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
import Foundation
import Synchronization
import Testing

/// Echoes each line after a short sleep, recording how many lines are being processed at once.
final class ConcurrencyProbe: RecordLineProcessor {
    let running = Atomic<Int>(0)
    let peak = Atomic<Int>(0)

    func process(line: [UInt8]) throws(E3DBError) -> [UInt8] {
        let now = running.add(1, ordering: .sequentiallyConsistent).newValue
        peak.max(now, ordering: .sequentiallyConsistent)
        usleep(300)
        running.subtract(1, ordering: .sequentiallyConsistent)
        return line
    }
}

@Suite("NDJSON batch mode for records")
struct RecordBatchTests {
    let alice = ClientIdentity.generate(clientID: UUID())

    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Splits `input` fed in pieces of `step` bytes; returns (number, text or error code) per line.
    func split(_ input: [UInt8], step: Int, max: Int = 1 << 20) -> [(Int, String)] {
        var splitter = NDJSONLineSplitter(maxLineBytes: max)
        var lines: [(Int, String)] = []
        let record = { (line: NDJSONLine) in
            switch line.content {
            case .success(let b): lines.append((line.number, String(decoding: b, as: UTF8.self)))
            case .failure(let e): lines.append((line.number, "!" + e.code.rawValue))
            }
        }
        var offset = 0
        while offset < input.count {
            let end = Swift.min(input.count, offset + step)
            splitter.append(Array(input[offset..<end]), record)
            #expect(splitter.bufferedByteCount <= max + 1)
            offset = end
        }
        splitter.finish(record)
        return lines
    }

    func lines(_ output: [UInt8]) -> [String] {
        var all = String(decoding: output, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .map(String.init)
        #expect(all.last == "")
        all.removeLast()
        return all
    }

    func errorObject(_ line: String) throws -> JSONObject? {
        guard case .object(let o) = try CanonicalJSON.parse(line), case .object(let e)? = o["error"] else { return nil }
        return e
    }

    @Test("lines: \\n and \\r\\n endings, a last line without \\n, trailing blank lines, the same for every split")
    func splitting() {
        let input = bytes("a\nb\r\n\n c \n\r\nd\n\n \r\n")
        let expected: [(Int, String)] = [
            (1, "a"), (2, "b"), (3, "!blankLine"), (4, " c "), (5, "!blankLine"), (6, "d"),
        ]
        for step in [1, 2, 3, 5, 64] {
            let got = split(input, step: step)
            #expect(got.map(\.0) == expected.map(\.0), "step \(step)")
            #expect(got.map(\.1) == expected.map(\.1), "step \(step)")
        }
        #expect(split(bytes("x"), step: 1).map(\.1) == ["x"])
        #expect(split(bytes("x\r"), step: 1).map(\.1) == ["x"])
        #expect(split([], step: 1).isEmpty)
        #expect(split(bytes("\n\n\r\n"), step: 1).isEmpty)
    }

    @Test("an over-long line is reported under its number and skipped without being stored")
    func overLong() {
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: 5000)
        let input = bytes("ok\n") + long + bytes("\nfine\n") + long
        for step in [1, 7, 100, 10_000] {
            let got = split(input, step: step, max: 100)
            #expect(got.map(\.0) == [1, 2, 3, 4], "step \(step)")
            #expect(got.map(\.1) == ["ok", "!lineTooLong", "fine", "!lineTooLong"], "step \(step)")
        }
        // Exactly at the limit, with and without \r.
        let atLimit = [UInt8](repeating: UInt8(ascii: "y"), count: 100)
        #expect(
            split(atLimit + bytes("\r\n") + atLimit + bytes("z\n"), step: 3, max: 100).map(\.1)
                == [String(repeating: "y", count: 100), "!lineTooLong"])
        #expect(E3DBError.Code.lineTooLong.category == .malformedInput)
    }

    @Test("a 16 MiB line through RecordBatch with a 1 KiB limit: one typed error line, bounded memory")
    func overLongStream() throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let encryptor = try RecordLineEncryptor(type: "t", identity: alice, eakInfo: info)
        var produced = 0
        let total = 16 << 20
        var output: [UInt8] = []
        let summary = try RecordBatch.run(
            processor: encryptor, options: RecordBatchOptions(jobs: 2, maxLineBytes: 1024),
            read: { buffer in
                // The input is generated, never held: 16 MiB of 'x', then one good line.
                if produced >= total {
                    if produced == total {
                        produced += 1
                        let tail = Array("\n{\"k\":\"v\"}\n".utf8)
                        buffer.copyBytes(from: tail)
                        return tail.count
                    }
                    return 0
                }
                let n = Swift.min(buffer.count, total - produced)
                if let base = buffer.baseAddress { memset(base, Int32(UInt8(ascii: "x")), n) }
                produced += n
                return n
            },
            write: { output.append(contentsOf: $0) })
        let out = lines(output)
        #expect(out.count == 2)
        let error = try #require(try errorObject(out[0]))
        #expect(error["code"] == .string("lineTooLong") && error["line"] == .number(1))
        #expect(error["category"] == .string("malformedInput"))
        #expect(out[1].hasPrefix("{\"data\":{\"k\":"))
        #expect(summary.lines == 2 && summary.failures == 1 && summary.firstFailure?.line == 1)
    }

    @Test("empty input gives empty output")
    func emptyInput() throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let encryptor = try RecordLineEncryptor(type: "t", identity: alice, eakInfo: info)
        for input in [[], bytes("\n"), bytes("\r\n\n")] {
            let (output, summary) = RecordBatch.process(input, processor: encryptor, options: .init(jobs: 2))
            #expect(output.isEmpty)
            #expect(summary == RecordBatchSummary())
        }
    }

    /// `count` records; every line listed in `bad` is replaced by broken JSON.
    func records(_ count: Int, bad: Set<Int> = []) -> (input: [UInt8], data: [RecordData?]) {
        var input: [UInt8] = []
        var data: [RecordData?] = []
        for i in 1...count {
            if bad.contains(i) {
                input += bytes("{\"n\":\"\(i)\",\"secret\":\"hunter2\"\n")
                data.append(nil)
            } else {
                let record: RecordData = ["n": "\(i)", "name": "Zoë \(i)", "e\u{301}": "\(i * 7)"]
                input += record.canonicalBytes() + (i % 3 == 0 ? bytes("\r\n") : bytes("\n"))
                data.append(record)
            }
        }
        return (input, data)
    }

    @Test(
        "order is kept and error lines carry their numbers, for any number of jobs and batch size",
        arguments: [
            (1, 64), (2, 1), (2, 7), (4, 64), (3, 1000),
        ])
    func orderAndErrors(jobs: Int, linesPerBatch: Int) throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let bad: Set<Int> = [1, 17, 18, 300, 600]
        let (input, data) = records(600, bad: bad)
        let options = RecordBatchOptions(jobs: jobs, linesPerBatch: linesPerBatch)
        let encryptor = try RecordLineEncryptor(type: "t", plain: ["p": "q"], identity: alice, eakInfo: info)
        let (encrypted, summary) = RecordBatch.process(input, processor: encryptor, options: options)
        #expect(summary.lines == 600 && summary.failures == bad.count && summary.firstFailure?.line == 1)
        #expect(summary.firstFailure?.error.code == .invalidDocument && !summary.stoppedEarly)
        let encryptedLines = lines(encrypted)
        #expect(encryptedLines.count == 600)
        for (i, line) in encryptedLines.enumerated() where bad.contains(i + 1) {
            let error = try #require(try errorObject(line))
            #expect(error["line"] == .number(Double(i + 1)) && error["code"] == .string("invalidDocument"))
            #expect(!line.contains("hunter2"))
        }
        // Decrypt the batch output (error lines included, which now fail to decrypt as documents).
        let decryptor = try RecordLineDecryptor(identity: alice, eakInfo: info)
        let (decrypted, summary2) = RecordBatch.process(encrypted, processor: decryptor, options: options)
        #expect(summary2.lines == 600 && summary2.failures == bad.count)
        for (i, line) in lines(decrypted).enumerated() {
            let value = try CanonicalJSON.parse(line)
            guard let expected = data[i] else {
                #expect(try errorObject(line)?["line"] == .number(Double(i + 1)))
                continue
            }
            guard case .object(let o) = value else {
                Issue.record("line \(i + 1) is not an object")
                continue
            }
            #expect(o["data"] == expected.signableJSON, "line \(i + 1)")
            #expect(o["verification"] == .object(["policy": "required", "rec_sig": "verified"]))
        }
    }

    @Test("each output line is what the single-record API gives for that record")
    func perLineEquality() throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let (input, _) = records(50)
        let encryptor = try RecordLineEncryptor(type: "t", identity: alice, eakInfo: info, order: .javaScript)
        let (encrypted, _) = RecordBatch.process(input, processor: encryptor, options: .init(jobs: 2, linesPerBatch: 4))
        let verification = RecordVerification(policy: .verifyIfPresent, order: .javaScript)
        let decryptor = try RecordLineDecryptor(identity: alice, eakInfo: info, verification: verification)
        let (decrypted, summary) = RecordBatch.process(encrypted, processor: decryptor, options: .init(jobs: 2))
        #expect(summary.failures == 0)
        for (line, out) in zip(lines(encrypted), lines(decrypted)) {
            let document = try EncryptedDocument(jsonData: Array(line.utf8))
            // The encrypted line is the canonical document, as `record encrypt` prints it.
            #expect(Array(line.utf8) == document.canonicalBytes())
            let single = try document.decrypt(identity: alice, eakInfo: info, verification: verification)
            #expect(out == CanonicalJSON.serialize(RecordLineDecryptor.outputJSON(single, policy: .verifyIfPresent)))
        }
    }

    @Test("encrypted lines are canonical for keys that need escaping or sort differently in UTF-16 and code points")
    func canonicalKeys() throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        // U+FF61 sorts after U+1F600 in code points but before it in UTF-16 (surrogates are 0xD83D...).
        let data = try RecordData([
            ("\u{FF61}", "a"), ("😀", "b"), ("q\"\n\u{1}\\", "c"), ("", "d"), ("e\u{301}", "e"), ("é", "f"),
        ])
        let encryptor = try RecordLineEncryptor(type: "t", plain: ["z": "1", "a": "2"], identity: alice, eakInfo: info)
        let line = try encryptor.process(line: data.canonicalBytes())
        let document = try EncryptedDocument(jsonData: line)
        #expect(line == document.canonicalBytes())
        #expect(document.data.keys == ["", "e\u{301}", "q\"\n\u{1}\\", "é", "😀", "\u{FF61}"])
        let decrypted = try document.decrypt(identity: alice, eakInfo: info)
        #expect(decrypted.data == data && decrypted.signatureStatus == .verified)
        #expect(decrypted.meta.plain == ["a": "2", "z": "1"])
    }

    @Test("verification failures are per line: tampered meta, missing rec_sig, wrong writer")
    func verificationFailures() throws {
        let (ak, info) = try EAKInfo.makeWriterKey(for: alice)
        let bob = ClientIdentity.generate(clientID: UUID())
        let good = try EncryptedDocument.encrypt(
            type: "t", data: ["a": "b"], writerID: #require(alice.clientID), accessKey: ak,
            signingKey: #require(alice.signingKey))
        var tampered = good
        tampered.meta.type = "u"
        var unsigned = good
        unsigned.recordSignature = nil
        let forged = try EncryptedDocument.encrypt(
            type: "t", data: ["a": "b"], writerID: #require(bob.clientID), accessKey: ak,
            signingKey: #require(alice.signingKey))
        let input: [UInt8] = [good, tampered, unsigned, forged, good].flatMap { (d: EncryptedDocument) -> [UInt8] in
            d.canonicalBytes() + [0x0A]
        }
        let decryptor = try RecordLineDecryptor(identity: alice, eakInfo: info)
        let (output, summary) = RecordBatch.process(
            input, processor: decryptor, options: .init(jobs: 2, linesPerBatch: 2))
        let out = lines(output)
        #expect(out.count == 5 && summary.failures == 3)
        #expect(try errorObject(out[1])?["code"] == .string("invalidSignature"))
        #expect(try errorObject(out[2])?["code"] == .string("missingSignature"))
        #expect(try errorObject(out[3])?["code"] == .string("writerSignerMismatch"))
        #expect(try errorObject(out[3])?["category"] == .string("verification"))
        #expect(try errorObject(out[0]) == nil && out[0] == out[4])
        // verify-if-present reads the unsigned record; the writer check can be turned off.
        let relaxed = try RecordLineDecryptor(
            identity: alice, eakInfo: info,
            verification: .init(policy: .verifyIfPresent, requireWriterIsSigner: false))
        let (output2, summary2) = RecordBatch.process(input, processor: relaxed)
        #expect(summary2.failures == 1 && summary2.firstFailure?.line == 2)
        #expect(lines(output2)[2].contains("\"rec_sig\":\"absent\""))
        // ignore: every line reads, rec_sig not checked; the forged writer still fails the writer check.
        let ignoring = try RecordLineDecryptor(identity: alice, eakInfo: info, verification: .init(policy: .ignore))
        let (output3, summary3) = RecordBatch.process(input, processor: ignoring)
        #expect(summary3.failures == 1 && summary3.firstFailure?.line == 4)
        #expect(summary3.firstFailure?.error.code == .writerSignerMismatch)
        #expect(lines(output3)[1].contains("\"policy\":\"ignore\",\"rec_sig\":\"not-checked\""))
    }

    @Test(
        "fail-fast stops at the first failure; the lines before it and its error line are written",
        arguments: [1, 2, 4])
    func failFast(jobs: Int) throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let (input, _) = records(1000, bad: [500, 501, 900])
        let encryptor = try RecordLineEncryptor(type: "t", identity: alice, eakInfo: info)
        var failures: [Int] = []
        var output: [UInt8] = []
        var offset = 0
        let summary = try RecordBatch.run(
            processor: encryptor, options: .init(jobs: jobs, failFast: true, linesPerBatch: 16),
            read: { buffer in
                let n = Swift.min(buffer.count, input.count - offset, 999)
                buffer.copyBytes(from: input[offset..<(offset + n)])
                offset += n
                return n
            },
            write: { output.append(contentsOf: $0) },
            failed: { failures.append($0.line) })
        let out = lines(output)
        #expect(out.count == 500)
        #expect(try errorObject(out[499])?["line"] == .number(500))
        #expect(try out[0..<499].allSatisfy { try errorObject($0) == nil })
        #expect(failures == [500])
        #expect(summary.stoppedEarly && summary.lines == 500 && summary.failures == 1)
        // Reading stopped: far from the whole input was consumed.
        #expect(offset < input.count)
    }

    @Test("a write error stops the run and is thrown")
    func writeError() throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let (input, _) = records(2000)
        let encryptor = try RecordLineEncryptor(type: "t", identity: alice, eakInfo: info)
        var offset = 0
        var writes = 0
        #expect(throws: E3DBError(.invalidParameter)) {
            _ = try RecordBatch.run(
                processor: encryptor, options: .init(jobs: 2, linesPerBatch: 8),
                read: { buffer in
                    let n = Swift.min(buffer.count, input.count - offset)
                    buffer.copyBytes(from: input[offset..<(offset + n)])
                    offset += n
                    return n
                },
                write: { _ throws(E3DBError) in
                    writes += 1
                    if writes == 3 { throw E3DBError(.invalidParameter, "disk full") }
                })
        }
        #expect(writes == 3)
    }

    @Test("the workers really run at once, never more of them than jobs, and order is kept", arguments: [2, 3])
    func workersRunConcurrently(jobs: Int) {
        let probe = ConcurrencyProbe()
        let input = (1...600).flatMap { Array("\($0)\n".utf8) }
        let (output, summary) = RecordBatch.process(
            input, processor: probe, options: .init(jobs: jobs, linesPerBatch: 5))
        #expect(output == input && summary.lines == 600 && summary.failures == 0)
        let peak = probe.peak.load(ordering: .sequentiallyConsistent)
        #expect(peak >= 2 && peak <= jobs, "peak \(peak)")
    }
}
