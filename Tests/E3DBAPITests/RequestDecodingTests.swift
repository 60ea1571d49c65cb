import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation
import Testing

/// The leniency and null/omission rules of the API bodies (spec api §1.5–§7).
@Suite("API request decoding")
struct RequestDecodingTests {
    static let me = "6f1c1a3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f"

    func decode<T: Decodable>(_ type: T.Type, _ json: String) throws -> T {
        try JSONDecoder().decode(type, from: Data(json.utf8))
    }

    func object(_ value: some Encodable) throws -> [String: Any] {
        let data = try JSONEncoder().encode(value)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func goRecordWithNullPlainAndZeroTimes() throws {
        // e3db-go: "plain": null and zero created/last_modified; also other types where the server ignores them.
        let go =
            #"{"meta":{"record_id":"","writer_id":"\#(Self.me)","user_id":"\#(Self.me)","type":"t","plain":null,"created":"0001-01-01T00:00:00Z","last_modified":"0001-01-01T00:00:00Z","version":""},"data":{"f":"a.b.c.d"}}"#
        let record = try API.Record.decodeBody(Data(go.utf8))
        #expect(record.meta.plain == nil)
        #expect(record.meta.writerID == Self.me)
        #expect(record.meta.created == "0001-01-01T00:00:00Z")
        #expect(record.data == ["f": "a.b.c.d"])
        let odd =
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","created":0,"last_modified":{},"version":null,"record_id":7}}"#
        let r = try API.Record.decodeBody(Data(odd.utf8))
        #expect(r.meta.created == nil && r.meta.lastModified == nil && r.meta.version == nil && r.meta.recordID == nil)
        #expect(r.data == [:])  // missing data is empty (file writes)
    }

    @Test("every body without a reader of its own is read with the one grammar before JSONDecoder, both ways")
    func decodedBodiesUseTheOneGrammar() throws {
        let token = #"{"access_token":"a","token_type":"Bearer","expires_in":1,"expires_at":"x"}"#
        #expect(try API.TokenResponse.decodeBody(Data(token.utf8)).accessToken == "a")
        // JSONDecoder alone takes each of these (the last of two names wins); the one grammar refuses them.
        let refused: [(body: String, why: String)] = [
            (
                #"{"access_token":"a","access_token":"b","token_type":"Bearer","expires_in":1,"expires_at":"x"}"#,
                #"repeated member "access_token""#
            ),
            ("\u{FEFF}" + token, "byte order mark"),
        ]
        for (body, why) in refused {
            #expect(throws: Never.self) { _ = try JSONDecoder().decode(API.TokenResponse.self, from: Data(body.utf8)) }
            do {
                _ = try API.TokenResponse.decodeBody(Data(body.utf8))
                Issue.record("decoded \(body)")
            } catch let error as E3DBError {
                #expect(error.code == .badRequest && error.message.contains(why), "\(error.message)")
            }
        }
        // Two names equal as Swift Strings, which a [String: String] would merge into one.
        // A plain filter (the command line reads one from a file) with a repeated condition.
        let filter = Data(#"{"eq":{"name":"a","value":"1"},"eq":{"name":"b","value":"2"}}"#.utf8)
        #expect(throws: E3DBError.self) { _ = try API.decodeChecked(API.PlainQuery.self, from: filter) }
        let merged = Data("{\"m\":{\"\u{e9}\":\"1\",\"e\u{301}\":\"2\"}}".utf8)
        #expect(try JSONDecoder().decode([String: [String: String]].self, from: merged)["m"]?.count == 1)
        #expect(throws: E3DBError.self) { _ = try API.decodeChecked([String: [String: String]].self, from: merged) }
    }

    @Test func mapsOfStringsOnly() {
        // §1.5: plain and data are string → string; other value types are refused (a 400 at the server).
        for bad in [
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":{"k":5}},"data":{}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"data":{"f":["x"]}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u"},"data":{}}"#,
        ] {
            #expect(throws: E3DBError.self) { try API.Record.decodeBody(Data(bad.utf8)) }
        }
    }

    @Test func afterIndexAsDouble() throws {
        #expect(try decode(API.QueryRequest.self, #"{"after_index":5.0}"#).afterIndex == 5)
        #expect(try decode(API.QueryRequest.self, #"{"after_index":5}"#).afterIndex == 5)
        #expect(try decode(API.QueryRequest.self, #"{"after_index":null,"plain":null}"#).afterIndex == nil)
        for bad in [#"{"after_index":5.5}"#, #"{"after_index":1e300}"#, #"{"after_index":"5"}"#] {
            #expect(throws: DecodingError.self) { try decode(API.QueryRequest.self, bad) }
        }
    }

    @Test func plainQueryForms() throws {
        let python = try decode(
            API.QueryRequest.self,
            #"{"count":100,"after_index":0,"include_data":true,"writer_ids":[],"user_ids":[],"record_ids":[],"content_types":[],"plain":{"and":[{"eq":{"name":"a","value":"1"}},{"not":{"eq":{"name":"b","value":"3"}}}]},"include_all_writers":false}"#
        )
        #expect(python.plain == .and([.equals(name: "a", value: "1"), .not(.equals(name: "b", value: "3"))]))
        // e3db-go's flat map is the AND of its equalities, keys named like operators included.
        let flat = try decode(API.PlainQuery.self, #"{"b":"2","a":"1"}"#)
        #expect(flat == .and([.equals(name: "a", value: "1"), .equals(name: "b", value: "2")]))
        #expect(flat.matches(["a": "1", "b": "2", "c": "3"]))
        #expect(!flat.matches(["a": "1"]))
        #expect(
            try decode(API.PlainQuery.self, #"{"eq":"x","not":"y"}"#)
                == .and([.equals(name: "eq", value: "x"), .equals(name: "not", value: "y")]))
        #expect(try decode(API.PlainQuery.self, "{}").matches([:]))
        #expect(throws: DecodingError.self) { try decode(API.PlainQuery.self, #"{"not":5}"#) }
        // FailCase FuzzAPIBodies/plainquery-deeper-than-the-encoder: 511 nested `not`s decoded (JSONDecoder allows
        // 512 levels) but could not be encoded again (`{"and":[]}` at the bottom is one level deeper).
        let deep = String(repeating: #"{"not":"#, count: 511) + "{}" + String(repeating: "}", count: 511)
        #expect(throws: DecodingError.self) { try decode(API.PlainQuery.self, deep) }
        let ok = String(repeating: #"{"not":"#, count: 50) + "{}" + String(repeating: "}", count: 50)
        let query = try decode(API.QueryRequest.self, #"{"plain":"# + ok + "}")
        #expect(try JSONDecoder().decode(API.QueryRequest.self, from: JSONEncoder().encode(query)) == query)
        #expect(throws: DecodingError.self) { try decode(API.PlainQuery.self, #"["a"]"#) }
    }

    @Test("a plain filter compares names and values by code units: \"é\" and \"e\\u{301}\" never match each other")
    func plainFilterComparesCodeUnits() {
        let nfc = "\u{e9}"
        let nfd = "e\u{301}"
        #expect(nfc == nfd, "Swift String equality calls them equal (canonical equivalence)")
        let byName: RecordData = [nfc: "x"]
        #expect(API.PlainQuery.equals(name: nfc, value: "x").matches(byName))
        #expect(!API.PlainQuery.equals(name: nfd, value: "x").matches(byName))
        #expect(!API.PlainQuery.equals(name: nfc, value: "x").matches([nfd: "x"]))
        let byValue: RecordData = ["k": nfd]
        #expect(API.PlainQuery.equals(name: "k", value: nfd).matches(byValue))
        #expect(!API.PlainQuery.equals(name: "k", value: nfc).matches(byValue))
        // Twins are two members, each matched by its own name only.
        let twins: RecordData = {
            var map = RecordData()
            map[nfc] = "1"
            map[nfd] = "2"
            return map
        }()
        #expect(twins.count == 2)
        #expect(API.PlainQuery.equals(name: nfd, value: "2").matches(twins))
        #expect(!API.PlainQuery.equals(name: nfd, value: "1").matches(twins))
        #expect(API.PlainQuery.not(.equals(name: nfc, value: "2")).matches(twins))
    }

    @Test func searchResultsCarryNullDataAndAccessKey() throws {
        let meta = API.Meta(
            recordID: "r", writerID: "w", userID: "u", type: "t", plain: [:], created: "c",
            lastModified: "m", version: "v")
        // Written by the record writer (API.SearchResult is not Encodable), as the server writes a result.
        let body = try API.QueryResponse(
            results: [API.SearchResult(meta: meta, recordData: nil, accessKey: nil)], lastIndex: 0
        ).encodeBody()
        let page = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        let o = try #require((page["results"] as? [[String: Any]])?.first)
        #expect(o["record_data"] is NSNull)
        #expect(o["access_key"] is NSNull)
        #expect(o["rec_sig"] == nil)
        let m = try #require(o["meta"] as? [String: Any])
        #expect(m["file_meta"] == nil)  // omitted, never null (js would treat the record as a file)
        #expect(m["plain"] is [String: Any])
    }

    @Test("search responses written by encodeBody() read back by decodeBody(_:) as they were")
    func searchResponsesRoundTrip() throws {
        let meta = API.Meta(
            recordID: "r", writerID: "w/1", userID: "u", type: "t\"", plain: ["é": "1", "e\u{301}": "2"],
            created: "c", lastModified: "m", version: "v",
            fileMeta: API.FileMeta(fileName: "f", checksum: "x", compression: "raw", size: 12))
        let key = API.EAKInfo(
            eak: "e", authorizerID: "a", authorizerPublicKey: .init(curve25519: "p"), signerID: "s",
            signerSigningKey: .init(ed25519: "k"))
        let results = [
            API.SearchResult(meta: meta, recordData: ["f": "v\n"], accessKey: key, recSig: "sig"),
            API.SearchResult(meta: meta, recordData: nil, accessKey: nil),
        ]
        let v1 = API.QueryResponse(results: results, lastIndex: 9)
        #expect(try API.QueryResponse.decodeBody(v1.encodeBody()) == v1)
        let v2 = API.SearchResponse(results: results, lastIndex: 0, totalResults: 2, searchID: "id")
        #expect(try API.SearchResponse.decodeBody(v2.encodeBody()) == v2)
        let empty = String(decoding: try API.QueryResponse(results: [], lastIndex: 3).encodeBody(), as: UTF8.self)
        #expect(empty == #"{"results":[],"last_index":3}"#)
    }

    @Test func signingKeysAreNullNotAbsent() throws {
        let registration = try object(
            API.RegistrationResponse(
                clientID: "c", apiKeyID: "k", apiSecret: "s", name: "n", publicKey: .init(curve25519: "p"),
                signingKey: nil))
        #expect(registration["signing_key"] is NSNull)
        let info = try object(API.ClientInfo(clientID: "c", publicKey: .init(curve25519: "p"), signingKey: nil))
        #expect(info["signing_key"] is NSNull)
        let eak = try object(
            API.EAKInfo(
                eak: "e", authorizerID: "a", authorizerPublicKey: .init(curve25519: "p"),
                signerID: nil, signerSigningKey: nil))
        #expect(eak["signer_signing_key"] is NSNull)
        #expect(eak["signer_id"] == nil)
        // Requests: a registration without (or with a null) signing key decodes.
        let go = try decode(
            API.RegistrationRequest.self,
            #"{"token":"t","client":{"name":"n","public_key":{"curve25519":"p"},"signing_key":null}}"#)
        #expect(go.client.signingKey == nil)
    }

    @Test func fileMetaOnlyOnFiles() throws {
        let file = API.Meta(
            recordID: "r", writerID: "w", userID: "u", type: "t", plain: [:],
            fileMeta: .init(fileName: "f", checksum: "c", size: 4))
        // Meta is written by the record writer only (not Encodable): as part of a record body.
        func object(_ meta: API.Meta) throws -> [String: Any] {
            let body = API.Record(meta: meta, data: [:]).encodeBody()
            let record = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
            return try #require(record["meta"] as? [String: Any])
        }
        let fm = try #require(try object(file)["file_meta"] as? [String: Any])
        #expect(fm["file_url"] is NSNull)  // Python reads the key
        #expect(fm["compression"] as? String == "raw")
        let plain = API.Meta(recordID: "r", writerID: "w", userID: "u", type: "t", plain: [:])
        #expect(try object(plain).keys.contains("file_meta") == false)
    }

    @Test func notesAcceptNullForEveryOptionalMember() throws {
        let swift =
            #"{"note_id":null,"id_string":null,"client_id":"ABC","mode":"Sodium","recipient_signing_key":"r","writer_signing_key":"w","writer_encryption_key":"e","encrypted_access_key":"k","type":null,"data":{"f":"x"},"plain":null,"file_meta":null,"signature":null,"max_views":null,"views":null,"expiration":null,"expires":null,"eacp":null,"created_at":null}"#
        let note = try decode(API.Note.self, swift)
        #expect(note.idString == nil && note.plain == nil && note.fileMeta == nil && note.maxViews == nil)
        // Python sends plain inside file_meta and a float max_views; a non-map plain is dropped.
        let python = try decode(
            API.Note.self,
            #"{"mode":"sodium","recipient_signing_key":"r","writer_signing_key":"w","writer_encryption_key":"e","encrypted_access_key":"k","data":{"f":"x"},"plain":[1],"file_meta":{"a":"b"},"max_views":3.0,"expiration":"0001-01-01T00:00:00Z"}"#
        )
        #expect(python.plain == nil)
        #expect(python.fileMeta == .object(["a": .string("b")]))
        #expect(python.maxViews == 3)
        #expect(throws: DecodingError.self) {
            try decode(
                API.Note.self,
                #"{"recipient_signing_key":"r","writer_signing_key":"w","writer_encryption_key":"e","encrypted_access_key":"k"}"#
            )
        }
    }

    @Test func searchRequestsOfEverySDK() throws {
        let python = try decode(
            API.SearchRequest.self,
            #"{"limit":50,"next_token":0,"include_all_writers":false,"include_data":true,"match":[{"condition":"OR","strategy":"EXACT","terms":{"writer_ids":[],"user_ids":[],"record_ids":[],"content_types":["t"],"keys":[],"values":[],"tags":null}}],"exclude":[],"range":{}}"#
        )
        #expect(python.match?.first?.terms?.tags == nil)
        #expect(python.range == API.SearchRange())
        let js = try decode(
            API.SearchRequest.self,
            #"{"limit":2,"include_data":false,"group_ids":[],"order":{"sort_order":"ASCENDING"},"range":{"range_key":"CREATED","after":"2026-01-01T00:00:00.000Z"}}"#
        )
        #expect(js.range?.after == "2026-01-01T00:00:00.000Z")
        #expect(js.nextToken == nil)
    }

    @Test func policyBodies() throws {
        for verb in ["read", "authorizer"] {
            let allow = try decode(API.PolicyRequest.self, #"{"allow":[{"\#(verb)":{}}]}"#)
            #expect(allow.allow?.first?.keys.first == verb && allow.deny == nil)
            let deny = try decode(API.PolicyRequest.self, #"{"deny":[{"\#(verb)":{}}]}"#)
            #expect(deny.deny?.first?[verb] == .object([:]))
        }
    }

    @Test("a note's file_meta and eacp and the policy verbs go back on the wire as they came (JSONValue)")
    func passThroughMembersKeepTheirJSON() throws {
        let body =
            #"{"recipient_signing_key":"r","writer_signing_key":"w","writer_encryption_key":"e","encrypted_access_key":"k","data":{"f":"x"},"file_meta":{"size":5,"big":9007199254740993,"ratio":1.5,"list":[true,null,"s",{"n":-3}]},"eacp":{}}"#
        let note = try decode(API.Note.self, body)
        #expect(note.eacp == .object([:]))
        let fileMeta = try #require(note.fileMeta?.objectValue)
        #expect(fileMeta["size"] == .number(5))
        #expect(fileMeta["list"] == [true, nil, "s", ["n": -3]])
        // Integral numbers are written without a fraction, as the SDKs sent them; the note comes back equal.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let text = String(decoding: try encoder.encode(note), as: UTF8.self)
        #expect(
            text.contains(#""file_meta":{"big":9007199254740992,"list":[true,null,"s",{"n":-3}],"ratio":1.5,"size":5}"#)
        )
        #expect(text.contains(#""eacp":{}"#))
        #expect(try decode(API.Note.self, text) == note)
        // The policy verbs' empty objects.
        let policy = API.PolicyRequest(allow: [["read": .object([:])]], deny: [["authorizer": [:]]])
        #expect(
            String(decoding: try encoder.encode(policy), as: UTF8.self)
                == #"{"allow":[{"read":{}}],"deny":[{"authorizer":{}}]}"#)
        #expect(try decode(API.PolicyRequest.self, #"{"allow":[{"read":{}}],"deny":[{"authorizer":{}}]}"#) == policy)
        // A verb list element that is not an object is refused, as a dictionary of values was.
        #expect(throws: DecodingError.self) { try decode(API.PolicyRequest.self, #"{"allow":["read"]}"#) }
    }
}
