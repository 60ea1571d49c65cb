import E3DBConformance
import Testing

/// Every page of SQLCipher's own databases (SQLCipher 4.12) through `PageCodec` alone, no SQLite: the vector suite
/// `e3dbkit vectors verify` also runs.
@Suite("SQLCipher page vectors (SQLCipher 4.12): the page codec alone")
struct PageVectorTests {
    @Test(arguments: try SQLCipherSuites.pages.cases())
    func vector(_ c: VectorCase) throws { try c.check() }
}
