import ArgumentParser
import E3DBCommandLine
import E3DBKit
import Foundation

/// `e3dbkit canonicalize [FILE|-] [--check] [--order utf16|js]`: writes the canonical (RFC 8785 / E3DB Signable)
/// bytes of one JSON text to stdout, with no trailing newline.
struct CanonicalizeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "canonicalize",
        abstract: "Write the canonical (signable) form of one JSON text.",
        discussion: """
            Reads one JSON text from FILE (or stdin when FILE is '-' or omitted) and writes exactly its canonical \
            bytes to stdout, without a trailing newline: no whitespace, members sorted by UTF-16 code units (or in \
            js-sdk order with --order js), strings escaped like JSON.stringify, numbers in ECMAScript form.
            Exit codes: 0 success; 1 with --check when the input is valid but not canonical; 65 malformed JSON \
            (a one-line error with the byte offset goes to stderr); 66 the file cannot be read.
            """
    )

    enum Order: String, ExpressibleByArgument, CaseIterable {
        case utf16
        case js

        var keyOrder: KeyOrder { self == .js ? .javaScript : .utf16 }
    }

    @Argument(help: "The JSON file to read, or '-' for stdin.")
    var file: String = "-"

    @Flag(help: "Write nothing; exit 1 if the input is not already canonical.")
    var check = false

    @Option(help: "Member order: utf16 (RFC 8785, Java; default) or js (js-sdk: array-index keys first).")
    var order: Order = .utf16

    func run() throws {
        let input = try CLIInput.read(file, what: "JSON input")
        let value: JSONValue
        do {
            value = try CanonicalJSON.parse(input)
        } catch {
            throw CLIError("canonicalize: \(file == "-" ? "stdin" : file): \(error)", exitCode: ExitStatus.dataError)
        }
        let canonical = CanonicalJSON.serializedBytes(value, order: order.keyOrder)
        if check {
            guard canonical.elementsEqual(input) else {
                let firstDifference = zip(canonical, input).prefix { $0 == $1 }.count
                throw CLIError("canonicalize: not canonical (first difference at byte \(firstDifference))")
            }
            return
        }
        try StandardOutput.write(canonical)
    }
}
