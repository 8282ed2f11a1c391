-- wrk script for `prefixgate-bench overhead` and gateway_instructions.sh: every connection sends
-- the same realistic chat completion (overhead_request.json: a ~2 KB system prompt, two tools, a
-- user message, max_tokens 1), and done() prints the machine-readable line they parse
-- (pgbench_line.lua).

-- The body lives in overhead_request.json beside this script, so the Google Benchmark of the
-- gateway's request preparation (microbench/gateway_prep_bench.cpp) measures the very same request.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local file = assert(io.open(here .. "overhead_request.json", "rb"))
local body = file:read("*a"):gsub("%s+$", "")
file:close()

wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"

done = dofile(here .. "pgbench_line.lua")(#body)

