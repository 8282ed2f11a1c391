-- The line every wrk script of this folder prints when wrk is done, which `prefixgate-bench
-- overhead`, gateway_instructions.sh, cpu_split.sh, syscalls.sh and pgo_train.sh parse:
--   PGBENCH requests=N duration_us=N errors=N non2xx=N rps=F p50_us=N p90_us=N p99_us=N [body_bytes=N]
-- Latencies are wrk's own (microseconds, from the request write to the last response byte).
-- A script loads it beside itself and makes it its done(), with the body size when it has one:
--   done = dofile(here .. "pgbench_line.lua")(#body)
return function(body_bytes)
  return function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
      "PGBENCH requests=%d duration_us=%d errors=%d non2xx=%d rps=%.2f p50_us=%d p90_us=%d p99_us=%d%s\n",
      summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
      summary.requests / (summary.duration / 1e6),
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      body_bytes and string.format(" body_bytes=%d", body_bytes) or ""))
  end
end
