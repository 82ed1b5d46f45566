-- A scaling operation survives its host stopping: stopped while it waits
-- for the group (after its UpdateCluster), and replayed as a host that
-- stopped after the UpdateCluster but before recording the step done
-- leaves it, op.resume() finishes it, and UpdateCluster was sent once (the
-- kit's ensure reads the group's target back instead of sending again).
-- The sandbox in this process, under the virtual clock (capacity_helpers).
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local store = require "hypd.store"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local C = dofile("tests/lua/capacity_helpers.lua")

local S

local function sent(operation)
  local n = 0
  for _, s in ipairs(C.sent) do if s.operation == operation then n = n + 1 end end
  return n
end

-- stop_at(prefix): the next phase of a scaling that starts with prefix
-- stops it as a stopping host does: its task is cancelled with no cancel
-- request, so the record stays running and op.resume() continues it
local function stop_at(prefix)
  local off
  off = op.subscribe(function(ev)
    if ev.kind == "operation.phase" and ev.tool == "hyperpod_scale_instance_group" and
        tostring(ev.phase):find(prefix, 1, true) == 1 then
      off()
      local victim = op.active()[ev.operation_id]
      task.spawn(function() victim:cancel("the host is stopping (the test stops it)") end)
    end
  end)
end

t.test("a sandbox with an EKS cluster and a HyperPod cluster", function()
  S = C.here()
  S.build("resume-demo", "hp-resume")
end)

t.test("a scaling stopped while it waits, and replayed from its scale step, finishes with one UpdateCluster", function()
  if not S then return t.skip("no cluster") end
  local n0 = sent("UpdateCluster")
  stop_at("waiting for instance group gpu")
  local acc = assert(dispatch.call("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 3 }, C.OPER))
  local id = acc.operation_id
  op.wait(id)
  t.eq(op.get(id).status, "running", "the record stays running")
  t.eq(sent("UpdateCluster"), n0 + 1)
  -- as a host that stopped after UpdateCluster but before recording the scale step done leaves it
  local steps = op.get(id).steps
  for i = 2, #steps do steps[i] = { name = steps[i].name, status = "pending" } end
  assert(store.op_update(id, { steps = steps, phase = "queued" }))
  t.eq(op.resume(), 1, "one operation resumed")
  local v = op.wait(id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(sent("UpdateCluster"), n0 + 1, "UpdateCluster was sent once")
  t.eq({ v.result.instance_count, v.result.current_count, v.result.kubernetes_ready, v.result.changed },
    { 3, 3, 3, true })
end)
