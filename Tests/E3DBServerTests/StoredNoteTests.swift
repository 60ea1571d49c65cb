import E3DBAPI
import E3DBCanonicalJSON
import E3DBKit
import E3DBServerTestSupport
import Foundation
import Testing

@testable import E3DBServer

/// A stored note's text (`notes.body`) is checked once, by `StoredNote`, before it is stored and whenever it is read
/// back; a response splices the stored bytes with the row's `views`.
@Suite("Stored notes: one check at write and read, views spliced into the stored text")
struct StoredNoteTests {
    @Test(
        "views is spliced into the stored text as its one last member",
        arguments: [
            "{}", " {\"a\":1} \n", #"{"a":"}","b":{"c":["}}",{"d":"}"}]},"e":"\"}\\"}"#,
            #"{"note_id":"x","data":{"é":"v","e\u0301":"w"},"plain":{}}"#,
        ])
    func splice(stored: String) throws {
        let refuse = { (problem: String) in E3DBError(.storageCorrupted, problem) }
        let bytes = try StoredNote.withViews(stored, views: 7, refusal: refuse)
        let spliced = try CanonicalJSON.parse(bytes)
        guard case .object(let members) = spliced, case .object(let original) = try CanonicalJSON.parse(stored) else {
            Issue.record("\(stored): not an object")
            return
        }
        // The parser refuses a repeated member, so views is there exactly once, after the stored members.
        #expect(members["views"] == .number(7), "\(stored)")
        #expect(Array(members.map(\.key).dropLast()) == original.map(\.key), "\(stored)")
        #expect(members.map(\.key).last == "views", "\(stored)")
        for (name, value) in original { #expect(members[name] == value, "\(stored): \(name)") }
        // The stored bytes are kept as they are, up to the closing brace.
        let close = try #require(stored.utf8.lastIndex(of: UInt8(ascii: "}")))
        #expect(bytes.starts(with: stored.utf8[..<close]), "\(stored)")
    }

    @Test("a stored text that is not one JSON object without views is refused with the caller's error")
    func refused() {
        for stored in ["", "oops", "[]", #"{"a":1"#, #"{"views":0}"#, #"{"a":1,"a":2}"#, "{\"a\":9007199254740993}"] {
            #expect(throws: E3DBError(.storageCorrupted), "\(stored)") {
                _ = try StoredNote.withViews(stored, views: 0) { E3DBError(.storageCorrupted, $0) }
            }
        }
    }

    /// A note body JSONDecoder reads but the stored-note check does not (more than 1,048,576 values): refused when
    /// written or replaced, so nothing unreadable is stored and a good note is not replaced by one. (Before the
    /// check was made at write, the note was stored and every read was a 503.)
    @Test("a note with more values than a stored note may hold is refused at write and at replace, nothing stored")
    func tooManyValues() async throws {
        try await SecurityFixture.with(.sqlite) { f in
            let client = try await f.register()
            let signer = try #require(client.signingKey)
            let key = signer.publicKey.base64URLEncoded
            func note(_ name: String, fileMeta: String? = nil) -> String {
                #"{"recipient_signing_key":"\#(key)","writer_signing_key":"\#(key)","writer_encryption_key":"\#(key)","#
                    + #""encrypted_access_key":"e","id_string":"\#(name)","data":{"f":"d"}"#
                    + (fileMeta.map { #","file_meta":\#($0)"# } ?? "") + "}"
            }
            // 1.1M zeros: 2.2 MB, well under the 16 MiB body limit.
            let zeros = #"{"x":["# + String(repeating: "0,", count: 1_100_000) + "0]}"
            let path = "/v2/storage/notes"

            let big = try await f.api.send(
                "POST", path, tsv1: signer, uid: client.id, json: note("big", fileMeta: zeros))
            #expect(big.status == 400 && big.text.contains("tooManyValues"), "\(big.text.prefix(300))")
            let absent = try await f.api.send("GET", path, query: "id_string=big", tsv1: signer, uid: client.id)
            #expect(absent.status == 404, "no row was stored: \(absent.text.prefix(300))")

            let good = try await f.api.send("POST", path, tsv1: signer, uid: client.id, json: note("good"))
            #expect(good.status == 201, "\(good.text)")
            let replaced = try await f.api.send(
                "PUT", path, tsv1: signer, uid: client.id, json: note("good", fileMeta: zeros))
            #expect(replaced.status == 400 && replaced.text.contains("tooManyValues"), "\(replaced.text.prefix(300))")
            let kept = try await f.api.send("GET", path, query: "id_string=good", tsv1: signer, uid: client.id)
            #expect(kept.status == 200, "\(kept.text.prefix(300))")
            #expect(kept.json?["file_meta"] == nil && kept.json?["views"] as? Int == 1, "\(kept.text.prefix(300))")

            // The one integer of a note, beyond 2^53: refused by the same check, the message naming the member.
            let views =
                #"{"recipient_signing_key":"\#(key)","writer_signing_key":"\#(key)","writer_encryption_key":"\#(key)","#
                + #""encrypted_access_key":"e","data":{"f":"d"},"max_views":9007199254740993}"#
            let tooMany = try await f.api.send("POST", path, tsv1: signer, uid: client.id, json: views)
            #expect(tooMany.status == 400 && tooMany.text.contains("max_views must be at most 2^53"), "\(tooMany.text)")
        }
    }
}
