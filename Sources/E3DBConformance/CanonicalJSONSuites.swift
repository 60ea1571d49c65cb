import E3DBKit
import Foundation

/// Vector suites for E3DBCanonicalJSON: the project's own Node/rfc8785 vectors (`TestVectors/canonical-json/`)
/// and the external BLNS (Node and Java SDK outputs) and RFC 8785 reference files (`../shared/vectors/`).
package enum CanonicalJSONSuites {
    /// Every canonical-JSON suite.
    package static var all: [VectorSuite] { [documents, numbers, blnsNode, blnsJava, jcs] }

    // MARK: Project vectors

    struct DocumentTest: Decodable, Sendable {
        let tcId: Int
        let comment: String
        let result: VectorResult
        let flags: [String]
        let input: String
        let expected: String?
        let expectedJs: String?
        let nodeEnumeration: String?
        let error: String?
    }

    /// `TestVectors/canonical-json/documents.json`: naughty strings as values and keys, integer-like and astral
    /// keys, nested documents, lone surrogates; both key orders.
    package static let documents = VectorSuite(name: "canonical-json/documents") { locations in
        let file = try VectorFile<DocumentTest>.load(locations.projectFile("canonical-json/documents.json"))
        return file.tests.map { test in
            VectorCase(suite: "canonical-json/documents", id: String(test.tcId), comment: test.comment) {
                try checkDocument(test)
            }
        }
    }

    static func checkDocument(_ test: DocumentTest) throws {
        switch test.result {
        case .valid, .acceptable:
            guard let expected = test.expected, let expectedJs = test.expectedJs else {
                throw VectorFormatError("tcId \(test.tcId): a valid case needs expected and expectedJs")
            }
            let value = try CanonicalJSON.parse(test.input)
            try requireEqual(CanonicalJSON.serialize(value), expected, "UTF-16 order")
            try requireEqual(CanonicalJSON.serialize(value, order: .javaScript), expectedJs, "JavaScript order")
            if let enumeration = test.nodeEnumeration {
                try requireEqual(CanonicalJSON.serialize(value, order: .javaScript), enumeration, "Node enumeration")
            }
            // The expected text is itself canonical and parses to the same value.
            try requireEqual(try CanonicalJSON.parse(expected), value, "re-parse of the expected text")
            try requireEqual(try CanonicalJSON.isCanonical(Array(expected.utf8)), true, "expected text is canonical")
        case .invalid:
            let code = test.error ?? ""
            try requireFailure(
                "tcId \(test.tcId) must be rejected with \(code)",
                matches: { error in
                    (error as? CanonicalJSONError)?.code.rawValue == code
                }
            ) {
                _ = try CanonicalJSON.parse(test.input)
            }
        }
    }

    struct NumberTest: Decodable, Sendable {
        let tcId: Int
        let comment: String
        let result: VectorResult
        let flags: [String]
        let numbers: [[String]]
    }

    /// `TestVectors/canonical-json/numbers.json`: >100,000 doubles as `[bits, expected]`; each group is one case.
    package static let numbers = VectorSuite(name: "canonical-json/numbers") { locations in
        let file = try VectorFile<NumberTest>.load(locations.projectFile("canonical-json/numbers.json"))
        return file.tests.map { test in
            VectorCase(suite: "canonical-json/numbers", id: String(test.tcId), comment: test.comment) {
                try checkNumbers(test)
            }
        }
    }

    static func checkNumbers(_ test: NumberTest) throws {
        var failures: [String] = []
        for pair in test.numbers {
            guard pair.count == 2, let bits = UInt64(pair[0], radix: 16) else {
                throw VectorFormatError("tcId \(test.tcId): malformed number entry \(pair)")
            }
            let value = Double(bitPattern: bits)
            let got = CanonicalJSON.formatNumber(value)
            if got != pair[1] {
                failures.append("\(pair[0]): expected \(pair[1]), got \(got)")
            }
            // The parser reads the expected text back to exactly this double (-0 aside, which prints as 0).
            if value != 0 {
                let parsed = try CanonicalJSON.parse(pair[1])
                if parsed.numberValue?.bitPattern != bits {
                    failures.append("\(pair[0]): parsing \(pair[1]) gave \(parsed)")
                }
            }
            if failures.count >= 10 { break }
        }
        guard failures.isEmpty else {
            throw ConformanceFailure("\(failures.count) number(s) differ: " + failures.joined(separator: "; "))
        }
    }

    // MARK: BLNS (external)

    struct BLNSEntry: Sendable {
        let index: String
        let element: String
        let b64Encoded: String
    }

    /// BLNS entries, read with E3DBKit's own parser: Foundation's JSON decoder drops a leading raw U+FEFF inside a
    /// string (spec §4.8), which would corrupt entries 96 and 169. A parser bug would show as a mismatch here.
    static func loadBLNS(_ url: URL) throws -> [BLNSEntry] {
        let bytes = try Data(contentsOf: url)
        guard case .array(let items) = try CanonicalJSON.parse(bytes) else {
            throw VectorFormatError("\(url.lastPathComponent): not a JSON array")
        }
        return try items.map { item in
            guard let index = item["index"]?.stringValue, let element = item["element"]?.stringValue,
                let b64 = item["b64Encoded"]?.stringValue
            else { throw VectorFormatError("\(url.lastPathComponent): malformed entry \(item)") }
            return BLNSEntry(index: index, element: element, b64Encoded: b64)
        }
    }

    /// The canonical RecordData form of `{"<index>": element}`, standard padded base64 (as the BLNS files store it).
    static func blnsBase64(_ entry: BLNSEntry) -> String {
        let value: JSONValue = .object(JSONObject([(key: entry.index, value: .string(entry.element))]))
        return Data(CanonicalJSON.serializedBytes(value)).base64EncodedString()
    }

    /// The Java SDK's rule: the JavaScript rule with uppercase hex digits in `\u00XX` escapes.
    static func javaRule(_ entry: BLNSEntry) -> String {
        let js = CanonicalJSON.serializedBytes(
            .object(JSONObject([(key: entry.index, value: .string(entry.element))])))
        var out: [UInt8] = []
        var i = 0
        while i < js.count {
            if js[i] == UInt8(ascii: "\\"), i + 1 < js.count {
                if js[i + 1] == UInt8(ascii: "u"), i + 5 < js.count {
                    out.append(contentsOf: js[i..<(i + 2)])
                    for b in js[(i + 2)..<(i + 6)] {
                        out.append(b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f") ? b - 32 : b)
                    }
                    i += 6
                } else {
                    out.append(contentsOf: js[i..<(i + 2)])
                    i += 2
                }
            } else {
                out.append(js[i])
                i += 1
            }
        }
        return Data(out).base64EncodedString()
    }

    /// The Java file's entries that differ from the JavaScript rule by design (uppercase hex; spec §4.8).
    package static let knownJavaDivergences: Set<String> = ["92", "94", "503", "504"]

    /// `../shared/vectors/blns/blns-node.json`: all 507 entries must match byte for byte.
    package static let blnsNode = VectorSuite(name: "blns/blns-node", needsShared: true) { locations in
        guard let url = locations.sharedFile("blns/blns-node.json") else { return [] }
        let entries = try loadBLNS(url)
        var cases = [
            VectorCase(suite: "blns/blns-node", id: "count", comment: "507 entries") {
                try requireEqual(entries.count, 507, "number of BLNS entries")
            }
        ]
        cases += entries.map { entry in
            VectorCase(suite: "blns/blns-node", id: entry.index) {
                try requireEqual(blnsBase64(entry), entry.b64Encoded, "b64Encoded of BLNS entry \(entry.index)")
            }
        }
        return cases
    }

    /// `../shared/vectors/blns/blns-java.json`: matches except exactly the documented hex-case entries, each of
    /// which the Java rule (uppercase hex) explains.
    package static let blnsJava = VectorSuite(name: "blns/blns-java", needsShared: true) { locations in
        guard let url = locations.sharedFile("blns/blns-java.json") else { return [] }
        // Entry 92's element text lost its trailing DEL in the Java file (spec §4.8): take elements from the
        // Node file, which has the same indices, and compare against Java's b64Encoded.
        guard let nodeURL = locations.sharedFile("blns/blns-node.json") else { return [] }
        let java = try loadBLNS(url)
        let node = try loadBLNS(nodeURL)
        guard java.count == node.count else {
            throw VectorFormatError("blns-java has \(java.count) entries, blns-node \(node.count)")
        }
        let pairs = zip(node, java).map { (input: $0.0, java: $0.1) }
        var cases = pairs.map { pair in
            VectorCase(suite: "blns/blns-java", id: pair.java.index) {
                try requireEqual(pair.input.index, pair.java.index, "entry order")
                let ours = blnsBase64(pair.input)
                if knownJavaDivergences.contains(pair.java.index) {
                    guard ours != pair.java.b64Encoded else {
                        throw ConformanceFailure("entry \(pair.java.index) is listed as a known divergence but matches")
                    }
                    try requireEqual(javaRule(pair.input), pair.java.b64Encoded, "Java rule (uppercase hex)")
                } else {
                    try requireEqual(ours, pair.java.b64Encoded, "b64Encoded of BLNS entry \(pair.java.index)")
                }
            }
        }
        cases.append(
            VectorCase(suite: "blns/blns-java", id: "divergences", comment: "exactly 92, 94, 503, 504 differ") {
                let observed = Set(pairs.filter { blnsBase64($0.input) != $0.java.b64Encoded }.map(\.java.index))
                try requireEqual(observed, knownJavaDivergences, "entries where Java differs from Node")
            })
        return cases
    }

    // MARK: RFC 8785 reference data (external)

    /// `../shared/vectors/jcs/`: every `input/*.json` canonicalizes to `output/*.json` byte for byte.
    package static let jcs = VectorSuite(name: "jcs", needsShared: true) { locations in
        guard let inputDir = locations.sharedFile("jcs/input"), let outputDir = locations.sharedFile("jcs/output")
        else { return [] }
        let names = try FileManager.default.contentsOfDirectory(atPath: inputDir.path)
            .filter { $0.hasSuffix(".json") }.sorted()
        guard !names.isEmpty else { throw VectorFormatError("no RFC 8785 input files") }
        return names.map { name in
            VectorCase(suite: "jcs", id: name) {
                let input = try Data(contentsOf: inputDir.appendingPathComponent(name))
                let expected = try Data(contentsOf: outputDir.appendingPathComponent(name))
                let ours = CanonicalJSON.serializedBytes(try CanonicalJSON.parse(input))
                try requireEqual(Hex.encode(ours), Hex.encode(expected), "canonical bytes of \(name) (hex)")
            }
        }
    }
}
