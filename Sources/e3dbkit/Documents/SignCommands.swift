import ArgumentParser
import E3DBCommandLine
import E3DBKit
import Foundation

/// `e3dbkit sign`: wraps any JSON document as a SignedDocument.
struct SignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Sign a JSON document: prints {\"doc\":…,\"sig\":…} (Ed25519 over the canonical document).",
        discussion: "The signature is deterministic. Signing a SignedDocument again nests it."
    )

    @Option(help: "The signer's identity JSON file.")
    var identity: String

    @Option(help: "Key order: utf16 (default) or js (js-sdk).")
    var order: OrderOption = .utf16

    @Argument(help: "The JSON document ('-' for stdin).")
    var document: String = "-"

    func run() throws {
        try libraryCall("signing") {
            let key = try DocumentCLI.identity(identity).requireSigningKey()
            let value: JSONValue
            do {
                value = try CanonicalJSON.parse(CLIIO.readAll(document, what: "document"))
            } catch let error as CanonicalJSONError {
                throw CLIError("the document is not valid JSON: \(error)", exitCode: ExitStatus.dataError)
            }
            let signed = SignedDocument(signing: value, with: key, order: order.keyOrder)
            let text = signed.canonicalString()
            try DocumentLimits.checkOutput(signed.signableJSON, byteCount: text.utf8.count, what: "signed document")
            try DocumentCLI.output(text)
        }
    }
}

/// `e3dbkit verify`: verifies a SignedDocument.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Verify a SignedDocument; prints the inner document.",
        discussion: """
            With --depth N, also verifies N-1 nested SignedDocument layers with the same key. Exit codes: 0 \
            verified; 2 the signature does not verify; 65 malformed input.
            """
    )

    @Option(parsing: .unconditional, help: "The signer's Ed25519 public key, base64url.")
    var publicKey: String?

    @Option(help: "An identity JSON file whose public signing key to use.")
    var identity: String?

    @Option(help: "Key order: utf16 (default) or js (js-sdk).")
    var order: OrderOption = .utf16

    @Option(help: "Number of nested signature layers to verify.")
    var depth: Int = 1

    @Argument(help: "The SignedDocument JSON ('-' for stdin).")
    var document: String = "-"

    func validate() throws {
        switch (publicKey, identity) {
        case (nil, nil): throw ValidationError("pass --public-key or --identity")
        case (.some, .some): throw ValidationError("pass only one of --public-key and --identity")
        default: break
        }
        guard depth >= 1 else { throw ValidationError("--depth must be 1 or more") }
    }

    func run() throws {
        try libraryCall("verifying") {
            let key: Ed25519.PublicKey
            if let publicKey {
                key = try DocumentCLI.signingPublicKey(publicKey, what: "reading --public-key")
            } else if let identity, let pk = try DocumentCLI.identity(identity).publicSigningKey {
                key = pk
            } else {
                throw CLIError("the identity \(identity ?? "") has no public signing key", exitCode: ExitStatus.usage)
            }
            var current = try SignedDocument<JSONValue>(jsonData: CLIIO.readAll(document, what: "signed document"))
            try current.verify(with: key, order: order.keyOrder)
            for _ in 1..<depth {
                current = try SignedDocument<JSONValue>(documentJSON: current.document)
                try current.verify(with: key, order: order.keyOrder)
            }
            try DocumentCLI.output(current.document.canonicalString())
        }
    }
}
