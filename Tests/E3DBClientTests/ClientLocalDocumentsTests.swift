import E3DBAPI
import E3DBCanonicalJSON
import E3DBClient
import E3DBDocuments
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

@Suite("E3DBClient local documents: writer and reader keys, encrypt, decrypt, sign, verify")
struct ClientLocalDocumentsTests {
    @Test(
        "a document encrypted locally opens for its writer and, once shared, for a reader; tampering is refused",
        arguments: ClientTransport.allCases)
    func localRoundTrip(transport: ClientTransport) async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice", transport: transport)
        let bob = try await server.register("bob", transport: transport)

        let writerKey = try await alice.writerKey(type: "UserInfo")
        #expect(try await alice.writerKey(type: "UserInfo") == writerKey)
        let encrypted = try alice.encrypt(
            type: "UserInfo", data: ["SSN": "123-45-6789"],
            plain: ["Sent from": "my iPhone"], eakInfo: writerKey)
        #expect(encrypted.data["SSN"] != "123-45-6789")
        #expect(encrypted.recordSignature != nil)
        let mine = try alice.decrypt(encrypted, eakInfo: writerKey)
        #expect(mine.data["SSN"] == "123-45-6789")
        #expect(mine.signatureStatus == .verified)

        // A record written through the server under the same key opens with the locally fetched key too.
        let stored = try await alice.write(type: "UserInfo", data: ["SSN": "000"])
        #expect(stored.data["SSN"] == "000")

        await #expect(throws: E3DBError.self) { _ = try await bob.readerKey(writer: alice.clientID, type: "UserInfo") }
        try await alice.share(type: "UserInfo", with: bob.clientID)
        let readerKey = try await bob.readerKey(writer: alice.clientID, type: "UserInfo")
        let theirs = try bob.decrypt(encrypted, eakInfo: readerKey)
        #expect(theirs.data == mine.data)
        #expect(theirs.signatureStatus == .verified)
        // Bob's key is his: Alice cannot open it, and Bob cannot encrypt as Alice with it.
        #expect(throws: E3DBError.self) { _ = try alice.decrypt(encrypted, eakInfo: readerKey) }

        var tampered = encrypted
        tampered.meta.plain = ["Sent from": "somewhere else"]
        let error = #expect(throws: E3DBError.self) { _ = try bob.decrypt(tampered, eakInfo: readerKey) }
        #expect(error?.code == .invalidSignature)
    }

    @Test(
        "sign and verify: own key by default, another client's key from its public info",
        arguments: ClientTransport.allCases)
    func signAndVerify(transport: ClientTransport) async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice", transport: transport)
        let bob = try await server.register("bob", transport: transport)
        let document = DecryptedDocument(
            meta: ClientMeta(writerID: alice.clientID, userID: alice.clientID, type: "note"), data: ["text": "hi"])
        let signed = try alice.sign(document)
        try alice.verify(signed)
        let info = try await bob.clientInfo(alice.clientID)
        let key = try Ed25519.PublicKey(base64URLEncoded: try #require(info.signingKey?.ed25519))
        try bob.verify(signed, publicSigningKey: key)
        let error = #expect(throws: E3DBError.self) { try bob.verify(signed) }
        #expect(error?.code == .invalidSignature)
        let forged = SignedDocument(
            document: DecryptedDocument(meta: document.meta, data: ["text": "bye"]),
            signature: signed.signature)
        #expect(throws: E3DBError.self) { try bob.verify(forged, publicSigningKey: key) }
    }
}
