// E3DBCanonicalJSON against Foundation's JSONEncoder with `.sortedKeys` (and `.withoutEscapingSlashes`, so both
// produce the same bytes), on the same documents, in the same run.
//
// Every operation is registered as "<operation> (API)" and "<operation> (JSONEncoder)"; `scripts/benchmarks.sh`
// pairs them and reports the ratio. Before registering, each pair is checked to produce identical bytes.
//
// - "Canonical small record": a record-sized object (ClientMeta-like metadata and ten string fields), from an
//   in-memory value: `CanonicalJSON.serializedBytes(value)` vs `JSONEncoder.encode(value)` of the same JSONValue.
// - "Canonical 1MiB document": a 1 MiB document of nested objects, arrays, strings and integers, the same way.
// - "Encodable small record": from a Codable struct: `JSONValueEncoder().canonicalBytes(record)` vs
//   `JSONEncoder.encode(record)`, the path a caller with their own types takes.
//
// Target (issue 3): the canonical serializer at ≥ 2× JSONEncoder's throughput.

import Benchmark
import E3DBCanonicalJSON
import Foundation

struct Record: Codable, Sendable {
    struct Meta: Codable, Sendable {
        let plain: [String: String]
        let type: String
        let user_id: String
        let writer_id: String
    }
    let data: [String: String]
    let meta: Meta
    let rec_sig: String
}

func makeRecord() -> Record {
    var data: [String: String] = [:]
    for i in 0..<10 { data["field_\(i)"] = String(repeating: "v\(i)", count: 16) }
    return Record(
        data: data,
        meta: .init(
            plain: ["client_pub_sig_key": "fcyEKo6HSZo9iebWAQnEemVfqpTUzzR0VNBqgJJG-LY", "tag": "invoice"],
            type: "ticket", user_id: "d405a1ce-e528-4946-8682-4c2369a26604",
            writer_id: "d405a1ce-e528-4946-8682-4c2369a26604"),
        rec_sig: "CZgu_6s-nLLetYy_BS16sKkWJlLcZ2sTem7NMEYWSgbX3BegPrYGMz6CVAFHlrNZNyk8imeDGMoUW0li9ognDw")
}

/// About `bytes` of canonical JSON: an array of objects with strings, integers, booleans and a nested array.
func makeDocument(bytes: Int) -> JSONValue {
    var items: [JSONValue] = []
    var size = 0
    var i = 0
    while size < bytes {
        let object = JSONObject([
            ("id", .number(Double(i))),
            ("name", .string("item number \(i) with a \"quoted\" name")),
            ("tags", .array([.string("alpha"), .string("béta"), .string("γάμμα")])),
            ("active", .bool(i % 2 == 0)),
            ("owner", .string("d405a1ce-e528-4946-8682-4c2369a26604")),
        ])
        items.append(.object(object))
        size += 150
        i += 1
    }
    return .object(JSONObject([("items", .array(items)), ("count", .number(Double(i)))]))
}

func config(_ seconds: Int = 2) -> Benchmark.Configuration {
    .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        timeUnits: .nanoseconds,
        warmupIterations: 3,
        maxDuration: .seconds(seconds),
        maxIterations: 200_000
    )
}

let benchmarks: @Sendable () -> Void = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let record = makeRecord()
    let recordValue: JSONValue
    let document = makeDocument(bytes: 1 << 20)
    do {
        recordValue = try JSONValueEncoder().encode(record)
        // Same bytes on both sides, or the comparison means nothing.
        let recordFoundation = try encoder.encode(recordValue)
        let encodableFoundation = try encoder.encode(record)
        let encodableCanonical = try JSONValueEncoder().canonicalBytes(record)
        let documentFoundation = try encoder.encode(document)
        precondition(recordFoundation == Data(CanonicalJSON.serializedBytes(recordValue)), "record bytes differ")
        precondition(encodableFoundation == Data(encodableCanonical), "Encodable record bytes differ")
        precondition(documentFoundation == Data(CanonicalJSON.serializedBytes(document)), "document bytes differ")
    } catch {
        preconditionFailure("benchmark set-up failed: \(error)")
    }

    Benchmark("Canonical small record (API)", configuration: config()) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(CanonicalJSON.serializedBytes(recordValue)) }
    }
    Benchmark("Canonical small record (JSONEncoder)", configuration: config()) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try encoder.encode(recordValue)) }
    }
    Benchmark("Canonical 1MiB document (API)", configuration: config(3)) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(CanonicalJSON.serializedBytes(document)) }
    }
    Benchmark("Canonical 1MiB document (JSONEncoder)", configuration: config(3)) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try encoder.encode(document)) }
    }
    Benchmark("Encodable small record (API)", configuration: config()) { benchmark in
        let bridge = JSONValueEncoder()
        for _ in benchmark.scaledIterations { blackHole(try bridge.canonicalBytes(record)) }
    }
    Benchmark("Encodable small record (JSONEncoder)", configuration: config()) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try encoder.encode(record)) }
    }
}
