// Placeholder so the benchmark package builds: the canonical JSON (E3DBCanonicalJSON) benchmarks vs. the peer serializers are filled in by the work on
// issue 2 (performance) for this area. Until then this target registers no benchmarks.
import Benchmark

let benchmarks: @Sendable () -> Void = {
    // Intentionally empty until the CanonicalJSON benchmarks land (issue 2).
}
