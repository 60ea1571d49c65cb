import E3DBConformance
import E3DBTestSupport
import Testing

/// Every case of the keys vector suites (Python SDK e3db 2.3.0), one test case per vector id.
@Suite("Keys vectors")
struct KeysVectorTests {
    @Test("EAK wrap/unwrap", arguments: try KeysSuites.eak.cases())
    func eak(_ c: VectorCase) throws { try c.check() }

    @Test("EAKInfo shapes", arguments: try KeysSuites.eakInfo.cases())
    func eakInfo(_ c: VectorCase) throws { try c.check() }

    @Test("client configuration JSON", arguments: try KeysSuites.clientConfig.cases())
    func clientConfig(_ c: VectorCase) throws { try c.check() }

    @Test("group access key wrappers (PyNaCl)", arguments: try KeysSuites.groupWrappers.cases())
    func groupWrappers(_ c: VectorCase) throws { try c.check() }
}
