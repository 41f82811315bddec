-- wrk script: POSTs real-shaped payloads, each new so that none is a duplicate.
-- User ids begin with 8 scattered hex digits, as apps' own ids (UUIDs) do: ids that grew
-- in order would all land on the last page of each index keyed by them, which real
-- traffic never does (sequential ids measured a quarter faster than these).
-- BENCH_BODY=iad (default): iAd dictionaries, also sent to the no-op route for the ceiling;
-- BENCH_BODY=adservices: AdServices tokens about as long as Apple's (~1 KB of Base64).
local thread_count = 0

function setup(thread)
  thread:set("tid", thread_count)
  thread_count = thread_count + 1
end

local counter = 0
local templates = {
  iad = '{"app_id":"1234567890","app_user_id":"%08x-bench-%s-%d-%d","Version3.1":{' ..
    '"iad-attribution":"true","iad-org-id":"40669820","iad-org-name":"Mindful Apps Inc.",' ..
    '"iad-campaign-id":"542370539","iad-campaign-name":"US Search - Meditation",' ..
    '"iad-adgroup-id":"542317095","iad-adgroup-name":"Exact - Core","iad-keyword-id":"87675432",' ..
    '"iad-keyword":"meditation app","iad-keyword-matchtype":"Exact","iad-ad-id":"542317136",' ..
    '"iad-country-or-region":"US","iad-conversion-type":"Download",' ..
    '"iad-click-date":"2020-08-04T17:18:07Z","iad-conversion-date":"2020-08-04T17:19:41Z"}}',
  adservices = '{"app_id":"1234567890","app_user_id":"%08x-bench-%s-%d-%d","att_status":3,"token":"' ..
    string.rep("QmVuY2htYXJrVG9rZW4", 50) .. 'R%sT%dN%d"}',
}
local kind = os.getenv("BENCH_BODY") or "iad"
local template = templates[kind]
local run_id = os.getenv("BENCH_RUN") or "0"

-- BENCH_BODY=skan: signed postbacks from BENCH_FILE (its first line is the key), each
-- thread taking every other one so that no two requests repeat a postback. BENCH_SKIP
-- leaves out the file's first postbacks, those an earlier run sent: a postback sent again
-- is a duplicate, which the gateway answers without storing anything.
local postbacks = {}
local next_postback = 1
function init(args)
  if kind ~= "skan" then return end
  local skip = tonumber(os.getenv("BENCH_SKIP") or "0")
  local index = -1
  for line in io.lines(os.getenv("BENCH_FILE")) do
    if index >= skip and index % 2 == (tid or 0) then postbacks[#postbacks + 1] = line end
    index = index + 1
  end
end

-- A bijection of the counter (multiplication by an odd number modulo 2^32), exact in
-- LuaJIT's doubles while the counter stays under 2^21 per thread and run.
local function scattered(n)
  return (n * 2654435761 + (tid or 0) * 40503) % 4294967296
end

request = function()
  counter = counter + 1
  local body
  if kind == "skan" then
    body = postbacks[next_postback]
    next_postback = next_postback % #postbacks + 1
  elseif kind == "adservices" then
    body = string.format(template, scattered(counter), run_id, tid or 0, counter, run_id, tid or 0, counter)
  else
    body = string.format(template, scattered(counter), run_id, tid or 0, counter)
  end
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end

-- BENCH_DELAY_MS: each connection waits this long between requests, to load the server
-- at a set rate below its ceiling (wrk is closed-loop; latency excludes the wait).
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
if pause > 0 then
  delay = function() return pause end
end

done = function(summary, latency, requests)
  io.write(string.format("RESULT requests=%d errors_status=%d rps=%.1f p50_ms=%.3f p99_ms=%.3f\n",
    summary.requests, summary.errors.status, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
