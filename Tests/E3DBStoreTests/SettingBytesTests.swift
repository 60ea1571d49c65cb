import E3DBKit
import E3DBTestSupport
import Foundation
import GRDB
import Testing

@testable import E3DBStore

/// The plaintext a setting is sealed as: every store version has sealed `{"key":…,"value":…}` with member names
/// sorted and `/` escaped as `\/` (the settings variant of the package's `JSONEncoders`). A store opened by another
/// version reads it either way; the bytes are pinned so that a change is a decision, not an accident.
@Suite("E3DBStore: the sealed bytes of a setting")
struct SettingBytesTests {
    struct Value: Codable, Equatable {
        var url: String
        var count: Int
        var names: [String]
    }

    @Test("a setting is sealed as one line of JSON, names sorted, / escaped")
    func pinnedBytes() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let value = Value(url: "https://h/p?q=é", count: 3, names: ["a/b", "\"c\""])
        try store.setSetting(value, forKey: "k/1")
        let sealed = try DatabaseQueue(path: try store.databaseLocation()).read { db in
            try Data.fetchOne(db, sql: "SELECT sealed FROM settings WHERE key = ?", arguments: ["k/1"])
        }
        let opened = try EncryptedStore.openSetting(try #require(sealed), key: "k/1", keys: try store.currentKeys())
        let text = opened.withTemporaryData { String(decoding: $0, as: UTF8.self) }
        #expect(
            text
                == #"{"key":"k\/1","value":{"count":3,"names":["a\/b","\"c\""],"url":"https:\/\/h\/p?q=é"}}"#)
        #expect(try store.setting(Value.self, forKey: "k/1") == value)
    }
}
