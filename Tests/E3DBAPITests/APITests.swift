import E3DBAPI
import E3DBPrimitives
import Foundation
import Testing

@Suite("Wire timestamps")
struct APITimestampTests {
    @Test func formatsSixDigitsAndZ() {
        #expect(APITimestamp.format(micros: 0) == "1970-01-01T00:00:00.000000Z")
        #expect(APITimestamp.format(micros: 1_764_070_496_123_456) == "2025-11-25T11:34:56.123456Z")
        #expect(APITimestamp.format(micros: 951_782_400_000_001) == "2000-02-29T00:00:00.000001Z")
    }

    @Test func parsesTheFormsSDKsSend() {
        #expect(APITimestamp.parse("2025-11-25T11:34:56.123456Z") == 1_764_070_496_123_456)
        #expect(APITimestamp.parse("2025-11-25T11:34:56Z") == 1_764_070_496_000_000)
        #expect(APITimestamp.parse("2025-11-25T04:34:56-07:00") == 1_764_070_496_000_000)
        #expect(APITimestamp.parse("2025-11-25T11:34:56.1+00:00") == 1_764_070_496_100_000)
        #expect(APITimestamp.parse("2025-11-25T11:34:56.1234567Z") == 1_764_070_496_123_456)
        #expect(APITimestamp.parse("0001-01-01T00:00:00Z") == APITimestamp.goZeroTime)
        #expect(APITimestamp.parse("2025-11-25 11:34:56.123456") == 1_764_070_496_123_456, "Python's isoformat(' ')")
        // Refused (a note's expiration in these forms was stored as never expiring before it was checked).
        for bad in [
            "", "2025-11-25", "2025-13-01T00:00:00Z", "2025-11-25T11:34:56.Z", "2025-11-25T11:34:56+0700",
            "2025-11-25T11:34:56+0000", "2025-11-25T11:34Z", "2025-11-25T11:34", " 2025-11-25T11:34:56Z",
            "2025-11-25T11:34:56Z ", "2025-11-25T11:34:56Zjunk",
        ] {
            #expect(APITimestamp.parse(bad) == nil, "\(bad)")
        }
    }

    @Test("a date that does not exist is refused, not moved to the next month")
    func impossibleDatesAreRefused() {
        #expect(
            APITimestamp.parse("2028-02-29T00:00:00Z")
                == APITimestamp.parse("2028-03-01T00:00:00Z").map {
                    $0 - 86_400_000_000
                })
        #expect(APITimestamp.parse("2000-02-29T12:00:00Z") != nil, "2000 is a leap year (divisible by 400)")
        #expect(APITimestamp.parse("2026-12-31T23:59:59Z") != nil)
        for bad in [
            "2026-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-02-30T00:00:00Z", "2026-02-31T00:00:00Z",
            "2026-04-31T00:00:00Z", "2026-06-31T00:00:00+02:00", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z",
            "2026-01-00T00:00:00Z", "2026-01-32T00:00:00Z",
        ] {
            #expect(APITimestamp.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func roundTrips() {
        for micros: Int64 in [0, 1, 999_999, 1_700_000_000_000_000, 4_102_444_800_000_000] {
            #expect(APITimestamp.parse(APITimestamp.format(micros: micros)) == micros)
        }
    }
}

@Suite("TSV1 verification")
struct TSV1VerificationTests {
    let key = Ed25519.PrivateKey()

    func header(path: String, query: String, method: String = "GET", at ts: Int64 = 1_000, uid: String = "") throws
        -> String
    {
        try TSV1.authorization(
            path: path, query: query, method: method, timestamp: ts,
            nonce: "00000000-0000-4000-8000-000000000001", clientID: uid, signingKey: key)
    }

    @Test func acceptsPythonAndJsCanonicalForms() throws {
        // Python re-encodes the query; js sorts the raw pairs.
        let python = try header(path: "/v2/storage/notes", query: TSV1.canonicalQuery("id_string=a%24b"))
        let v = try TSV1.verify(
            authorization: python, rawPath: "/v2/storage/notes", rawQuery: "id_string=a%24b",
            method: "GET", now: 1_000)
        #expect(v.clientID == nil)
        #expect(v.signingKey == key.publicKey)
        let js = try header(path: "/v2/storage/notes", query: "a=1&b=(x)")  // js: the raw pairs, sorted
        _ = try TSV1.verify(
            authorization: js, rawPath: "/v2/storage/notes", rawQuery: "b=(x)&a=1", method: "GET",
            now: 1_000)
        // Old Swift signs the decoded path and an uppercase uid.
        let swift = try header(path: "/v2/storage/notes/a b", query: "", uid: "ABC")
        let s = try TSV1.verify(
            authorization: swift, rawPath: "/v2/storage/notes/a%20b", rawQuery: "", method: "GET",
            now: 1_000)
        #expect(s.clientID == "abc")
    }

    @Test func rejectsTamperingExpiryAndGarbage() throws {
        let h = try header(path: "/v2/storage/notes", query: "note_id=1")
        #expect(throws: E3DBError(.tsv1BadSignature)) {
            try TSV1.verify(
                authorization: h, rawPath: "/v2/storage/notes", rawQuery: "note_id=2", method: "GET", now: 1_000)
        }
        #expect(throws: E3DBError(.tsv1BadSignature)) {
            try TSV1.verify(
                authorization: h, rawPath: "/v2/storage/notes", rawQuery: "note_id=1", method: "POST", now: 1_000)
        }
        #expect(throws: E3DBError(.tsv1Expired)) {
            try TSV1.verify(
                authorization: h, rawPath: "/v2/storage/notes", rawQuery: "note_id=1", method: "GET", now: 1_301)
        }
        for bad in [
            "", "TSV1-ED25519-BLAKE2B", "Bearer x", h.replacingOccurrences(of: "; uid:", with: "; id:"),
            h.replacingOccurrences(of: "; 1000;", with: "; soon;"), String(h.dropLast(4)),
        ] {
            #expect(throws: E3DBError.self) {
                try TSV1.verify(
                    authorization: bad, rawPath: "/v2/storage/notes", rawQuery: "note_id=1", method: "GET",
                    now: 1_000)
            }
        }
    }
}
