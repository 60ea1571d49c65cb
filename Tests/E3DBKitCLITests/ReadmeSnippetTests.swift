import E3DBKit
import Foundation
import Testing

/// The README's code snippets, compiled and run, plus a check that the README still shows exactly this code.
@Suite("README snippets")
struct ReadmeSnippetTests {
    @Test func primitivesSnippetRuns() throws {
        var printed: [String] = []
        func print(_ items: Any...) { printed.append(items.map { "\($0)" }.joined(separator: " ")) }
        // README-SNIPPET-BEGIN primitives
        // Public-key authenticated encryption (what E3DB uses to wrap access keys).
        let writer = Box.PrivateKey()
        let reader = Box.PrivateKey()
        let sealed = try Box.seal(Data("access key bytes".utf8), to: reader.publicKey, from: writer)
        let opened = try Box.open(sealed, from: writer.publicKey, to: reader)

        // Deterministic Ed25519 (RFC 8032): the same key and message always give the same signature.
        let signer = Ed25519.PrivateKey()
        let signature = signer.signature(for: opened)
        let valid = signer.publicKey.isValidSignature(signature, for: opened)

        // Failures are typed, with non-secret context.
        do {
            _ = try Base64URL.decode("not base64!")
        } catch {
            print(error.code, error.context.offset ?? -1)  // invalidBase64 3
        }
        // README-SNIPPET-END primitives
        #expect(opened == Data("access key bytes".utf8))
        #expect(valid)
        #expect(signature == signer.signature(for: opened))
        #expect(printed == ["invalidBase64 3"])
    }

    @Test func readmeShowsTheTestedCode() throws {
        let testFile = URL(fileURLWithPath: #filePath)
        let root = testFile.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: testFile, encoding: .utf8)
        let lines = source.components(separatedBy: "\n")
        guard let begin = lines.firstIndex(where: { $0.contains("README-SNIPPET-BEGIN primitives") }),
            let end = lines.firstIndex(where: { $0.contains("README-SNIPPET-END primitives") }), begin < end
        else {
            Issue.record("snippet markers not found")
            return
        }
        let snippet = lines[(begin + 1)..<end].map { $0.hasPrefix("        ") ? String($0.dropFirst(8)) : $0 }
        let block = (["import E3DBPrimitives", ""] + snippet).joined(separator: "\n")
        #expect(
            readme.contains("```swift\n" + block + "\n```"),
            "README.md's primitives snippet differs from the tested code")
    }
}
