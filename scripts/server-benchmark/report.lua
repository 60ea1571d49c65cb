-- Shared by the wrk scripts of scripts/server-benchmark.sh: one machine-readable line per run,
-- "RESULT requests_per_second p50_ms p99_ms socket_errors non_2xx", then
-- "QUANTILES requests q0.1 q0.2 … q100" (the latency in ms at every 0.1 percentile, and the responses counted), from
-- which the --nodes mode merges the latencies of the wrk processes it runs at once.
function report(summary, latency)
    local e = summary.errors
    io.write(string.format("RESULT %.1f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, latency:percentile(99) / 1000,
        e.connect + e.read + e.write + e.timeout, e.status))
    local q = {}
    for i = 1, 1000 do q[i] = string.format("%.3f", latency:percentile(i / 10) / 1000) end
    io.write("QUANTILES " .. summary.requests .. " " .. table.concat(q, " ") .. "\n")
end
