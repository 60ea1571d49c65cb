import E3DBConformance
import E3DBTestSupport
import Testing

/// Every case of the documents vector suites, one test case per vector id.
@Suite("Documents vectors")
struct DocumentsVectorTests {
    @Test("record fields", arguments: try DocumentsSuites.recordFields.cases())
    func recordFields(_ c: VectorCase) throws { try c.check() }

    @Test("records and rec_sig", arguments: try DocumentsSuites.records.cases())
    func records(_ c: VectorCase) throws { try c.check() }

    @Test("SignedDocument", arguments: try DocumentsSuites.signedDocuments.cases())
    func signedDocuments(_ c: VectorCase) throws { try c.check() }

    @Test("TFSP1", arguments: try DocumentsSuites.tfsp1.cases())
    func tfsp1(_ c: VectorCase) throws { try c.check() }

    @Test("notes", arguments: try DocumentsSuites.notes.cases())
    func notes(_ c: VectorCase) throws { try c.check() }

    @Test("js-sdk variants and unsigned records", arguments: try DocumentsSuites.jsVariants.cases())
    func jsVariants(_ c: VectorCase) throws { try c.check() }
}
