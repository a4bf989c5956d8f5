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
  -- Each request differs from its body's only in the delivery id, so format every body once
  -- (wrk.format, the headers below) and keep the text before and after the id: a request is then
  -- one concatenation, and the load generator spends its CPU on sending, not on formatting.
  local marker = "\0delivery\0"
  for _, p in ipairs(data) do
    local text = wrk.format("POST", "/webhooks/github", {
      ["Content-Type"] = "application/json",
      ["User-Agent"] = "GitHub-Hookshot/bench",
      ["X-GitHub-Event"] = "issue_comment",
      ["X-GitHub-Delivery"] = marker,
      ["X-Hub-Signature-256"] = p.sig,
    }, p.body)
    local at = string.find(text, marker, 1, true)
    p.head, p.tail = string.sub(text, 1, at - 1), string.sub(text, at + #marker)
  end
end

function request()
  n = n + 1
  local p = data[((n + offset) % #data) + 1]
  return p.head .. run .. "-" .. tostring(tid) .. "-" .. tostring(n) .. p.tail
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
