-- Authenticated POST /v1/storage/records with the record body in the file $BENCH_BODY.
dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.path = "/v1/storage/records"
wrk.body = f:read("*a")
f:close()
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests) report(summary, latency) end
