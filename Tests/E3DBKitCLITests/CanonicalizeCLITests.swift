import E3DBTestSupport
import Foundation
import Testing

@Suite("e3dbkit canonicalize")
struct CanonicalizeCLITests {
    @Test("writes exactly the canonical bytes, without a trailing newline")
    func canonicalizeStdin() async throws {
        let input = Data("{ \"b\": [1.0, 1e21, \"\\u00e9\"], \"a\": {\"9\": null, \"10\": true} }\n".utf8)
        let result = try await CLIRunner.run(["canonicalize"], stdin: input)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            String(decoding: result.stdout, as: UTF8.self) == "{\"a\":{\"10\":true,\"9\":null},\"b\":[1,1e+21,\"é\"]}")
    }

    @Test("'-' reads stdin; --order js hoists array-index keys")
    func javaScriptOrder() async throws {
        let result = try await CLIRunner.run(
            ["canonicalize", "-", "--order", "js"], stdin: Data("{\"10\":1,\"9\":2,\"a\":3}".utf8))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(String(decoding: result.stdout, as: UTF8.self) == "{\"9\":2,\"10\":1,\"a\":3}")
    }

    @Test("reads a file argument")
    func fileArgument() async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "e3dbkit-canon-\(UUID().uuidString).json")
        try Data("[\"\\u001f\", 5e-7, -0]".utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let result = try await CLIRunner.run(["canonicalize", url.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(String(decoding: result.stdout, as: UTF8.self) == "[\"\\u001f\",5e-7,0]")
    }

    @Test("--check: 0 for canonical input, 1 otherwise, nothing on stdout")
    func check() async throws {
        let good = try await CLIRunner.run(["canonicalize", "--check"], stdin: Data("{\"a\":1,\"b\":[]}".utf8))
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.isEmpty)
        let bad = try await CLIRunner.run(["canonicalize", "--check"], stdin: Data("{\"b\":1,\"a\":2}".utf8))
        #expect(bad.status == 1)
        #expect(bad.stdout.isEmpty)
        #expect(bad.stderr.contains("not canonical"))
        let jsGood = try await CLIRunner.run(
            ["canonicalize", "--check", "--order", "js"], stdin: Data("{\"9\":1,\"10\":2}".utf8))
        #expect(jsGood.status == 0, "\(jsGood.stderr)")
        let trailingNewline = try await CLIRunner.run(["canonicalize", "--check"], stdin: Data("{}\n".utf8))
        #expect(trailingNewline.status == 1)
    }

    @Test(
        "malformed input: exit 65 and a one-line error with the byte offset",
        arguments: [
            ("{\"a\":1,\"a\":2}", "duplicateKey at byte 7"),
            ("[1,]", "unexpectedCharacter at byte 3"),
            ("\"\\ud800\"", "loneSurrogate at byte 1"),
            ("{} x", "trailingData at byte 3"),
            ("", "unexpectedEnd at byte 0"),
        ])
    func malformed(_ pair: (String, String)) async throws {
        let result = try await CLIRunner.run(["canonicalize"], stdin: Data(pair.0.utf8))
        #expect(result.status == 65)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains(pair.1), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1)
    }

    @Test("invalid UTF-8: exit 65")
    func invalidUTF8() async throws {
        let result = try await CLIRunner.run(["canonicalize"], stdin: Data([0x22, 0xC0, 0xAF, 0x22]))
        #expect(result.status == 65)
        #expect(result.stderr.contains("invalidUTF8 at byte 1"), "\(result.stderr)")
    }

    @Test("a missing file: exit 66")
    func missingFile() async throws {
        let result = try await CLIRunner.run(["canonicalize", "/nonexistent/e3dbkit-no-such-file.json"])
        #expect(result.status == 66)
    }
}
