-- wrk script for the streamed answer's relay cost (cpu_split.sh, gateway_instructions.sh): the
-- 3 KB chat of overhead_request.json asking for a streamed answer of `TOKENS` tokens (default
-- 256) instead of one token at once. Run the engine in modelled time (SIM_SPEEDUP=1) so that it
-- sends one server-sent event a token, as a replica decoding does: the proxy then relays
-- TOKENS + 3 events a request, and its CPU per request is mostly that relay. done() prints the
-- PGBENCH line (pgbench_line.lua).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local file = assert(io.open(here .. "overhead_request.json", "rb"))
local base = file:read("*a"):gsub("%s+$", "")
file:close()

local tokens = tonumber(os.getenv("TOKENS") or "256")
local body, found = base:gsub('"max_tokens":1,', string.format('"max_tokens":%d,"stream":true,', tokens), 1)
assert(found == 1, "overhead_request.json no longer asks for max_tokens 1")

wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"

done = dofile(here .. "pgbench_line.lua")(#body)
