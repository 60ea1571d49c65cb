import E3DBConformance
import E3DBTestSupport
import Testing

@Suite("E3DB file v3 vectors (Python SDK)")
struct FileVectorTests {
    @Test(arguments: try FilesSuites.fileV3.cases())
    func vector(_ c: VectorCase) throws { try c.check() }
}
