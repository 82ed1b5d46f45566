-- Operations in-process, on cluster_create_eks against the sandbox: two
-- concurrent calls run one operation; cancel stops it with a clear record;
-- calling again afterwards reuses what exists and completes; events reach
-- subscribers.
local t = require "hypd.tap"
local op = require "hypd.tool.operations"
local store = require "hypd.store"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local srv = H.sandbox_here()
local WHO = { name = "alice", scope = "operate", front = "test" }

local function count(operation)
  local n = 0
  for _, e in ipairs(store.events(0, 100000) or {}) do
    if e.kind == "sandbox.audit" and e.data.operation == operation then n = n + 1 end
  end
  return n
end

local events = {}
op.subscribe(function(ev) events[#events + 1] = ev end)

t.test("two concurrent calls for the same tag run one operation", function()
  local a, b
  local ta = task.spawn(function() a = assert(dispatch.call("cluster_create_eks", { cluster_tag = "twin" }, WHO)) end)
  local tb = task.spawn(function() b = assert(dispatch.call("cluster_create_eks", { cluster_tag = "twin" }, WHO)) end)
  ta:wait(); tb:wait()
  t.eq(a.operation_id, b.operation_id)
  t.eq(a.status_tool, "cluster_get_creation_status")
  t.eq((a.existing and 1 or 0) + (b.existing and 1 or 0), 1, "one call made it, the other joined it")
  t.eq(#op.list { tool = "cluster_create_eks", status = "running" }, 1)
  local v = op.wait(a.operation_id)
  t.eq(v.status, "succeeded")
  t.eq(v.result.cluster_name, "hypd-twin")
  for _, s in ipairs(v.steps) do t.ok(s.status == "done" and s.seconds ~= nil, s.name .. " done with timings") end
  local st = assert(dispatch.call("cluster_get_creation_status", { cluster_tag = "twin" }, { scope = "read" }))
  t.eq(st.aws.eks_status, "ACTIVE")
end)

t.test("cancel stops at the next wait and leaves a clear record; a new call reuses what exists", function()
  local acc = assert(dispatch.call("cluster_create_eks", { cluster_tag = "halt" }, WHO))
  while (op.get(acc.operation_id).phase or ""):find("waiting", 1, true) == nil do task.sleep(1) end
  local v = assert(dispatch.call("operation_cancel", { operation_id = acc.operation_id }, WHO))
  t.eq(v.status, "cancelled")
  t.like(v.phase, "^cancelled during ")
  t.eq(v.error.code, "CANCELLED")
  t.like(v.error.message, "cancelled by alice")
  local _, again = dispatch.call("operation_cancel", { operation_id = acc.operation_id }, WHO)
  t.eq(again.code, "CONFLICT")
  local acc2 = assert(dispatch.call("cluster_create_eks", { cluster_tag = "halt" }, WHO))
  t.ok(acc2.operation_id ~= acc.operation_id, "a new operation")
  t.eq(op.wait(acc2.operation_id).status, "succeeded")
  -- two tags, each made once: the second call reused what the cancelled one made
  for _, k in ipairs { "CreateVpc", "CreateInternetGateway", "CreateNatGateway", "AllocateAddress",
                       "CreateSecurityGroup", "CreateRole", "CreateCluster" } do
    t.eq(count(k), 2, k)
  end
  t.eq(count("CreateSubnet"), 8)
end)

t.test("subscribers saw started, phase and finished events; the audit log names the caller and front end", function()
  local kinds = {}
  for _, e in ipairs(events) do kinds[e.kind] = (kinds[e.kind] or 0) + 1 end
  t.ok(kinds["operation.started"] >= 3 and kinds["operation.phase"] > 10 and kinds["operation.finished"] >= 2 and
    kinds["operation.cancelled"] == 1, "event kinds")
  local audited = 0
  for _, e in ipairs(store.events(0, 100000) or {}) do
    if e.kind == "audit" and e.data.caller == "alice" and e.data.front == "test" then audited = audited + 1 end
  end
  t.ok(audited >= 3, audited .. " audit events")
end)

t.cleanup(function()
  require("sandbox.k8s").stop_all()
  srv:stop()
end)
