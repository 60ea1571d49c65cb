/// Every committed vector suite, in the order `e3dbkit vectors verify` prints them.
/// Each layer adds its suites here.
public enum AllVectorSuites {
    public static var all: [VectorSuite] {
        PrimitivesSuites.all
            + CanonicalJSONSuites.all
            + KeysSuites.all
            + DocumentsSuites.all
            + IdentitySuites.all
            + FilesSuites.all
            + SQLCipherSuites.all
    }
}
