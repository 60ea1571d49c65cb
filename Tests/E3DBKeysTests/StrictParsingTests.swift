import E3DBKeys
import E3DBPrimitives
import Foundation
import Testing

/// Regression tests for the adversarial review's D4, D12 and D14: identity and EAKInfo JSON go through the strict
/// parser, member types are checked, and no error shows key material.
@Suite("Strict identity and EAKInfo parsing")
struct StrictParsingTests {
    let alice = ClientIdentity.generate(clientID: UUID())
    let bob = ClientIdentity.generate(clientID: UUID())

    /// The identity's JSON text with `extra` spliced in before the closing brace.
    func identityText(_ identity: ClientIdentity, appending extra: String) -> Data {
        var text = String(decoding: identity.configJSON(), as: UTF8.self)
        text = String(text.trimmingCharacters(in: .whitespacesAndNewlines).dropLast()) + extra + "}"
        return Data(text.utf8)
    }

    func eakInfoText(appending extra: String, prepending first: String = "") throws -> (Data, EAKInfo) {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let text = String(decoding: info.jsonData(), as: UTF8.self)
        return (Data(("{" + first + text.dropFirst().dropLast() + extra + "}").utf8), info)
    }

    func expectField(_ code: E3DBError.Code, _ field: String?, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("accepted")
        } catch let error as E3DBError {
            #expect(error.code == code, "\(error)")
            #expect(error.context.field == field, "\(error)")
        } catch {
            Issue.record("untyped error \(error)")
        }
    }

    // MARK: D4

    @Test("D4: a duplicated signer_signing_key is rejected, first or last")
    func duplicateSignerKey() throws {
        let eve = ClientIdentity.generate(clientID: UUID())
        let member = "\"signer_signing_key\":{\"ed25519\":\"\(eve.publicSigningKey!.base64URLEncoded)\"}"
        let (first, _) = try eakInfoText(appending: "", prepending: member + ",")
        let (last, _) = try eakInfoText(appending: "," + member)
        for data in [first, last] {
            expectField(.invalidEAKInfo, "signer_signing_key") { _ = try EAKInfo(jsonData: data) }
        }
        // A duplicate inside the nested object is named by its top-level member.
        let key = alice.publicSigningKey!.base64URLEncoded
        let (_, info) = try eakInfoText(appending: "")
        var nested = String(decoding: info.jsonData(), as: UTF8.self)
        nested = nested.replacingOccurrences(
            of: "{\"ed25519\":\"\(key)\"}",
            with: "{\"ed25519\":\"\(key)\",\"ed25519\":\"\(eve.publicSigningKey!.base64URLEncoded)\"}")
        expectField(.invalidEAKInfo, "signer_signing_key") { _ = try EAKInfo(jsonData: Data(nested.utf8)) }
        // Every other member too.
        for name in ["eak", "authorizer_id", "authorizer_public_key", "signer_id"] {
            let (doubled, parsed) = try eakInfoText(appending: "")
            let object = try JSONSerialization.jsonObject(with: parsed.jsonData()) as? [String: Any]
            let again = try JSONSerialization.data(withJSONObject: [name: object?[name] ?? ""])
            let text =
                String(decoding: doubled, as: UTF8.self).dropLast() + ","
                + String(decoding: again, as: UTF8.self).dropFirst()
            expectField(.invalidEAKInfo, name) { _ = try EAKInfo(jsonData: Data(text.utf8)) }
        }
    }

    // MARK: D14

    @Test("D14: identity members of the wrong type or repeated are rejected, naming the member")
    func identityMemberTypes() throws {
        let bobPrivate = bob.boxKey.base64URLEncoded
        expectField(.invalidClientConfig, "private_key") {
            _ = try ClientIdentity(configJSON: identityText(alice, appending: ",\"private_key\":\"\(bobPrivate)\""))
        }
        let cases: [(String, String)] = [
            ("public_key", "{\"curve25519\":\"\(bob.publicKey.base64URLEncoded)\"}"),
            ("private_signing_key", "true"),
            ("private_key", "42"),
            ("public_signing_key", "[]"),
            ("client_id", "7"),
            ("api_secret", "{}"),
            ("version", "[2]"),
        ]
        for (name, value) in cases {
            let base = ClientIdentity(
                clientID: alice.clientID, boxKey: alice.boxKey,
                signingKey: name == "private_signing_key" ? nil : alice.signingKey)
            var text = String(decoding: base.configJSON(), as: UTF8.self)
            // Drop the member (if written) and add it back with the wrong type.
            if let range = text.range(of: "\"\(name)\":\"[^\"]*\"", options: .regularExpression) {
                text.replaceSubrange(range, with: "\"\(name)\":\(value)")
            } else {
                text =
                    String(text.trimmingCharacters(in: .whitespacesAndNewlines).dropLast()) + ",\"\(name)\":\(value)}"
            }
            expectField(.invalidClientConfig, name) { _ = try ClientIdentity(configJSON: Data(text.utf8)) }
        }
        // The old Swift spelling is type-checked as well.
        expectField(.invalidClientConfig, "private_sig_key") {
            _ = try ClientIdentity(configJSON: identityText(alice, appending: ",\"private_sig_key\":false"))
        }
    }

    @Test("D14: identity and EAKInfo text that is not strict JSON is rejected")
    func notStrictJSON() throws {
        let bad: [[UInt8]] = [
            Array(",\"junk\":\"".utf8) + [0xFF, 0xFE] + Array("\"".utf8),  // invalid UTF-8
            Array(",\"junk\":\"\\ud800\"".utf8),  // lone surrogate
            Array(",\"junk\":\"a".utf8) + [0x01] + Array("\"".utf8),  // raw control byte
        ]
        for extra in bad {
            var raw = Array(alice.configJSON())
            while raw.last == 0x0A || raw.last == 0x7D { raw.removeLast() }
            raw += extra + [0x7D]
            #expect(throws: E3DBError(.invalidClientConfig)) { try ClientIdentity(configJSON: raw) }
            let (_, info) = try eakInfoText(appending: "")
            var eak = Array(info.jsonData())
            eak.removeLast()
            eak += extra + [0x7D]
            #expect(throws: E3DBError(.invalidEAKInfo)) { try EAKInfo(jsonData: eak) }
        }
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        #expect(throws: E3DBError(.invalidClientConfig)) {
            try ClientIdentity(configJSON: bom + Array(alice.configJSON()))
        }
        let (_, info) = try eakInfoText(appending: "")
        #expect(throws: E3DBError(.invalidEAKInfo)) { try EAKInfo(jsonData: bom + Array(info.jsonData())) }
    }

    @Test("EAKInfo members of the wrong type are rejected, naming the member")
    func eakInfoMemberTypes() throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let good = try #require(JSONSerialization.jsonObject(with: info.jsonData()) as? [String: Any])
        let cases: [(String, Any)] = [
            ("authorizer_public_key", 5), ("authorizer_public_key", ["curve25519": 5]), ("signer_id", true),
            ("signer_signing_key", ["ed25519": []]), ("signer_signing_key", 1), ("access_key_wrappers", "x"),
            ("eak", NSNull()), ("authorizer_id", ["x"]),
        ]
        for (name, value) in cases {
            var object = good
            object[name] = value
            let data = try JSONSerialization.data(withJSONObject: object)
            expectField(.invalidEAKInfo, name) { _ = try EAKInfo(jsonData: data) }
        }
    }

    @Test("accepted shapes still load: Python v1 empty strings, null optional members, old Swift names")
    func acceptedShapes() throws {
        let text = """
            {"version": 1, "client_id": null, "api_key_id": null, "api_secret": null, "client_email": null,
             "public_key": "\(alice.publicKey.base64URLEncoded)", "private_key": "\(alice.boxKey.base64URLEncoded)",
             "public_sig_key": "\(alice.publicSigningKey!.base64URLEncoded)",
             "private_sig_key": "\(alice.signingKey!.base64URLEncoded)", "client_name": "n", "unknown": {"x": [1]}}
            """
        let identity = try ClientIdentity(configJSON: Data(text.utf8))
        #expect(identity.publicSigningKey == alice.publicSigningKey)
        #expect(identity.clientID == nil)
        #expect(identity.apiSecret == nil)
    }

    @Test("secrets written with JSON escapes are refused rather than decoded through a String")
    func escapedSecret() throws {
        let key = alice.boxKey.base64URLEncoded
        let escaped = "\\u00" + String(key.utf8.first!, radix: 16) + key.dropFirst()
        var object = try #require(JSONSerialization.jsonObject(with: alice.configJSON()) as? [String: Any])
        object.removeValue(forKey: "private_key")
        let text =
            String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self).dropLast()
            + ",\"private_key\":\"\(escaped)\"}"
        expectField(.invalidClientConfig, "private_key") { _ = try ClientIdentity(configJSON: Data(text.utf8)) }
    }

    // MARK: D12

    @Test("D12: no error message or description shows key text")
    func errorsHideKeys() throws {
        let secret = alice.boxKey.base64URLEncoded
        // Raw bytes where base64url belongs, in the private key and in an access key.
        let broken = String(secret.prefix(20)) + "\u{00DE}\u{00AD}" + String(secret.dropFirst(22))
        var object = try #require(JSONSerialization.jsonObject(with: alice.configJSON()) as? [String: Any])
        object["private_key"] = broken
        let data = try JSONSerialization.data(withJSONObject: object)
        var messages: [String] = []
        do { _ = try ClientIdentity(configJSON: data) } catch { messages.append(error.description) }
        do { _ = try AccessKey(base64URLEncoded: broken) } catch { messages.append(error.description) }
        do { _ = try Box.PrivateKey(base64URLEncoded: "A" + broken) } catch { messages.append(error.description) }
        object["private_key"] = secret
        object["private_signing_key"] = String(alice.signingKey!.base64URLEncoded.dropLast(3)) + "*!?"
        let signingData = try JSONSerialization.data(withJSONObject: object)
        do { _ = try ClientIdentity(configJSON: signingData) } catch { messages.append(error.description) }
        #expect(messages.count == 4)
        for message in messages {
            for needle in ["\u{00DE}", "\u{00AD}", "0xde", "0xc3", "*", "!", "?", String(secret.prefix(8))] {
                #expect(!message.lowercased().contains(needle.lowercased()), "\(message) shows \(needle)")
            }
        }
    }
}
