import E3DBCanonicalJSON
import E3DBConformance
import E3DBTestSupport
import Testing

/// Runs the same vector suites as `e3dbkit vectors verify`.
@Suite("Canonical JSON vectors")
struct CanonicalJSONVectorTests {
    @Test("TestVectors/canonical-json/documents.json", arguments: try CanonicalJSONSuites.documents.cases())
    func documents(_ c: VectorCase) throws { try c.check() }

    @Test("TestVectors/canonical-json/numbers.json", arguments: try CanonicalJSONSuites.numbers.cases())
    func numbers(_ c: VectorCase) throws { try c.check() }

    @Test(
        "BLNS, Node SDK output (all 507 match)",
        .enabled(if: VectorLocations.default.sharedVectors != nil, "\(VectorLocations.sharedMissingMessage)"),
        arguments: try CanonicalJSONSuites.blnsNode.cases())
    func blnsNode(_ c: VectorCase) throws { try c.check() }

    @Test(
        "BLNS, Java SDK output (exactly 92, 94, 503, 504 differ)",
        .enabled(if: VectorLocations.default.sharedVectors != nil, "\(VectorLocations.sharedMissingMessage)"),
        arguments: try CanonicalJSONSuites.blnsJava.cases())
    func blnsJava(_ c: VectorCase) throws { try c.check() }

    @Test(
        "RFC 8785 reference data",
        .enabled(if: VectorLocations.default.sharedVectors != nil, "\(VectorLocations.sharedMissingMessage)"),
        arguments: try CanonicalJSONSuites.jcs.cases())
    func jcs(_ c: VectorCase) throws { try c.check() }

    @Test("project vector files are present and large enough")
    func projectVectorsPresent() throws {
        #expect(try CanonicalJSONSuites.documents.cases().count > 1000)
        #expect(try CanonicalJSONSuites.numbers.cases().count == 6)
    }

    @Test(
        "external suites run when ../shared is present",
        .enabled(if: VectorLocations.default.sharedVectors != nil, "\(VectorLocations.sharedMissingMessage)"))
    func sharedSuites() throws {
        #expect(try CanonicalJSONSuites.blnsNode.cases().count == 508)
        #expect(try CanonicalJSONSuites.blnsJava.cases().count == 508)
        #expect(try CanonicalJSONSuites.jcs.cases().count == 6)
    }
}
