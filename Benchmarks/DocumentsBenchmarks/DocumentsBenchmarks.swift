// Placeholder so the benchmark package builds: the documents (E3DBDocuments) encrypt/decrypt/sign benchmarks vs. direct libsodium are filled in by the work on
// issue 2 (performance) for this area. Until then this target registers no benchmarks.
import Benchmark

let benchmarks: @Sendable () -> Void = {
    // Intentionally empty until the Documents benchmarks land (issue 2).
}
