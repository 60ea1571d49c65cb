-- GET /fixed on the baseline server.
dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
wrk.method = "GET"
wrk.path = "/fixed"
done = function(summary, latency, requests) report(summary, latency) end
