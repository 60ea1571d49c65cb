-- Shared by the wrk scripts of scripts/server-benchmark.sh: one machine-readable line per run,
-- "RESULT requests_per_second p50_ms p99_ms socket_errors non_2xx".
function report(summary, latency)
    local e = summary.errors
    io.write(string.format("RESULT %.1f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, latency:percentile(99) / 1000,
        e.connect + e.read + e.write + e.timeout, e.status))
end
