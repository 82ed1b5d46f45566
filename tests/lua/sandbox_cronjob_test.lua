-- The sandbox's CronJob controller (issue 14) under the virtual clock, in
-- process: an EKS cluster with a HyperPod group of one CPU node; a CronJob
-- every 5 minutes makes Jobs owned by it named <name>-<minutes since the
-- epoch>, which run to Complete; lastScheduleTime and active follow;
-- successfulJobsHistoryLimit keeps only the newest finished Jobs; suspend
-- stops new ones. Under the virtual clock a schedule time does not move the
-- clock by itself: the test sleeps past it and the next change in the
-- cluster (a ConfigMap written here) lets it fire.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local _, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local core, json, task = require "hypd.core", require "hypd.json", require "hypd.task"
local cron = require "sandbox.k8s.controllers.cronjobs"

t.test("cron schedules: the next time after a moment, in UTC, for steps, ranges, names and macros", function()
  local function nxt(s, at) return os.date("!%Y-%m-%d %H:%M %a", cron.next_time(assert(cron.parse(s)), at)) end
  local t0 = 1764590400 -- 2025-12-01 12:00:00 UTC, a Monday
  t.eq(nxt("*/5 * * * *", t0), "2025-12-01 12:05 Mon")
  t.eq(nxt("*/5 * * * *", t0 + 301), "2025-12-01 12:10 Mon")
  t.eq(nxt("0 3 * * *", t0), "2025-12-02 03:00 Tue")
  t.eq(nxt("30 9 * * mon-fri", t0 + 86400 * 4), "2025-12-08 09:30 Mon")
  t.eq(nxt("@monthly", t0), "2026-01-01 00:00 Thu")
  t.eq(nxt("0 0 29 2 *", t0), "2028-02-29 00:00 Tue")
  t.eq(nxt("0 12 1 * 5", t0), "2025-12-05 12:00 Fri") -- day of month or day of week
  local c, why = cron.parse("61 * * * *")
  t.eq(c, nil)
  t.like(why, "failed to parse 61")
  t.eq(select(2, cron.parse("* * *")), "expected exactly 5 fields, found 3: * * *")
end)

local conn
t.test("a cluster: EKS and a HyperPod group with a CPU node", function()
  FH.cluster(call, "cron-a", 83, { no_s3_csi = true })
  conn = require("hypd.k8s").connect { cluster = "cron-a" }
  FH.wait(function() return #(conn:list("v1", "Node") or {}) == 1 end)
  t.ok(true)
end)

local nudges = 0
local function nudge() -- a change in the cluster: the controllers wake
  nudges = nudges + 1
  assert(conn:apply({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "nudge", namespace = "default" },
    data = { n = tostring(nudges) } }))
end

local function jobs()
  local out = {}
  for _, j in ipairs(conn:list("batch/v1", "Job", { namespace = "default" }) or {}) do
    local o = (j.metadata.ownerReferences or {})[1]
    if o and o.kind == "CronJob" and o.name == "tick" then out[#out + 1] = j end
  end
  table.sort(out, function(a, b) return a.metadata.name < b.metadata.name end)
  return out
end

local function complete(j)
  for _, c in ipairs((j.status or {}).conditions or {}) do
    if c.type == "Complete" and c.status == "True" then return true end
  end
  return false
end

t.test("a CronJob every 5 minutes makes a Job owned by it when its time has passed, and the Job completes", function()
  if not conn then return t.skip("no cluster") end
  assert(conn:create { apiVersion = "batch/v1", kind = "CronJob", metadata = { name = "tick", namespace = "default" },
    spec = { schedule = "*/5 * * * *", successfulJobsHistoryLimit = 2, jobTemplate = { spec = { template = { spec = {
      restartPolicy = "OnFailure", containers = { { name = "date", image = "busybox:1.36", command = { "date" } } } } } } } } })
  task.sleep(1)
  t.eq(#jobs(), 0, "no Job before the first time")
  local first = (math.floor(core.now()) // 300 + 1) * 300
  task.sleep(first - core.now() + 1)
  nudge()
  FH.wait(function() return #jobs() == 1 and complete(jobs()[1]) end, 600, 1)
  local j = jobs()[1]
  t.eq(j.metadata.name, "tick-" .. first // 60)
  t.eq(j.metadata.annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"], os.date("!%Y-%m-%dT%H:%M:%SZ", first))
  t.eq(j.metadata.ownerReferences[1].controller, true)
  local cj = conn:get("batch/v1", "CronJob", "tick", { namespace = "default" })
  t.eq(cj.status.lastScheduleTime, os.date("!%Y-%m-%dT%H:%M:%SZ", first))
  t.ok(cj.status.lastSuccessfulTime, "lastSuccessfulTime: " .. json.encode(cj.status))
  t.eq(cj.status.active, nil)
end)

t.test("missed times run once (the latest), and successfulJobsHistoryLimit keeps the newest two finished Jobs", function()
  if not conn then return t.skip("no cluster") end
  for _ = 1, 3 do
    local want = (math.floor(core.now()) // 300 + 1) * 300
    task.sleep(want - core.now() + 601) -- three times pass: only the latest runs
    local latest = (math.floor(core.now()) // 300) * 300
    nudge()
    FH.wait(function()
      local js = jobs()
      return js[#js] and js[#js].metadata.name == "tick-" .. latest // 60 and complete(js[#js])
    end, 600, 1)
  end
  FH.wait(function() return #jobs() == 2 end, 600, 1)
  local names = {}
  for i, j in ipairs(jobs()) do names[i] = j.metadata.name end
  t.eq(#names, 2, json.encode(names))
end)

t.test("a suspended CronJob makes no Job however much time passes", function()
  if not conn then return t.skip("no cluster") end
  assert(conn:patch("batch/v1", "CronJob", "tick", { spec = { suspend = true } }, { namespace = "default" }))
  local before = json.encode(jobs())
  task.sleep(1800)
  nudge()
  task.sleep(5)
  local after = {}
  for i, j in ipairs(jobs()) do after[i] = j.metadata.name end
  t.eq(#after, 2)
  t.eq(json.encode(jobs()) == before, true, "no Job was made or removed")
end)
