-- wrk script for the ingest benchmark: POSTs signed GitHub `issue_comment` deliveries, cycling
-- through a pre-computed table of bodies and signatures (BENCH_DATA, written by
-- `beckon-bench payloads`). The signature covers the body only, so each request gets a fresh
-- X-GitHub-Delivery id (BENCH_RUN, wrk thread, counter) and dedupe never short-circuits.
-- BENCH_DELAY_MS > 0 paces each connection (fixed rate = connections * 1000 / delay).
-- done() prints one machine-readable RESULT line.
local data = dofile(os.getenv("BENCH_DATA"))
local run = os.getenv("BENCH_RUN") or "run"
local pace = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
end

function init(args)
  n = 0
  -- Threads start at different places in the table so they do not send the same body in lockstep.
  offset = (tid or 0) * 37
end

function request()
  n = n + 1
  local p = data[((n + offset) % #data) + 1]
  return wrk.format("POST", "/webhooks/github", {
    ["Content-Type"] = "application/json",
    ["User-Agent"] = "GitHub-Hookshot/bench",
    ["X-GitHub-Event"] = "issue_comment",
    ["X-GitHub-Delivery"] = run .. "-" .. tostring(tid) .. "-" .. tostring(n),
    ["X-Hub-Signature-256"] = p.sig,
  }, p.body)
end

if pace > 0 then
  function delay()
    return pace
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d p999_us=%d max_us=%d non2xx=%d socket_errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), latency.max, e.status, e.connect + e.read + e.write + e.timeout))
end
