-- wrk script for `prefixgate-bench overhead` and gateway_instructions.sh: every connection sends
-- the same realistic chat completion (overhead_request.json: a ~2 KB system prompt, two tools, a
-- user message, max_tokens 1), and done() prints one machine-readable line that they parse:
--   PGBENCH requests=N duration_us=N errors=N non2xx=N rps=F p50_us=N p90_us=N p99_us=N
-- Latencies are wrk's own (microseconds, from the request write to the last response byte).

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

function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout
  io.write(string.format(
    "PGBENCH requests=%d duration_us=%d errors=%d non2xx=%d rps=%.2f p50_us=%d p90_us=%d p99_us=%d body_bytes=%d\n",
    summary.requests, summary.duration, errors, e.status,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), #body))
end
