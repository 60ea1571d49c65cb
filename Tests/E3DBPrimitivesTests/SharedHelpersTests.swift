import E3DBPrimitives
import Foundation
import Testing

@Suite("E3DBPrimitives: the package's one hex, UUID-text and wiped-scratch helpers")
struct SharedHelpersTests {
    @Test("an error's cause is kept, plays no part in equality and never reaches its description")
    func errorCause() {
        struct Underlying: Error { let detail: String }
        let plain = E3DBError(.databaseError, "writing failed")
        let caused = E3DBError(.databaseError, "writing failed", cause: Underlying(detail: "token s3cr3t"))
        #expect(plain.cause == nil)
        #expect((caused.cause as? Underlying)?.detail == "token s3cr3t")
        #expect(caused == plain)
        #expect(caused.description == plain.description)
        #expect(!caused.description.contains("s3cr3t") && !caused.message.contains("s3cr3t"))
        #expect(caused != E3DBError(.wrongKey, cause: Underlying(detail: "token s3cr3t")))
    }

    @Test("UTCTimestamp's date check: every day of every month of a 400-year cycle, and nothing else")
    func calendarDates() {
        // Consecutive real dates are consecutive days; the check agrees with the days-to-civil conversion.
        var expected = UTCTimestamp.days(fromCivil: 2000, month: 1, day: 1)
        var wrong: [String] = []
        for year: Int64 in 2000..<2400 {
            for month in 0...13 {
                for day in 0...32 {
                    let civil = UTCTimestamp.civil(fromDays: expected)
                    let real = civil == (year, month, day)
                    switch UTCTimestamp.days(year: year, month: month, day: day) {
                    case expected? where real: expected += 1
                    case nil where !real: break
                    default: wrong.append("\(year)-\(month)-\(day)")
                    }
                }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(10))")
        #expect(expected == UTCTimestamp.days(fromCivil: 2400, month: 1, day: 1))
        #expect(UTCTimestamp.days(year: 2028, month: 2, day: 29) != nil)
        for (year, month, day): (Int64, Int, Int) in [
            (2026, 2, 29), (1900, 2, 29), (2026, 2, 30), (2026, 4, 31), (2026, 13, 1), (2026, 0, 1), (2026, 1, 0),
        ] {
            #expect(UTCTimestamp.days(year: year, month: month, day: day) == nil, "\(year)-\(month)-\(day)")
        }
    }

    @Test("hex encodes in either case and decodes what it encoded; malformed text is refused")
    func hex() throws {
        let bytes: [UInt8] = [0x00, 0x0f, 0x10, 0xa5, 0xff]
        #expect(Hex.encode(bytes) == "000f10a5ff")
        #expect(Hex.encode(bytes, uppercase: true) == "000F10A5FF")
        #expect(try Hex.decode("000f10a5ff") == Data(bytes))
        #expect(try Hex.decode("000F10A5FF") == Data(bytes))
        #expect(try Hex.decode("").isEmpty)
        for (bad, offset) in [("0", nil), ("abc", nil), ("0g", 1), ("é", 0), (" 00", nil), ("00 0", 2)]
            as [(String, Int?)]
        {
            #expect(throws: E3DBError.self, "\(bad)") { try Hex.decode(bad) }
            do {
                _ = try Hex.decode(bad)
            } catch {
                #expect(error.code == .invalidHex)
                #expect(error.context.offset == offset, "\(bad)")
            }
        }
        let all = (0...255).map { UInt8($0) }
        #expect(try Hex.decode(Hex.encode(all)) == Data(all))
        #expect(Hex.encode(all) == all.map { String(format: "%02x", $0) }.joined())
    }

    @Test("UUIDs parse like Foundation's parser; anything else is refused; the canonical form is lowercase")
    func uuidText() {
        for _ in 0..<200 {
            let id = UUID()
            #expect(UUID(hexText: id.uuidString) == id)
            #expect(UUID(hexText: id.uuidString.lowercased()) == id)
            #expect(id.lowercasedString == id.uuidString.lowercased())
            #expect(UUID(lowercasedString: id.lowercasedString) == id)
            #expect(UUID(lowercasedString: id.uuidString) == nil)
        }
        for bad in [
            "", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5b-d9cb-469f-a165-70867728950ef",
            "0f8fad5bxd9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950g",
            "{0f8fad5b-d9cb-469f-a165-70867728950e}", "0f8fad5b-d9cb-469f-a165-70867728950é",
        ] {
            #expect(UUID(hexText: bad) == nil, "\(bad)")
        }
    }

    @Test("a WipedBuffer starts zeroed, is written and read only in a range, and wipe zeroes exactly that range")
    func wipedBuffer() {
        let buffer = WipedBuffer(count: 64)
        #expect(buffer.withUnsafeBytes { $0.allSatisfy { $0 == 0 } })
        buffer.withUnsafeMutableBytes(in: 8..<24) { bytes in
            #expect(bytes.count == 16)
            for i in bytes.indices { bytes[i] = 0xAB }
        }
        let written = buffer.withUnsafeBytes { Array($0) }
        #expect(written[0..<8].allSatisfy { $0 == 0 })
        #expect(written[8..<24].allSatisfy { $0 == 0xAB })
        #expect(written[24...].allSatisfy { $0 == 0 })
        buffer.wipe(8..<16)
        let wiped = buffer.withUnsafeBytes(in: 0..<32) { Array($0) }
        #expect(wiped[8..<16].allSatisfy { $0 == 0 })
        #expect(wiped[16..<24].allSatisfy { $0 == 0xAB })
        buffer.wipe()
        #expect(buffer.withUnsafeBytes { $0.allSatisfy { $0 == 0 } })
        #expect(WipedBuffer(count: 0).withUnsafeBytes { $0.count } == 0)
    }

    @Test("Data.wipe zeroes in place; SecureBytes lends a Data copy; a keyed digest finalizes into SecureBytes")
    func secretDataHelpers() throws {
        var data = Data((1...40).map { UInt8($0) })
        data.wipe()
        #expect(data == Data(count: 40))
        var small = Data([0xAB, 0xCD])  // inline representation
        small.wipe()
        #expect(small == Data([0, 0]))

        let secret = SecureBytes(copying: Array("{\"k\":1}".utf8))
        let decoded = secret.withTemporaryData { try? JSONDecoder().decode([String: Int].self, from: $0) }
        #expect(decoded == ["k": 1])
        #expect(secret.withTemporaryData { $0 } == Data("{\"k\":1}".utf8))

        var hasher = try BLAKE2b(outputByteCount: 32, key: SecureBytes(copying: [UInt8](repeating: 7, count: 32)))
        hasher.update(data: Array("label".utf8))
        let digest = hasher.finalizeSecret()
        #expect(digest.count == 32)
        #expect(digest.withUnsafeBytes { Data($0) } == hasher.finalize())
    }
}
