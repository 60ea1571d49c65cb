import E3DBKeys
import E3DBPrimitives
import Foundation
import Testing

@Suite("E3DBKeys")
struct KeysTests {
    let writer = ClientIdentity.generate(clientID: UUID())
    let reader = ClientIdentity.generate(clientID: UUID())

    @Test("wrap for a reader, unwrap with the authorizer's public key")
    func wrapUnwrap() throws {
        let ak = AccessKey()
        let eak = try EncryptedAccessKey.wrap(ak, for: reader.publicKey, by: writer.boxKey)
        #expect(eak.stringValue.count == 97)
        let back = try eak.unwrap(reader: reader.boxKey, authorizer: writer.publicKey)
        #expect(back.withUnsafeBytes { Data($0) } == ak.withUnsafeBytes { Data($0) })
        #expect(throws: E3DBError(.authenticationFailed)) {
            try eak.unwrap(reader: writer.boxKey, authorizer: writer.publicKey)
        }
    }

    @Test("writer key and local sharing re-wrap without touching data")
    func writerKeyAndSharing() throws {
        let (ak, mine) = try EAKInfo.makeWriterKey(for: writer)
        #expect(mine.authorizerID == writer.clientID)
        #expect(mine.signerSigningKey == writer.publicSigningKey)
        let shared = try mine.share(with: reader.publicKey, as: writer)
        let readerAK = try shared.unwrap(with: reader.boxKey)
        #expect(readerAK.withUnsafeBytes { Data($0) } == ak.withUnsafeBytes { Data($0) })
        #expect(shared.signerSigningKey == writer.publicSigningKey)
        // The reader cannot open the writer's own EAK.
        #expect(throws: E3DBError(.authenticationFailed)) { try mine.unwrap(with: reader.boxKey) }
        // A third party cannot re-share.
        #expect(throws: E3DBError(.authenticationFailed)) { try mine.share(with: writer.publicKey, as: reader) }
    }

    @Test("EAKInfo JSON writes lowercase UUIDs, sorted members, no nulls")
    func eakInfoJSON() throws {
        let (_, info) = try EAKInfo.makeWriterKey(for: writer)
        let text = String(decoding: info.jsonData(), as: UTF8.self)
        #expect(text.hasPrefix("{\"authorizer_id\":\"\(writer.clientID!.uuidString.lowercased())\""))
        #expect(!text.contains("null"))
        #expect(text.contains("\"authorizer_public_key\":{\"curve25519\":"))
        let java = String(decoding: info.jsonData(shape: .javaFlat), as: UTF8.self)
        #expect(java.contains("\"authorizer_public_key\":\"\(writer.publicKey.base64URLEncoded)\""))
        var noSigner = info
        noSigner.signerID = nil
        noSigner.signerSigningKey = nil
        #expect(!String(decoding: noSigner.jsonData(), as: UTF8.self).contains("signer"))
    }

    @Test("identity JSON round trip, version 1 without signing keys")
    func identityJSON() throws {
        let again = try ClientIdentity(configJSON: writer.configJSON())
        #expect(again.clientID == writer.clientID)
        #expect(again.publicKey == writer.publicKey)
        #expect(again.publicSigningKey == writer.publicSigningKey)
        let v1 = ClientIdentity(clientID: nil, boxKey: Box.PrivateKey(), signingKey: nil)
        let text = String(decoding: v1.configJSON(), as: UTF8.self)
        #expect(text.contains("\"version\":\"1\""))
        #expect(throws: E3DBError(.missingKey)) { try v1.requireSigningKey() }
        #expect(throws: E3DBError(.missingKey)) { try EAKInfo.makeWriterKey(for: v1) }
    }

    @Test("secrets are redacted")
    func redaction() {
        let ak = AccessKey()
        #expect(String(describing: ak) == "AccessKey(redacted)")
        #expect(String(reflecting: ak) == "AccessKey(redacted)")
        #expect(!String(describing: writer).contains(writer.boxKey.base64URLEncoded))
    }

    @Test(
        "malformed EAK strings give typed errors",
        arguments: [
            ("", E3DBError.Code.invalidEAK), ("a.b.c", .invalidEAK), (".", .invalidLength),
            ("@@@@.AAAA", .invalidBase64),
            (String(repeating: "A", count: 64) + "." + String(repeating: "A", count: 31), .invalidLength),
        ])
    func malformedEAK(_ input: String, _ code: E3DBError.Code) {
        #expect(throws: E3DBError(code)) { try EncryptedAccessKey(input) }
    }

    @Test("the access-key cache is safe under concurrency")
    func cacheConcurrency() async throws {
        let cache = AccessKeyCache()
        let key = AccessKeyCache.Key(writerID: UUID(), userID: UUID(), readerID: UUID(), type: "t")
        let loads = await withTaskGroup(of: Data.self) { group in
            for _ in 0..<64 {
                group.addTask { cache.accessKey(for: key, orLoad: { AccessKey() }).withUnsafeBytes { Data($0) } }
            }
            var all: Set<Data> = []
            for await d in group { all.insert(d) }
            return all
        }
        #expect(loads.count == 1)
        #expect(cache.count == 1)
        // Record types compare by code units: "é" and "e\u{301}" are different types.
        let a = AccessKeyCache.Key(writerID: key.writerID, userID: key.userID, readerID: key.readerID, type: "é")
        let b = AccessKeyCache.Key(writerID: key.writerID, userID: key.userID, readerID: key.readerID, type: "e\u{301}")
        #expect(a != b)
        cache.store(AccessKey(), for: a)
        #expect(cache.accessKey(for: b) == nil)
        cache.remove(a)
        #expect(cache.accessKey(for: a) == nil)
        cache.removeAll()
        #expect(cache.count == 0)
    }
}

@Suite("Group access key wrappers")
struct GroupWrapperTests {
    /// Builds reader -> group -> AK with the public API, as a group admin and a sharer would (spec §8.5).
    func groupShared() throws -> (reader: ClientIdentity, ak: AccessKey, info: EAKInfo) {
        let reader = ClientIdentity.generate(clientID: UUID())
        let admin = ClientIdentity.generate(clientID: UUID())
        let sharer = ClientIdentity.generate(clientID: UUID())
        let group = Box.PrivateKey()
        // The membership key is the group's secret key boxed for the member, the same shape as an EAK.
        let groupSecret = try AccessKey(SecureBytes(copying: group.withUnsafeBytes { Array($0) }))
        let membership = try EncryptedAccessKey.wrap(groupSecret, for: reader.publicKey, by: admin.boxKey)
        let ak = AccessKey()
        let eak = try EncryptedAccessKey.wrap(ak, for: group.publicKey, by: sharer.boxKey)
        let wrapper = AccessKeyWrapper(
            membershipKey: membership, publicKey: sharer.publicKey, accessKeyID: "ak-1", groupPublicKey: group.publicKey
        )
        let info = EAKInfo(
            eak: eak, authorizerID: admin.clientID!, authorizerPublicKey: admin.publicKey, accessKeyWrappers: [wrapper])
        return (reader, ak, info)
    }

    @Test("a group-wrapped EAKInfo unwraps, re-encodes with its wrappers, and can be re-shared directly")
    func unwrapAndShare() throws {
        let (reader, ak, info) = try groupShared()
        let expected = ak.withUnsafeBytes { Data($0) }
        #expect(try info.unwrap(with: reader.boxKey).withUnsafeBytes { Data($0) } == expected)
        let text = String(decoding: info.jsonData(), as: UTF8.self)
        #expect(text.contains("\"access_key_wrappers\":[{\"access_key_id\":\"ak-1\""))
        #expect(try EAKInfo(jsonData: info.jsonData()) == info)
        let other = ClientIdentity.generate(clientID: UUID())
        let direct = try info.share(with: other.publicKey, as: reader)
        #expect(direct.accessKeyWrappers.isEmpty)
        #expect(try direct.unwrap(with: other.boxKey).withUnsafeBytes { Data($0) } == expected)
    }

    @Test("a wrapper for someone else fails naming the wrapper; dropping the wrappers fails on the eak")
    func wrongReader() throws {
        let (_, _, info) = try groupShared()
        let stranger = ClientIdentity.generate(clientID: UUID())
        do {
            _ = try info.unwrap(with: stranger.boxKey)
            Issue.record("opened")
        } catch {
            #expect(error.code == .authenticationFailed)
            #expect(error.context.field == "access_key_wrappers[0].membership_key")
        }
        var bare = info
        bare.accessKeyWrappers = []
        #expect(throws: E3DBError(.authenticationFailed)) { try bare.unwrap(with: stranger.boxKey) }
    }
}
