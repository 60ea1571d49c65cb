/// Every committed vector suite, in the order `e3dbkit vectors verify` prints them.
/// Each layer adds its suites here.
///
/// E3DBConformance is the conformance checker of this build: one ``VectorSuite`` per committed vector file under
/// `TestVectors/` (and the external vectors in `../shared/vectors`), each case a ``VectorCase`` whose
/// ``VectorCase/check()`` runs the implementation on the vector's inputs and throws a description of any
/// disagreement. `e3dbkit vectors verify` (the product feature) and the test targets run the same suites, so a
/// vector is checked the same way everywhere. It holds no test-framework code (no Swift Testing or XCTest, no
/// public assertion functions) and nothing that depends on where it was compiled (no `#filePath`):
/// ``VectorLocations`` finds `TestVectors/` from the current directory upwards or takes explicit directories.
package enum AllVectorSuites {
    package static var all: [VectorSuite] {
        PrimitivesSuites.all
            + CanonicalJSONSuites.all
            + KeysSuites.all
            + DocumentsSuites.all
            + IdentitySuites.all
            + FilesSuites.all
            + SQLCipherSuites.all
    }
}
