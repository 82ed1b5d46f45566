-- The measured pipeline of make bench (tests/bench/pipeline_bench.lua runs
-- this file in a process of its own: the virtual clock is this process's).
-- cluster_create against the in-process sandbox with its realistic service
-- durations (EKS 8 to 12 minutes, HyperPod 13 to 17, add-ons 1 to 3, NAT
-- gateway 2), under the virtual clock. Prints "# bench" lines: the total
-- simulated time, the critical path of the AWS operations and their ratio,
-- and the AWS calls of each stage (by tool, reads and writes).
--
-- The critical path is what the services themselves take, along the
-- dependencies the stages cannot avoid: the EKS stage's longest wait (the
-- NAT gateway and the cluster can overlap), the longest add-on of the
-- dependencies (they are created together), the HyperPod cluster's
-- creation, and the features' add-ons one after the other (each needs the
-- one before). Every wait the sandbox schedules is recorded with the stage
-- (operation) that asked for it.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local guard = require "hypd.tool.guard"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local srv = H.sandbox_here()
local sandbox = require "sandbox"

local function report(name, value, unit)
  print(string.format("# bench %-52s %12.2f %s", name .. ":", value, unit))
end

-- the waits the sandbox schedules: {service, transition, seconds, op}
local waits = {}
local function record(self, seconds, transition)
  waits[#waits + 1] = { service = self.service, transition = transition, seconds = seconds / sandbox.speed,
    at = require("hypd.core").now() }
end

-- the AWS calls of each operation
local calls = {}
aws.on_call = function(service, operation)
  local g = guard.current()
  local id = g and (g.op_id or (g.patient and "plans")) or "none"
  local c = calls[id] or { read = 0, write = 0 }
  calls[id] = c
  if aws.class(service, operation) == "read" then c.read = c.read + 1 else c.write = c.write + 1 end
end

t.test("cluster_create from an empty account, measured", function()
  local later = sandbox.Ctx and sandbox.Ctx.later
  t.ok(later, "the sandbox's Ctx.later to record the waits")
  sandbox.Ctx.later = function(self, seconds, transition, args)
    record(self, seconds, transition)
    return later(self, seconds, transition, args)
  end
  local acc = assert(dispatch.call("cluster_create", { cluster_tag = "bench", instance_type = "ml.g5.12xlarge",
    instance_count = 2, availability_zone = "us-west-2a", features = { training_operator = true } },
    { name = "bench", scope = "admin", front = "bench" }))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  sandbox.Ctx.later = later
  local tool_of = { [acc.operation_id] = "cluster_create (its own: checks and early work)" }
  local windows = {}
  for _, c in ipairs(v.children or {}) do
    tool_of[c.operation_id] = c.tool
    local cv = op.view(op.get(c.operation_id))
    windows[#windows + 1] = { tool = c.tool, from = cv.created_at, to = cv.finished_at }
  end
  -- a wait belongs to the stage running when it was asked for (the sandbox
  -- answers in this process, outside the operation's task)
  for _, w in ipairs(waits) do
    for _, win in ipairs(windows) do
      if w.at >= win.from and w.at <= win.to and win.tool ~= "storage_create_s3" then w.stage = win.tool end
    end
  end
  -- the critical path
  local longest, sum = {}, {}
  for _, w in ipairs(waits) do
    local name = w.stage or "other"
    longest[name] = math.max(longest[name] or 0, w.seconds)
    if w.transition == "addon_active" then sum[name] = (sum[name] or 0) + w.seconds end
  end
  local path = (longest.cluster_create_eks or 0) + (longest.cluster_configure_dependencies or 0) +
    (longest.hyperpod_create or 0) + (sum.hyperpod_update_advanced_features or 0)
  local total = v.finished_at - v.created_at
  report("pipeline total simulated time", total / 60, "min")
  report("pipeline critical path of the AWS operations", path / 60, "min")
  report("pipeline total / critical path (aim <= 1.05)", total / path, "x")
  for _, c in ipairs(v.children or {}) do
    local cv = op.view(op.get(c.operation_id))
    report("stage " .. c.tool .. " simulated time", (cv.finished_at - cv.created_at) / 60, "min")
    local own = c.tool == "hyperpod_update_advanced_features" and sum[c.tool] or longest[c.tool]
    if own then report("stage " .. c.tool .. " AWS wait on its path", own / 60, "min") end
  end
  local ids = { acc.operation_id, "plans" }
  for _, c in ipairs(v.children or {}) do ids[#ids + 1] = c.operation_id end
  for _, id in ipairs(ids) do
    local c = calls[id]
    if c then
      local name = id == "plans" and "cluster_create (its check: every stage planned)" or tool_of[id]
      report("AWS calls of " .. name .. " (reads)", c.read, "calls")
      report("AWS calls of " .. name .. " (writes)", c.write, "calls")
    end
  end
  t.ok(srv.port > 0)
end)
