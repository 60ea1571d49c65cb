import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBKit
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Testing

@testable import E3DBClient

@Suite("E3DBClient notes and group-wrapped keys against e3dbkit-server", .serialized, .postgresServer)
struct ClientNotesTests {
    @Test(
        "anonymous notes: written and read with unregistered key pairs, names dropped, views, expiry, refusals",
        arguments: ClientTestBackend.allCases, ClientTransport.allCases)
    func anonymousNotes(backend: ClientTestBackend, transport: ClientTransport) async throws {
        guard let server = try await backend.start() else { return }
        defer { server.stop() }
        let through = transport.make()
        let writer = NoteKeyPairs.generate()
        let reader = NoteKeyPairs.generate()
        let stranger = NoteKeyPairs.generate()
        let note = try await E3DBClient.writeAnonymousNote(
            ["pin": "1234", "who": "anon"], recipientEncryptionKey: reader.publicKey,
            recipientSigningKey: reader.publicSigningKey, writer: writer, apiURL: server.url + "/",
            options: NoteOptions(name: "dropped-\(UUID())", maxViews: 2), transport: through)
        let id = try #require(note.noteID.flatMap(UUID.init(uuidString:)))
        #expect(note.idString == "", "the server keeps names for registered writers only")
        #expect(note.writerSigningKey == writer.publicSigningKey.base64URLEncoded)
        await #expect(throws: E3DBError(.forbidden)) {
            _ = try await E3DBClient.readAnonymousNote(id: id, reader: stranger, apiURL: server.url, transport: through)
        }
        let first = try await E3DBClient.readAnonymousNote(
            id: id, reader: reader, apiURL: server.url,
            options: .init(expectedWriterSigningKey: writer.publicSigningKey), transport: through)
        #expect(first.data == ["pin": "1234", "who": "anon"])
        #expect(first.note.views == 1 && first.note.maxViews == 2)
        // A pinned writer key that is not the note's refuses the note before any field is returned.
        await #expect(throws: E3DBError.self) {
            _ = try await E3DBClient.readAnonymousNote(
                id: id, reader: reader, apiURL: server.url,
                options: .init(expectedWriterSigningKey: stranger.publicSigningKey), transport: through)
        }
        // That refused read was the second view: the note is used up.
        await #expect(throws: E3DBError(.notFound)) {
            _ = try await E3DBClient.readAnonymousNote(id: id, reader: reader, apiURL: server.url, transport: through)
        }

        // A registered writer's name is kept, and an anonymous reader reads by it; a second note with the name is 409.
        let alice = try await server.register("alice", transport: transport)
        let name = "named-\(UUID())"
        _ = try await alice.writeNote(
            ["n": "1"], recipientEncryptionKey: reader.publicKey,
            recipientSigningKey: reader.publicSigningKey, name: name)
        let byName = try await E3DBClient.readAnonymousNote(
            name: name, reader: reader, apiURL: server.url, transport: through)
        #expect(byName.data == ["n": "1"] && byName.note.idString == name)
        await #expect(throws: E3DBError(.conflict)) {
            _ = try await alice.writeNote(
                ["n": "2"], recipientEncryptionKey: reader.publicKey,
                recipientSigningKey: reader.publicSigningKey, name: name)
        }
        await #expect(throws: E3DBError(.notFound)) {
            _ = try await E3DBClient.readAnonymousNote(
                name: "no-such-\(UUID())", reader: reader, apiURL: server.url, transport: through)
        }
        await #expect(throws: E3DBError(.notFound)) {
            _ = try await E3DBClient.readAnonymousNote(
                id: UUID(), reader: reader, apiURL: server.url, transport: through)
        }

        // Expiration: past is gone (404), future is served; anonymous writers get it too.
        let past = try await E3DBClient.writeAnonymousNote(
            ["x": "y"], recipientEncryptionKey: reader.publicKey, recipientSigningKey: reader.publicSigningKey,
            writer: writer, apiURL: server.url, options: NoteOptions(expiration: Date().addingTimeInterval(-60)),
            transport: through)
        await #expect(throws: E3DBError(.notFound)) {
            _ = try await E3DBClient.readAnonymousNote(
                id: UUID(uuidString: past.noteID ?? ""), reader: reader,
                apiURL: server.url, transport: through)
        }
        let future = try await alice.writeNote(
            ["x": "z"], recipientEncryptionKey: reader.publicKey,
            recipientSigningKey: reader.publicSigningKey,
            expiration: Date().addingTimeInterval(3600))
        #expect(future.expires == true)
        #expect(
            try await E3DBClient.readAnonymousNote(
                id: UUID(uuidString: future.noteID ?? ""), reader: reader,
                apiURL: server.url, transport: through
            ).data == ["x": "z"])

        // Refusals before any request, and the writer-only delete.
        await #expect(throws: E3DBError(.invalidParameter)) {
            _ = try await E3DBClient.readAnonymousNote(reader: reader, apiURL: server.url, transport: through)
        }
        await #expect(throws: E3DBError(.invalidParameter)) {
            _ = try await E3DBClient.writeAnonymousNote(
                ["a": "b"], recipientEncryptionKey: reader.publicKey, recipientSigningKey: reader.publicSigningKey,
                writer: writer, apiURL: server.url, options: NoteOptions(maxViews: -5), transport: through)
        }
        // Two field names equal as Unicode text: refused before encryption (API.Note would merge them).
        await #expect(throws: E3DBError(.invalidParameter)) {
            _ = try await E3DBClient.writeAnonymousNote(
                ["\u{e9}": "1", "e\u{301}": "2"], recipientEncryptionKey: reader.publicKey,
                recipientSigningKey: reader.publicSigningKey, writer: writer, apiURL: server.url, transport: through)
        }
        await #expect(throws: E3DBError(.badRequest)) {
            _ = try await E3DBClient.writeAnonymousNote(
                [:], recipientEncryptionKey: reader.publicKey, recipientSigningKey: reader.publicSigningKey,
                writer: writer, apiURL: server.url, transport: through)
        }
        let live = try await E3DBClient.writeAnonymousNote(
            ["a": "b"], recipientEncryptionKey: reader.publicKey, recipientSigningKey: reader.publicSigningKey,
            writer: writer, apiURL: server.url, transport: through)
        await #expect(throws: E3DBError(.forbidden)) {
            try await alice.deleteNote(try #require(UUID(uuidString: live.noteID ?? "")))
        }
        await #expect(throws: E3DBError(.notFound)) {
            try await alice.deleteNote(try #require(UUID(uuidString: past.noteID ?? "")))
        }
    }

    @Test(
        "replace by name: new fields, new id, new recipient, views reset; only the writer; upsert",
        arguments: ClientTestBackend.allCases, ClientTransport.allCases)
    func replace(backend: ClientTestBackend, transport: ClientTransport) async throws {
        guard let server = try await backend.start() else { return }
        defer { server.stop() }
        let alice = try await server.register("alice", transport: transport)
        let bob = try await server.register("bob", transport: transport)
        let reader = NoteKeyPairs.generate()
        let name = "replace-\(UUID())"
        let original = try await alice.writeNote(
            ["v": "1"], recipientEncryptionKey: reader.publicKey,
            recipientSigningKey: reader.publicSigningKey, name: name, maxViews: 1)
        let replaced = try await alice.replaceNote(
            named: name, with: ["v": "2"],
            recipientEncryptionKey: bob.identity.publicKey,
            recipientSigningKey: try #require(bob.identity.publicSigningKey),
            maxViews: 2)
        #expect(replaced.noteID != nil && replaced.noteID != original.noteID && replaced.idString == name)
        await #expect(throws: E3DBError(.notFound)) {
            _ = try await E3DBClient.readAnonymousNote(
                id: UUID(uuidString: original.noteID ?? ""), reader: reader,
                apiURL: server.url, transport: AsyncHTTPClientTransport())
        }
        await #expect(throws: E3DBError(.forbidden)) {
            _ = try await E3DBClient.readAnonymousNote(
                name: name, reader: reader, apiURL: server.url, transport: AsyncHTTPClientTransport())
        }
        let read = try await bob.readNote(name: name)
        #expect(read.data == ["v": "2"] && read.note.views == 1 && read.note.maxViews == 2)
        await #expect(throws: E3DBError(.forbidden)) {
            _ = try await bob.replaceNote(
                named: name, with: ["v": "bob's"], recipientEncryptionKey: reader.publicKey,
                recipientSigningKey: reader.publicSigningKey)
        }
        await #expect(throws: E3DBError(.invalidParameter)) {
            _ = try await alice.replaceNote(
                named: "", with: ["v": "3"], recipientEncryptionKey: reader.publicKey,
                recipientSigningKey: reader.publicSigningKey)
        }
        // Limits left out are kept: the new note allows 2 reads again and expires when the old one did; resetting
        // them makes the note unlimited.
        let limited = "limits-\(UUID())"
        let expiry = Date().addingTimeInterval(3600)
        _ = try await alice.writeNote(
            ["v": "1"], recipientEncryptionKey: bob.identity.publicKey,
            recipientSigningKey: try #require(bob.identity.publicSigningKey), name: limited, maxViews: 2,
            expiration: expiry)
        _ = try await alice.replaceNote(
            named: limited, with: ["v": "2"], recipientEncryptionKey: bob.identity.publicKey,
            recipientSigningKey: try #require(bob.identity.publicSigningKey))
        let kept = try await bob.readNote(name: limited)
        #expect(kept.data == ["v": "2"] && kept.note.maxViews == 2 && kept.note.views == 1)
        #expect(kept.note.expires == true && kept.note.expiration != nil)
        _ = try await bob.readNote(name: limited)
        await #expect(throws: E3DBError(.notFound), "the kept limit of 2 reads is used up") {
            _ = try await bob.readNote(name: limited)
        }
        _ = try await alice.replaceNote(
            named: limited, with: ["v": "3"], recipientEncryptionKey: bob.identity.publicKey,
            recipientSigningKey: try #require(bob.identity.publicSigningKey), resettingLimits: true)
        for _ in 0..<3 { #expect(try await bob.readNote(name: limited).data == ["v": "3"]) }
        #expect(try await bob.readNote(name: limited).note.expires != true)

        let fresh = "upsert-\(UUID())"
        _ = try await bob.replaceNote(
            named: fresh, with: ["v": "new"], recipientEncryptionKey: reader.publicKey,
            recipientSigningKey: reader.publicSigningKey)
        #expect(
            try await E3DBClient.readAnonymousNote(
                name: fresh, reader: reader, apiURL: server.url, transport: AsyncHTTPClientTransport()
            ).data == ["v": "new"]
        )
    }

    @Test("Python SDK and e3dbkit client: anonymous notes and replace by name in both directions, views, expiry")
    func pythonInterop() async throws {
        let result = try await PythonDriver.run("Tests/E3DBServerTests/notes_interop.py", [])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(" passed, 0 failed"), "\(result.output)")
        #expect(!result.output.contains("\n0 passed"), "\(result.output)")
    }

    @Test(
        "group-wrapped access keys: the server stores only eak, so the client's read fails typed; served with the wrappers the client path opens them"
    )
    func groupWrappedAccessKey() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let writer = try await server.register("writer")
        let reader = try await server.register("reader")
        let type = "group-doc"
        // The writer's own access key, and the same key shared through a group, as a group sharer would store it:
        // eak wrapped for the group's public key, the group's secret key boxed for the member (spec formats §2.3).
        let ak = AccessKey()
        try await writer.putAccessKey(
            ak, writer: writer.clientID, user: writer.clientID, reader: writer.clientID,
            readerKey: writer.identity.publicKey, type: type)
        let record = try await writer.write(type: type, data: ["body": "for the group"])
        let group = Box.PrivateKey()
        let groupSecret = try AccessKey(SecureBytes(copying: group.withUnsafeBytes { Array($0) }))
        let wrapper = AccessKeyWrapper(
            membershipKey: try EncryptedAccessKey.wrap(
                groupSecret, for: reader.identity.publicKey,
                by: writer.identity.boxKey),
            publicKey: writer.identity.publicKey, accessKeyID: UUID().uuidString.lowercased(),
            groupPublicKey: group.publicKey)
        let groupEAK = try EncryptedAccessKey.wrap(ak, for: group.publicKey, by: writer.identity.boxKey)
        struct GroupPut: Encodable {
            let eak: String
            let accessKeyWrappers: [AccessKeyWrapper]
            enum CodingKeys: String, CodingKey { case eak, accessKeyWrappers = "access_key_wrappers" }
        }
        let path = writer.tuplePath(writer: writer.clientID, user: writer.clientID, reader: reader.clientID, type: type)
        let (_, put) = try await writer.send(
            "PUT", API.Endpoints.putAccessKey.path(path),
            body: try JSONEncoder().encode(GroupPut(eak: groupEAK.description, accessKeyWrappers: [wrapper])),
            operation: "group access key write")
        #expect(put.status == .created)
        try await writer.putPolicy(
            reader: reader.clientID, type: type, API.PolicyRequest(allow: [["read": .object([:])]]))

        // What this server serves: the eak alone, authorized by the writer; the wrappers are not stored.
        let (served, _) = try await reader.send(API.Endpoints.readAccessKey, path, operation: "access key read")
        let object = try #require(try JSONSerialization.jsonObject(with: served) as? [String: Any])
        #expect(object["access_key_wrappers"] == nil)
        #expect(object["eak"] as? String == groupEAK.description)
        let id = try #require(record.id)
        await #expect(throws: E3DBError(.authenticationFailed)) { _ = try await reader.read(id) }

        // The client's read path (fetch, parse, unwrap through the wrappers, cache, decrypt, verify rec_sig) with
        // the EAKInfo a service that keeps group wrappers serves: the server's own response with the wrappers the
        // PUT carried put back (the one member this server drops).
        let restoring = try E3DBClient(
            identity: reader.identity, apiURL: server.url,
            transport: WrapperRestoringTransport(wrappers: [wrapper]))
        let opened = try await restoring.read(id)
        #expect(opened.data == ["body": "for the group"] && opened.signatureStatus == .verified)
        #expect(try await restoring.read(id).data == ["body": "for the group"], "the unwrapped key is cached")
        // A wrapper boxed for another client does not open for this reader: typed, no plaintext.
        let other = ClientIdentity.generate()
        let foreign = AccessKeyWrapper(
            membershipKey: try EncryptedAccessKey.wrap(groupSecret, for: other.publicKey, by: writer.identity.boxKey),
            publicKey: writer.identity.publicKey, accessKeyID: "x", groupPublicKey: group.publicKey)
        let refused = try E3DBClient(
            identity: reader.identity, apiURL: server.url,
            transport: WrapperRestoringTransport(wrappers: [foreign]))
        await #expect(throws: E3DBError(.authenticationFailed)) { _ = try await refused.read(id) }
    }
}

/// The default transport; access key responses get `access_key_wrappers` added (Tozny's service serves the
/// wrappers of a group-shared key; this server stores only `eak`).
struct WrapperRestoringTransport: E3DBTransport {
    let wrappers: [AccessKeyWrapper]
    let inner = AsyncHTTPClientTransport()

    func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)
    {
        let (answer, response) = try await inner.send(
            request, body: body, timeout: timeout, maxResponseSize: maxResponseSize)
        guard request.method == .get, request.path?.contains("/v1/storage/access_keys/") == true,
            response.status == .ok, var object = try JSONSerialization.jsonObject(with: answer) as? [String: Any]
        else {
            return (answer, response)
        }
        object["access_key_wrappers"] = try JSONSerialization.jsonObject(with: JSONEncoder().encode(wrappers))
        return (try JSONSerialization.data(withJSONObject: object), response)
    }

    func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.upload(request, bodyPath: bodyPath, size: size, timeout: timeout)
    }

    func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.download(request, timeout: timeout, receive: receive)
    }
}
