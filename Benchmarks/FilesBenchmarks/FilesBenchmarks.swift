// Placeholder so the benchmark package builds: the files (E3DBFiles) file-format v3 encrypt/decrypt benchmarks vs. direct secretstream are filled in by the work on
// issue 2 (performance) for this area. Until then this target registers no benchmarks.
import Benchmark

let benchmarks: @Sendable () -> Void = {
    // Intentionally empty until the Files benchmarks land (issue 2).
}
