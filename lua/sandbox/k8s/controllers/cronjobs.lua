-- sandbox.k8s.controllers.cronjobs: batch/v1 CronJobs, as the cronjob
-- controller (v2) runs them: at each time of spec.schedule (five cron
-- fields, or @hourly/@daily/@weekly/@monthly/@yearly; in UTC, on the
-- sandbox's clock) a Job <name>-<minutes since the epoch> is made from
-- spec.jobTemplate, owned by the CronJob, with the annotation
-- batch.kubernetes.io/cronjob-scheduled-timestamp. Of the times missed
-- since status.lastScheduleTime only the latest runs, and not past
-- spec.startingDeadlineSeconds. spec.suspend makes none; concurrencyPolicy
-- Forbid skips a time while a Job is active, Replace deletes the active
-- ones first. status.active, lastScheduleTime and lastSuccessfulTime follow
-- the Jobs; finished Jobs beyond successfulJobsHistoryLimit (3) and
-- failedJobsHistoryLimit (1) are deleted, the oldest first. Under the
-- virtual clock a schedule time does not move the clock (Ctl:at_weak): it
-- fires at the cluster's first change after the clock has passed it.
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local tbl = require "sandbox.k8s.table"

local M = {}

local key = ctl_.key

-- cron ---------------------------------------------------------------------

local MACROS = { ["@yearly"] = "0 0 1 1 *", ["@annually"] = "0 0 1 1 *", ["@monthly"] = "0 0 1 * *",
  ["@weekly"] = "0 0 * * 0", ["@daily"] = "0 0 * * *", ["@midnight"] = "0 0 * * *", ["@hourly"] = "0 * * * *" }
local NAMES = { { "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec" },
  { "sun", "mon", "tue", "wed", "thu", "fri", "sat" } }
-- minute, hour, day of month, month, day of week: {low, high, names}
local FIELDS = { { 0, 59 }, { 0, 23 }, { 1, 31 }, { 1, 12, NAMES[1] }, { 0, 6, NAMES[2] } }

local function number(s, f)
  local n = tonumber(s)
  if n then return math.tointeger(n) end
  for i, name in ipairs(f[3] or {}) do
    if s:lower() == name then return f[1] == 1 and i or i - 1 end
  end
end

-- parse(schedule) -> { {set of values}... x5, dom_star, dow_star } | nil, why
function M.parse(schedule)
  local s = MACROS[schedule] or schedule
  local parts = {}
  for p in s:gmatch("%S+") do parts[#parts + 1] = p end
  if #parts ~= 5 then return nil, "expected exactly 5 fields, found " .. #parts .. ": " .. schedule end
  local out = {}
  for i, f in ipairs(FIELDS) do
    local set = {}
    for item in parts[i]:gmatch("[^,]+") do
      local range, step = item:match("^([^/]+)/(%d+)$")
      range, step = range or item, tonumber(step) or 1
      local lo, hi
      if range == "*" or range == "?" then lo, hi = f[1], f[2]
      else
        local a, b = range:match("^([^-]+)-([^-]+)$")
        lo, hi = number(a or range, f), number(b or range, f)
        if item:match("/") and not b then hi = f[2] end
      end
      if not lo or not hi or lo < f[1] or hi > f[2] + (i == 5 and 1 or 0) or lo > hi or step < 1 then
        return nil, "failed to parse " .. item .. " in " .. schedule
      end
      for v = lo, hi, step do set[i == 5 and v % 7 or v] = true end
    end
    out[i] = set
  end
  out.dom_star, out.dow_star = parts[3]:match("^[*?]") ~= nil, parts[5]:match("^[*?]") ~= nil
  return out
end

-- next_time(c, t) -> the first schedule time strictly after t (epoch seconds, UTC)
function M.next_time(c, t)
  local start = (math.floor(t) // 60 + 1) * 60
  local days = start // 86400
  local minute_of_day = (start % 86400) // 60
  for _ = 1, 366 * 5 do
    local date = os.date("!*t", days * 86400)
    local m, d, dow = date.month, date.day, date.wday - 1
    -- cron: when both day fields are restricted, either matches
    local day_ok
    if c.dom_star or c.dow_star then day_ok = c[3][d] and c[5][dow] else day_ok = c[3][d] or c[5][dow] end
    if c[4][m] and day_ok then
      for mod = minute_of_day, 1439 do
        if c[2][mod // 60] and c[1][mod % 60] then return days * 86400 + mod * 60 end
      end
    end
    days, minute_of_day = days + 1, 0
  end
  return nil
end

-- the controller -------------------------------------------------------------

local function job_finished(job)
  for _, c in ipairs((job.status or {}).conditions or {}) do
    if (c.type == "Complete" or c.type == "Failed") and c.status == "True" then return c.type end
  end
end

local function job_ref(job)
  return { apiVersion = "batch/v1", kind = "Job", name = job.metadata.name, namespace = job.metadata.namespace,
    uid = job.metadata.uid, resourceVersion = job.metadata.resourceVersion }
end

local ANN = "batch.kubernetes.io/cronjob-scheduled-timestamp"

ctl_.handlers.cronjob = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local cr, jr = ctl:r("batch", "v1", "cronjobs"), ctl:r("batch", "v1", "jobs")
  local cj = cl:get(cr, ns, name)
  if not cj then return end
  local spec = cj.spec or {}
  local st = ctl_.copy(cj.status or {})
  -- the Jobs it owns: active ones, the finished by kind, oldest first
  local active, done = {}, { Complete = {}, Failed = {} }
  local jobs = ctl_.children(ctl, jr, cj)
  table.sort(jobs, function(a, b)
    return ((a.metadata.annotations or {})[ANN] or a.metadata.creationTimestamp or "") <
      ((b.metadata.annotations or {})[ANN] or b.metadata.creationTimestamp or "")
  end)
  for _, j in ipairs(jobs) do
    local f = job_finished(j)
    if f then
      table.insert(done[f], j)
      if f == "Complete" then
        local t = (j.status or {}).completionTime
        if t and (not st.lastSuccessfulTime or t > st.lastSuccessfulTime) then st.lastSuccessfulTime = t end
      end
    else
      active[#active + 1] = j
    end
  end
  local limits = { Complete = tonumber(spec.successfulJobsHistoryLimit) or 3,
    Failed = tonumber(spec.failedJobsHistoryLimit) or 1 }
  for kind, list in pairs(done) do
    for i = 1, #list - limits[kind] do
      cl:delete(jr, ns, list[i].metadata.name, { propagation = "Background" })
      ctl_.event(ctl, cj, "Normal", "SuccessfulDelete", "Deleted job " .. list[i].metadata.name, "cronjob-controller")
    end
  end
  local c = M.parse(spec.schedule or "")
  if c and spec.suspend ~= true then
    local now = core.now()
    local since = tbl.epoch(st.lastScheduleTime) or tbl.epoch(cj.metadata.creationTimestamp) or now
    -- the latest missed time (at most a few hundred looked at, as the controller does)
    local sched, t = nil, M.next_time(c, since)
    for _ = 1, 1000 do
      if not t or t > now then break end
      sched, t = t, M.next_time(c, t)
    end
    local deadline = tonumber(spec.startingDeadlineSeconds)
    if sched and deadline and now > sched + deadline then
      ctl_.event(ctl, cj, "Warning", "MissSchedule", "Missed scheduled time to start a job: " ..
        ctl_.stamp(sched), "cronjob-controller")
      st.lastScheduleTime = ctl_.stamp(sched)
      sched = nil
    end
    if sched then
      local policy = spec.concurrencyPolicy or "Allow"
      if policy == "Forbid" and #active > 0 then
        sched = nil -- tried again when the active Job finishes
        ctl_.event(ctl, cj, "Normal", "JobAlreadyActive", "Not starting job because prior execution is running " ..
          "and concurrency policy is Forbid", "cronjob-controller")
      elseif policy == "Replace" then
        for _, j in ipairs(active) do
          cl:delete(jr, ns, j.metadata.name, { propagation = "Background" })
          ctl_.event(ctl, cj, "Normal", "SuccessfulDelete", "Deleted job " .. j.metadata.name, "cronjob-controller")
        end
        active = {}
      end
    end
    if sched then
      local tmpl = ctl_.copy(spec.jobTemplate or {})
      local md = tmpl.metadata or {}
      local jname = name .. "-" .. math.tointeger(sched // 60)
      local annotations = ctl_.copy(md.annotations or {})
      annotations[ANN] = ctl_.stamp(sched)
      local job = cl:get(jr, ns, jname) or cl:create(jr, { apiVersion = "batch/v1", kind = "Job",
        metadata = { name = jname, namespace = ns, labels = md.labels, annotations = annotations,
          ownerReferences = { ctl_.owner_ref(cj) } },
        spec = tmpl.spec or {} })
      if job then
        active[#active + 1] = job
        ctl_.event(ctl, cj, "Normal", "SuccessfulCreate", "Created job " .. jname, "cronjob-controller")
      end
      st.lastScheduleTime = ctl_.stamp(sched)
    end
    local nxt = M.next_time(c, math.max(now, tbl.epoch(st.lastScheduleTime) or now))
    if nxt then ctl:at_weak(nxt, "cronjob", k) end
  end
  local refs = {}
  for i, j in ipairs(active) do refs[i] = job_ref(j) end
  st.active = #refs > 0 and refs or nil
  ctl_.put_status(ctl, cr, cj, st)
end

function M.watch(ctl, etype, r, obj)
  if r.group == "batch" and r.kind == "CronJob" then
    if etype ~= "DELETED" then ctl:enqueue("cronjob", key(obj)) end
  elseif r.group == "batch" and r.kind == "Job" then
    local o = ctl_.owner(obj, "CronJob")
    if o then ctl:enqueue("cronjob", obj.metadata.namespace .. "/" .. o.name) end
  end
end

function M.start(ctl)
  for _, c in ipairs(ctl.cl:list(ctl:r("batch", "v1", "cronjobs"))) do ctl:enqueue("cronjob", key(c)) end
end

return M
