// Placeholder so that the benchmark package builds. The benchmarks of the files (E3DBFiles, format v3) encrypt and
// decrypt against direct secretstream
// are filled in by the Files work on issue 2 (performance); until then this target registers nothing.
import Benchmark

let benchmarks: @Sendable () -> Void = {
    // Intentionally empty until the Files benchmarks land (issue 2).
}
