import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

@Suite(
    "e3dbkit record encrypt/decrypt --ndjson", .enabled(if: CLIRunner.isAvailable, "the e3dbkit binary is not built"))
struct RecordBatchCLITests {
    /// A writer with its own EAKInfo, a reader with a shared one, and helpers to run the record commands.
    struct Setup {
        let dir: ScratchDirectory
        let writer: String
        let writerEAK: String
        let reader: String
        let readerEAK: String

        init() async throws {
            dir = try ScratchDirectory()
            writer = dir.path("writer.json")
            reader = dir.path("reader.json")
            for path in [writer, reader] {
                let r = try await CLIRunner.run(["keygen", "--out", path, "--client-id", UUID().uuidString])
                #expect(r.status == 0, "\(r.stderr)")
            }
            let readerIdentity = try ClientIdentity(configJSON: Data(contentsOf: URL(fileURLWithPath: reader)))
            let wrap = try await CLIRunner.run(["eak", "wrap", "--identity", writer])
            writerEAK = try dir.write("writer-eak.json", wrap.stdoutText)
            let share = try await CLIRunner.run([
                "eak", "share", "--identity", writer, "--reader-public-key", readerIdentity.publicKey.base64URLEncoded,
                writerEAK,
            ])
            #expect(share.status == 0, "\(share.stderr)")
            readerEAK = try dir.write("reader-eak.json", share.stdoutText)
        }

        var encrypt: [String] {
            ["record", "encrypt", "--type", "contact", "--identity", writer, "--eak-info", writerEAK]
        }
        var decrypt: [String] { ["record", "decrypt", "--identity", reader, "--eak-info", readerEAK] }
    }

    func lines(_ data: Data) -> [String] {
        var all = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .map(String.init)
        if all.last == "" { all.removeLast() }
        return all
    }

    func records(_ count: Int) -> [String] {
        (0..<count).map { i in
            CanonicalJSON.serialize(
                .object([
                    "n": .string("\(i)"), "name": .string("Zoë 😀 \(i)"), "e\u{301}": .string("1"),
                    "é": .string("\(i * 3)"),
                ]))
        }
    }

    @Test("encrypt --ndjson | decrypt --ndjson gives back every record, in order, from a file and from stdin")
    func roundTrip() async throws {
        let s = try await Setup()
        let input = records(400)
        let inputPath = try s.dir.write("in.ndjson", input.joined(separator: "\n") + "\n")
        let plain = try s.dir.write("plain.json", #"{"p":"q"}"#)
        let enc = try await CLIRunner.run(s.encrypt + ["--plain", plain, "--ndjson", "--jobs", "2", inputPath])
        #expect(enc.status == 0, "\(enc.stderr)")
        #expect(enc.stderr.isEmpty)
        let encrypted = lines(enc.stdout)
        #expect(encrypted.count == 400)
        // Decrypt from stdin with CRLF line ends.
        let crlf = Data((encrypted.joined(separator: "\r\n") + "\r\n").utf8)
        let dec = try await CLIRunner.run(s.decrypt + ["--ndjson", "--jobs", "3", "-"], stdin: crlf)
        #expect(dec.status == 0, "\(dec.stderr)")
        let decrypted = lines(dec.stdout)
        #expect(decrypted.count == 400)
        for (i, line) in decrypted.enumerated() {
            let object = try #require(try CanonicalJSON.parse(line).objectValue)
            #expect(object["data"] == (try CanonicalJSON.parse(input[i])), "line \(i + 1)")
            #expect(object["meta"]?.objectValue?["plain"] == .object(["p": "q"]))
        }
    }

    @Test("each line equals what the single-record commands print for it")
    func perLineEquality() async throws {
        let s = try await Setup()
        let input = records(4)
        let enc = try await CLIRunner.run(
            s.encrypt + ["--ndjson", "-"], stdin: Data((input.joined(separator: "\n")).utf8))
        #expect(enc.status == 0, "\(enc.stderr)")
        let encrypted = lines(enc.stdout)
        let dec = try await CLIRunner.run(s.decrypt + ["--ndjson", "-"], stdin: enc.stdout)
        #expect(dec.status == 0, "\(dec.stderr)")
        let decrypted = lines(dec.stdout)
        #expect(encrypted.count == 4 && decrypted.count == 4)
        for i in 0..<input.count {
            // Batch decrypt of line i == single decrypt of the same document.
            let single = try await CLIRunner.run(s.decrypt + ["-"], stdin: Data(encrypted[i].utf8))
            #expect(single.status == 0, "\(single.stderr)")
            #expect(single.stdoutText == decrypted[i] + "\n")
            // Single encrypt of the same data has the same shape: canonical, one line, same meta, and decrypts
            // to the same output (field ciphertexts and nothing else differ, being random).
            let one = try await CLIRunner.run(s.encrypt + ["-"], stdin: Data(input[i].utf8))
            #expect(one.status == 0, "\(one.stderr)")
            let batchDoc = try EncryptedDocument(jsonData: Data(encrypted[i].utf8))
            let singleDoc = try EncryptedDocument(jsonData: one.stdout)
            #expect(batchDoc.meta == singleDoc.meta && batchDoc.data.keys == singleDoc.data.keys)
            #expect(Array(encrypted[i].utf8) == batchDoc.canonicalBytes())
            #expect(one.stdoutText == CanonicalJSON.serialize(singleDoc.signableJSON) + "\n")
            let back = try await CLIRunner.run(s.decrypt + ["-"], stdin: one.stdout)
            #expect(back.stdoutText == decrypted[i] + "\n")
        }
    }

    @Test("bad lines: error lines in order, one stderr line each, exit code of the first failure")
    func errors() async throws {
        let s = try await Setup()
        let input = records(5)
        let enc = try await CLIRunner.run(
            s.encrypt + ["--ndjson", "-"], stdin: Data(input.joined(separator: "\n").utf8))
        var encrypted = lines(enc.stdout)
        #expect(encrypted.count == 5)
        // Line 2: malformed (65); line 4: tampered meta, verification (2); line 6: blank then line 7 good.
        encrypted[1] = #"{"data":{"secret":"hunter2"}"#
        encrypted[3] = encrypted[3].replacingOccurrences(of: #""type":"contact""#, with: #""type":"other""#)
        let input2 = encrypted + ["", encrypted[0], "", ""]
        let dec = try await CLIRunner.run(
            s.decrypt + ["--ndjson", "--jobs", "2", "-"], stdin: Data(input2.joined(separator: "\n").utf8))
        #expect(dec.status == 65, "\(dec.stderr)")
        let out = lines(dec.stdout)
        #expect(out.count == 7)
        func error(_ line: String) throws -> JSONObject? {
            try CanonicalJSON.parse(line).objectValue?["error"]?.objectValue
        }
        #expect(
            try error(out[1]) == [
                "category": "malformedInput", "code": "invalidDocument", "line": 2,
                "message": .string(try #require(try error(out[1])?["message"]?.stringValue)),
            ])
        #expect(!dec.stdoutText.contains("hunter2") && !dec.stderr.contains("hunter2"))
        #expect(try error(out[3])?["code"] == "invalidSignature" && error(out[3])?["line"] == 4)
        #expect(try error(out[3])?["category"] == "verification")
        #expect(try error(out[5])?["code"] == "blankLine" && error(out[5])?["line"] == 6)
        #expect(try error(out[0]) == nil && error(out[2]) == nil && error(out[4]) == nil && error(out[6]) == nil)
        #expect(out[6] == out[0])
        let stderrLines = dec.stderr.split(separator: "\n")
        #expect(stderrLines.count == 3)
        #expect(stderrLines[0].hasPrefix("e3dbkit: line 2: ") && stderrLines[1].hasPrefix("e3dbkit: line 4: "))
        #expect(stderrLines[2].hasPrefix("e3dbkit: line 6: "))

        // The first failure decides: verification first → 2.
        let verificationFirst = [encrypted[3], encrypted[1]].joined(separator: "\n")
        let dec2 = try await CLIRunner.run(s.decrypt + ["--ndjson", "-"], stdin: Data(verificationFirst.utf8))
        #expect(dec2.status == 2 && lines(dec2.stdout).count == 2)

        // --fail-fast: lines before the failure and its error line, then stop.
        let fast = try await CLIRunner.run(
            s.decrypt + ["--ndjson", "--fail-fast", "-"], stdin: Data(input2.joined(separator: "\n").utf8))
        #expect(fast.status == 65)
        let fastOut = lines(fast.stdout)
        #expect(fastOut.count == 2 && fastOut[0] == out[0] && fastOut[1] == out[1])
        #expect(fast.stderr.split(separator: "\n").count == 1)

        // Encrypt: a line that is not an object of strings is malformed (65), the rest are encrypted.
        let encBad = try await CLIRunner.run(
            s.encrypt + ["--ndjson", "-"], stdin: Data("{\"a\":\"1\"}\n{\"a\":1}\n[]\n{\"b\":\"2\"}\n".utf8))
        #expect(encBad.status == 65)
        let encOut = lines(encBad.stdout)
        #expect(encOut.count == 4)
        #expect(try error(encOut[1])?["line"] == 2 && error(encOut[2])?["line"] == 3)
        #expect(try error(encOut[0]) == nil && error(encOut[3]) == nil)
    }

    @Test("usage errors, empty input, missing input file")
    func usage() async throws {
        let s = try await Setup()
        #expect(try await CLIRunner.run(s.decrypt + ["--ndjson", "--jobs", "0", "-"]).status == 64)
        #expect(try await CLIRunner.run(s.decrypt + ["--fail-fast", "-"]).status == 64)
        #expect(try await CLIRunner.run(s.encrypt + ["--jobs", "2", "-"]).status == 64)
        let empty = try await CLIRunner.run(s.decrypt + ["--ndjson", "-"], stdin: Data())
        #expect(empty.status == 0 && empty.stdout.isEmpty && empty.stderr.isEmpty)
        let missing = try await CLIRunner.run(s.decrypt + ["--ndjson", s.dir.path("nope.ndjson")])
        #expect(missing.status == 66 && missing.stdout.isEmpty)
        // The wrong reader: the EAK does not open, nothing is processed (exit 2).
        let wrong = try await CLIRunner.run(
            ["record", "decrypt", "--identity", s.writer, "--eak-info", s.readerEAK, "--ndjson", "-"],
            stdin: Data("{}\n".utf8))
        #expect(wrong.status == 2 && wrong.stdout.isEmpty)
    }

    @Test("a full disk or a closed pipe on stdout: one error line on stderr, exit 1, no crash")
    func outputErrors() async throws {
        let s = try await Setup()
        let input = Data((records(3000).joined(separator: "\n") + "\n").utf8)
        let inputPath = s.dir.path("big.ndjson")
        try input.write(to: URL(fileURLWithPath: inputPath))
        if FileManager.default.fileExists(atPath: "/dev/full") {
            let full = try await CLIRunner.run(
                s.encrypt + ["--ndjson", inputPath],
                standardOutput: try FileHandle(forWritingTo: URL(fileURLWithPath: "/dev/full")))
            let err = full.stderr
            #expect(!full.uncaughtSignal && full.status == 1)
            #expect(err.contains("cannot write to standard output") && err.split(separator: "\n").count == 1, "\(err)")
        }
        // A reader that closes the pipe at once: EPIPE instead of SIGPIPE, and a quiet exit with status 141.
        let closed = try await CLIRunner.run(
            s.encrypt + ["--ndjson", inputPath], standardOutput: try ChildProcess.brokenPipe())
        #expect(!closed.uncaughtSignal && closed.status == 141 && closed.stderr.isEmpty, "\(closed.stderr)")
    }
}
