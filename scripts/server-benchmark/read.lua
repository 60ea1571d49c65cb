-- Authenticated GET /v1/storage/records/{id}, cycling over the ids in $BENCH_IDS (one per line), each thread from
-- its own starting point, with the Bearer token in $BENCH_TOKEN. The requests are formatted once, in init, so that
-- wrk does little more per request here than on the fixed route.
dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS")) do ids[#ids + 1] = line end
local headers = { ["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN") }
local requests = {}
local next_id = 0
local threads = 0
setup = function(thread)
    threads = threads + 1
    thread:set("offset", threads)
end
init = function(args)
    for i, id in ipairs(ids) do requests[i] = wrk.format("GET", "/v1/storage/records/" .. id, headers) end
    next_id = (offset * 4999) % #requests
end
request = function()
    next_id = next_id % #requests + 1
    return requests[next_id]
end
done = function(summary, latency, requests) report(summary, latency) end
