import E3DBKit
import E3DBStore
import Foundation
import GRDB
import Testing

@Suite("E3DBStore: opening with an E3DB client identity")
struct StoreIdentityTests {
    @Test("an enrolled identity opens the store beside its passphrase; a stranger, a removed identity are wrongKey")
    func enrollOpenRemove() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let reference = try store.put(collection: "c", type: "t", data: ["s": "secret"])
        let alice = ClientIdentity.generate(clientID: UUID())
        let bob = ClientIdentity.generate(clientID: UUID())
        let stranger = ClientIdentity.generate()
        let enrolled = try store.addIdentity(publicKey: alice.publicKey, clientID: alice.clientID)
        #expect(enrolled.publicKey == alice.publicKey && enrolled.clientID == alice.clientID)
        try store.addIdentity(publicKey: bob.publicKey)
        #expect(try store.identities().map(\.publicKey) == [alice.publicKey, bob.publicKey])
        #expect(try store.identities().map(\.clientID) == [alice.clientID, nil])

        let asAlice = try EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey))
        #expect(asAlice.storeID == store.storeID)
        #expect(try asAlice.get(collection: "c", id: reference.id).data == ["s": "secret"])
        #expect(try asAlice.publicKey == store.publicKey)
        expectStoreError(.wrongKey, item: stranger.publicKey.base64URLEncoded) {
            _ = try EncryptedStore.open(at: dir.url, credential: .identity(stranger.boxKey))
        }
        // lock and unlock with an identity.
        asAlice.lock()
        expectStoreError(.wrongKey) { try asAlice.unlock(.identity(stranger.boxKey)) }
        try asAlice.unlock(.identity(bob.boxKey))
        #expect(try asAlice.get(collection: "c", id: reference.id).data == ["s": "secret"])

        // A passphrase change leaves the identities working (they wrap the master key, which does not change).
        try asAlice.changeCredential(to: passphrase("q"), kdfParameters: testKDF)
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        _ = try EncryptedStore.open(at: dir.url, credential: passphrase("q"))
        _ = try EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey))
        expectStoreError(.invalidParameter) {
            try store.changeCredential(to: .identity(alice.boxKey), kdfParameters: testKDF)
        }

        try store.removeIdentity(publicKey: alice.publicKey)
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey)) }
        expectStoreError(.invalidParameter) { try store.removeIdentity(publicKey: alice.publicKey) }
        #expect(try store.identities().map(\.publicKey) == [bob.publicKey])
        _ = try EncryptedStore.open(at: dir.url, credential: .identity(bob.boxKey))
    }

    @Test("a store created for an identity has no passphrase until one is set; its last identity cannot be removed")
    func createdForIdentity() throws {
        let dir = try StoreDirectory()
        let alice = ClientIdentity.generate(clientID: UUID())
        let store = try EncryptedStore.create(at: dir.url, identity: alice)
        let reference = try store.put(collection: "c", type: "t", data: ["s": "secret"])
        #expect(try store.identities().map(\.clientID) == [alice.clientID])
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        expectStoreError(.wrongKey) {
            _ = try EncryptedStore.open(
                at: dir.url, credential: .key(SecureBytes(copying: [UInt8](repeating: 7, count: 32))))
        }
        expectStoreError(.wrongKey) {
            _ = try EncryptedStore.open(at: dir.url, credential: .identity(ClientIdentity.generate().boxKey))
        }
        let reopened = try EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey))
        #expect(try reopened.get(collection: "c", id: reference.id).data == ["s": "secret"])

        expectStoreError(.invalidParameter) { try store.removeIdentity(publicKey: alice.publicKey) }
        _ = try EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey))
        try store.changeCredential(to: passphrase("p"), kdfParameters: testKDF)
        try store.removeIdentity(publicKey: alice.publicKey)
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey)) }
        let byPassphrase = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try byPassphrase.get(collection: "c", id: reference.id).data == ["s": "secret"])
    }

    @Test("a swapped enrollment is wrongKey, one naming another authorizer is storeCorrupted, both before any record")
    func tamperedEnrollment() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let alice = ClientIdentity.generate()
        let bob = ClientIdentity.generate()
        try store.addIdentity(publicKey: alice.publicKey)
        try store.addIdentity(publicKey: bob.publicKey)
        let raw = try DatabaseQueue(path: dir.keyHeader)
        // Alice's row now holds the EAK written for Bob: Alice's key does not open it.
        try raw.write { db in
            try db.execute(
                sql:
                    "UPDATE store_identities SET eak_info = (SELECT eak_info FROM store_identities WHERE public_key = ?) WHERE public_key = ?",
                arguments: [bob.publicKey.rawRepresentation, alice.publicKey.rawRepresentation])
        }
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey)) }
        // An EAKInfo whose authorizer is someone else's key (an attacker's own wrap of a master key).
        let attacker = ClientIdentity.generate()
        let forged = EAKInfo(
            eak: try EncryptedAccessKey.wrap(AccessKey(), for: bob.publicKey, by: attacker.boxKey),
            authorizerID: store.storeID,
            authorizerPublicKey: attacker.publicKey)
        try raw.write { db in
            try db.execute(
                sql: "UPDATE store_identities SET eak_info = ? WHERE public_key = ?",
                arguments: [String(decoding: forged.jsonData(), as: UTF8.self), bob.publicKey.rawRepresentation])
        }
        expectStoreError(.storeCorrupted) {
            _ = try EncryptedStore.open(at: dir.url, credential: .identity(bob.boxKey))
        }
        // A passphrase store whose wrapped master key is gone is damaged, not an identity-only store.
        try raw.write { db in try db.execute(sql: "UPDATE store_meta SET wrapped_master = x''") }
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
    }

    @Test("no plaintext value, private key or master key reaches any file of a store used through an identity")
    func noPlaintextOnDisk() throws {
        let dir = try StoreDirectory()
        let alice = ClientIdentity.generate(clientID: UUID())
        let bob = ClientIdentity.generate()
        let store = try EncryptedStore.create(at: dir.url, identity: alice)
        try store.addIdentity(publicKey: bob.publicKey)
        let asBob = try EncryptedStore.open(at: dir.url, credential: .identity(bob.boxKey))
        var secrets: [String] = []
        for i in 0..<100 {
            let secret = "PLAINTEXT-\(i)-\(UUID().uuidString)"
            secrets.append(secret)
            try asBob.put(collection: "c", type: "t", data: ["s": secret], plain: ["bucket": "\(i % 5)"])
        }
        try asBob.changeCredential(to: passphrase("q"), kdfParameters: testKDF)
        try asBob.removeIdentity(publicKey: alice.publicKey)
        _ = try asBob.find(RecordQuery(collection: "c", plain: [.equals("bucket", "3")]))
        // The private keys, raw and as the base64url text of the identity file.
        var needles = secrets.map { Data($0.utf8) }
        for identity in [alice, bob] {
            needles.append(Data(identity.boxKey.base64URLEncoded.utf8))
            needles.append(try Base64URL.decode(identity.boxKey.base64URLEncoded))
        }
        #expect(try expectAbsent(needles, fromFilesIn: dir.url) > 0)
    }
}

/// Checks that no file of a store directory holds any of `needles`; returns the number of bytes scanned.
func expectAbsent(_ needles: [Data], fromFilesIn directory: URL) throws -> Int {
    let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
    #expect(files.contains(EncryptedStore.databaseFileName))
    var scanned = 0
    for name in files {
        let contents = try Data(contentsOf: directory.appendingPathComponent(name))
        scanned += contents.count
        for needle in needles { #expect(contents.range(of: needle) == nil, "a secret found in \(name)") }
    }
    return scanned
}
