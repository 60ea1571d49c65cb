// Placeholder so that the benchmark package builds. The benchmarks of the documents (E3DBDocuments) encrypt,
// decrypt and sign against direct libsodium
// are filled in by the Documents work on issue 2 (performance); until then this target registers nothing.
import Benchmark

let benchmarks: @Sendable () -> Void = {
    // Intentionally empty until the Documents benchmarks land (issue 2).
}
