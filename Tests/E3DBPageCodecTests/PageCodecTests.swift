import E3DBPageCodec
import E3DBPrimitives
import Testing

@Suite("E3DBPageCodec: the SQLCipher page transform")
struct PageCodecTests {
    @Test("a page encrypts and decrypts back, under a fresh IV each time")
    func roundTrip() throws {
        let codec = try PageCodec(
            key: .rawKey(SecureBytes(randomCount: 32)), salt: Array(repeating: 7, count: 16), settings: .v4)
        var page = [UInt8](repeating: 0, count: 4096)
        for index in page.indices { page[index] = UInt8(truncatingIfNeeded: index &* 31) }
        let first = try codec.encrypt(page: page, number: 3)
        let second = try codec.encrypt(page: page, number: 3)
        #expect(first != second)
        let back = try codec.decrypt(page: first, number: 3)
        #expect(Array(back[0..<4016]) == Array(page[0..<4016]))
        #expect(throws: E3DBError(.pageTampered)) { try codec.decrypt(page: first, number: 4) }
    }
}
