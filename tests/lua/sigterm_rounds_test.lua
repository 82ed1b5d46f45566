-- A graceful stop never fails an operation. The real binary, as a person
-- runs it: `hypd serve --sandbox` under the virtual clock; each round
-- starts a cluster_create (a parent whose stages are child operations),
-- lets it and the ones still running from earlier rounds go for a seeded
-- random moment, then sends SIGTERM and starts the server again on the
-- same state directory. The in-process sandbox's tasks are steady
-- (hypd.task): the interrupt leaves the simulated account alone, as it
-- leaves a real one. (The SIGTERM lands while some task runs Lua: a
-- child interrupted there kept running, but its parent's hypd.tools.call
-- saw it "not succeeded" and recorded the parent FAILED; after the restart
-- the child succeeded under a failed parent.) At the end every operation
-- succeeded (none failed or cancelled) and the sandbox's audit log has each
-- create-like mutation as often as calm pipelines make them: nothing twice.
local t = require "hypd.tap"
local json = require "hypd.json"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local SEED, ROUNDS = 18, 12
local dir = H.tmpdir()
local state = dir .. "/state"
local procs, n = {}, 0

-- serve() -> a `hypd serve --sandbox` on the state directory, once it listens
local function serve()
  n = n + 1
  local base = dir .. "/p" .. n
  os.execute(string.format("(HYPD_CLOCK=virtual %s --state %s serve --listen 127.0.0.1:0 --sandbox --grace 2 " ..
    ">%s.out 2>%s.err </dev/null & echo $! >%s.pid; wait $!; echo $? >%s.rc) >/dev/null 2>&1 </dev/null &",
    H.hypd, H.quote(state), base, base, base, base))
  local p = { base = base }
  function p.out() return H.read(base .. ".out") or "" end
  function p.err() return H.read(base .. ".err") or "" end
  function p.rc() return tonumber((H.read(base .. ".rc") or ""):match("%d+")) end
  function p.pid() return (H.read(base .. ".pid") or ""):match("%d+") end
  for _ = 1, 1000 do
    if p.out():find("stops it", 1, true) or p.rc() then break end
    task.sleep(0.02)
  end
  p.url = p.out():match("listening on (http://[%d.:]+)")
  p.token = p.out():match("token %b(): (hypd_[%w_-]+)")
  p.sandbox = p.out():match("export AWS_ENDPOINT_URL=(http://[%d.:]+)")
  procs[#procs + 1] = p
  return p
end

local function stop(p, sig)
  os.execute("kill -" .. sig .. " " .. tostring(p.pid()) .. " 2>/dev/null")
  for _ = 1, 1500 do
    if p.rc() then return p.rc() end
    task.sleep(0.02)
  end
end

local function get(p, path)
  local _, out = H.sh("curl -s -H 'authorization: Bearer " .. tostring(p.token) .. "' " .. tostring(p.url) .. path)
  return json.decode(out or "") or {}
end

local function post_pipeline(p, tag)
  local body = json.encode { cluster_tag = tag, instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a", features = { training_operator = true } }
  local _, out = H.sh(string.format("curl -s -X POST -H 'authorization: Bearer %s' -H 'content-type: " ..
    "application/json' -d %s %s/api/v1/tools/cluster_create", p.token, H.quote(body), p.url))
  return (json.decode(out or "") or {}).operation_id, out
end

-- operations(p) -> every operation's record (parents and children)
local function operations(p) return get(p, "/api/v1/operations?limit=200").operations or {} end

-- settle(p, seconds) -> true once no operation runs
local function settle(p, seconds)
  for _ = 1, seconds * 10 do
    local busy = false
    for _, o in ipairs(operations(p)) do busy = busy or o.status == "running" end
    if not busy then return true end
    task.sleep(0.1)
  end
  return false
end

-- creates(p) -> {"service Operation" = n} of the create-like mutations in the audit log
local function creates(p)
  local _, out = H.sh("curl -s " .. tostring(p.sandbox) .. "/_sandbox/audit")
  local counts = {}
  for _, e in ipairs(json.decode(out or "") or {}) do
    local k = e.service .. " " .. e.operation
    if e.operation:match("^Create") or e.operation:match("^Allocate") or e.operation:match("^Attach") or
      e.operation:match("^Associate") then counts[k] = (counts[k] or 0) + 1 end
  end
  return counts
end

local calm
t.test("a calm pipeline under the server succeeds (the counts to compare with)", function()
  local p = serve()
  t.ok(p.url and p.token and p.sandbox, "the server started: " .. p.err())
  local id, out = post_pipeline(p, "sig-calm")
  t.like(id, "^op%-", out)
  t.ok(settle(p, 60), "it finished")
  for _, o in ipairs(operations(p)) do t.eq(o.status, "succeeded", o.tool .. " " .. json.encode(o.error)) end
  calm = creates(p)
  t.eq(stop(p, "TERM"), 0, "SIGTERM stops it with 0")
end)

t.test(ROUNDS .. " rounds of SIGTERM at seeded random moments: every operation succeeds, nothing is made twice",
    function()
  math.randomseed(SEED)
  local stopped_running = 0
  for round = 1, ROUNDS do
    local p = serve()
    t.ok(p.url, "round " .. round .. ": the server started: " .. p.err())
    local id, out = post_pipeline(p, "sig-" .. round)
    t.like(id, "^op%-", "round " .. round .. ": " .. tostring(out))
    local wait = 0.2 + math.random() * 3
    task.sleep(wait)
    t.eq(stop(p, "TERM"), 0, "round " .. round .. ": SIGTERM after " .. string.format("%.2f", wait) ..
      " s stops it with 0")
    if p.err():find("interrupted at", 1, true) then stopped_running = stopped_running + 1 end
  end
  print("# " .. stopped_running .. " of " .. ROUNDS .. " stops interrupted a running operation")
  local p = serve()
  t.ok(p.url, "the last server started: " .. p.err())
  t.ok(settle(p, 120), "every operation ended")
  local by = {}
  for _, o in ipairs(operations(p)) do
    by[o.status] = (by[o.status] or 0) + 1
    if o.status ~= "succeeded" then
      t.ok(false, o.tool .. " " .. o.operation_id .. " " .. tostring(o.status) .. ": " .. json.encode(o.error or json.null))
    end
  end
  print("# operations: " .. json.encode(by))
  t.eq(by.succeeded and by.succeeded % (ROUNDS + 1), 0, "parents and children of every pipeline")
  local want = {}
  for k, v in pairs(calm) do want[k] = v * (ROUNDS + 1) end
  t.eq(creates(p), want, "each create-like mutation as often as " .. (ROUNDS + 1) .. " calm pipelines make them")
  stop(p, "KILL")
end)

t.cleanup(function()
  for _, p in ipairs(procs) do
    if not p.rc() then stop(p, "KILL") end
  end
  os.execute("rm -rf " .. H.quote(dir))
end)
