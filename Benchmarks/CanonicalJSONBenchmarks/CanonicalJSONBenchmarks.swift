// Placeholder so that the benchmark package builds. The benchmarks of the canonical JSON (E3DBCanonicalJSON)
// against the peer serializers
// are filled in by the CanonicalJSON work on issue 2 (performance); until then this target registers nothing.
import Benchmark

let benchmarks: @Sendable () -> Void = {
    // Intentionally empty until the CanonicalJSON benchmarks land (issue 2).
}
