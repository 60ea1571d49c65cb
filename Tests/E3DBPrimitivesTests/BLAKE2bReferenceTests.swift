import E3DBBLAKE2bReference
import E3DBPrimitives
import E3DBTestSupport
import Foundation
import Testing

/// libb2 as an independent oracle: the same BLAKE2b vector file that `PrimitivesSuites.blake2b` runs through
/// libsodium, run through libb2. Kept out of the vector suites so that the `e3dbkit` binary never links libb2.
@Suite("BLAKE2b vectors through libb2")
struct BLAKE2bReferenceTests {
    struct Case: Decodable, Sendable {
        let tcId: Int
        let result: VectorResult
        let msg: String
        let key: String
        let outLen: Int
        let digest: String
        let error: String?
    }

    static let cases: [Case] =
        (try? VectorFile<Case>.load(
            VectorLocations.checkout.projectFile("primitives/blake2b.json")
        ).tests) ?? []

    @Test("the vector file loads") func loads() throws {
        let file = try VectorFile<Case>.load(VectorLocations.checkout.projectFile("primitives/blake2b.json"))
        #expect(file.tests.count > 250)
    }

    @Test("libb2 agrees with every vector", arguments: cases)
    func libb2(_ t: Case) throws {
        let msg = try Hex.decode(t.msg)
        let key = t.key.isEmpty ? nil : SecureBytes(copying: try Hex.decode(t.key))
        if t.result == .valid {
            let digest = try BLAKE2bReference.hash(data: msg, outputByteCount: t.outLen, key: key)
            #expect(digest == (try Hex.decode(t.digest)), "tcId \(t.tcId)")
        } else {
            #expect(throws: E3DBError.self, "tcId \(t.tcId)") {
                try BLAKE2bReference.hash(data: msg, outputByteCount: t.outLen, key: key)
            }
        }
    }
}
