-- Cancelling an operation cancels its running children, and what was
-- cancelled shows: cluster_create cancelled while its child hyperpod_create
-- waits for the HyperPod cluster ends with that child cancelled too (it
-- makes no further AWS mutation), operation_get and cluster_get_creation_status
-- show both cancelled, and the next cluster_create does the HyperPod stage
-- again in a new child operation (not the old one found done).
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

H.sandbox_here() -- it keeps its server for the life of the process
local E = dofile("tests/lua/eks_helpers.lua")

local PARAMS = { cluster_tag = "cxl", instance_type = "ml.g5.12xlarge", instance_count = 1,
  availability_zone = "us-west-2a" }

-- running_child(parent, name) -> the view of parent's running child of tool name, or nil
local function running_child(parent, name)
  for _, c in ipairs(op.view(op.get(parent)).children or {}) do
    if c.tool == name and c.status == "running" then return op.view(op.get(c.operation_id)) end
  end
end

local first, child
t.test("cancelling cluster_create while hyperpod_create runs cancels that child too; it mutates nothing more",
  function()
    local acc = assert(dispatch.call("cluster_create", PARAMS, E.WHO))
    first = acc.operation_id
    -- until the child waits for the HyperPod cluster (it exists, Creating)
    for _ = 1, 2000 do
      child = running_child(first, "hyperpod_create")
      local c = child and E.call("sagemaker", "ListClusters", {})
      local creating = false
      for _, s in ipairs(c and c.ClusterSummaries or {}) do
        creating = creating or (s.ClusterName == "hypd-cxl-hp" and s.ClusterStatus == "Creating")
      end
      if creating then break end
      if op.get(first).status ~= "running" then break end
      task.sleep(5)
    end
    t.ok(child, "hyperpod_create runs as a child: " .. json.encode(op.view(op.get(first))))
    if not child then return end
    local v = assert(dispatch.call("operation_cancel", { operation_id = first }, E.WHO))
    t.eq(v.status, "cancelled", "the parent is cancelled")
    local c = op.view(op.get(child.operation_id))
    t.eq(c.status, "cancelled", "the child hyperpod_create is cancelled: " .. json.encode(c.phase))
    t.like(c.phase or "", "^cancelled during ", "its phase says where it stopped")
    t.eq((c.cancelled_by or {}).with, first, "the child's record says it was cancelled with its parent")
    local names = {}
    for _, x in ipairs(v.cancelled or {}) do names[#names + 1] = x.tool .. ":" .. tostring(x.status) end
    t.ok(#names >= 2, "the answer lists what was cancelled: " .. json.encode(names))
    local listed = false
    for _, n in ipairs(names) do listed = listed or n == "hyperpod_create:cancelled" end
    t.ok(listed, "hyperpod_create among the cancelled: " .. json.encode(names))
    for _, x in ipairs(op.list { status = "running" }) do
      t.ok(false, "nothing is left running: " .. x.tool .. " " .. x.id)
    end
    -- an hour of simulated time later, no AWS mutation came from either
    local m = E.mark()
    task.sleep(3600)
    local counts, n = E.since(m)
    local mutations = {}
    for k, x in pairs(counts) do
      local svc, o = k:match("^(%S+) (%S+)$")
      if E.is_mutation(svc, o) then mutations[#mutations + 1] = k .. " x" .. x end
    end
    t.eq(mutations, {}, "no mutation after the cancel (" .. n .. " requests)")
  end)

t.test("operation_get and cluster_get_creation_status show what was cancelled", function()
  if not child then return t.skip("no child was cancelled") end
  local g = assert(dispatch.call("operation_get", { operation_id = first }, E.READ))
  local seen
  for _, c in ipairs(g.children or {}) do
    if c.operation_id == child.operation_id then seen = c.status end
  end
  t.eq({ g.status, seen }, { "cancelled", "cancelled" }, "operation_get: the parent and its child")
  local s = assert(dispatch.call("cluster_get_creation_status", { cluster_tag = "cxl" }, E.READ))
  t.eq({ s.operation_id, s.status }, { first, "cancelled" }, "the status tool reports the cancelled cluster_create")
end)

t.test("the next cluster_create does the HyperPod stage again in a new child operation", function()
  if not child then return t.skip("no child was cancelled") end
  local acc = assert(dispatch.call("cluster_create", PARAMS, E.WHO))
  t.ok(acc.operation_id ~= first, "a new operation")
  local v = op.wait(acc.operation_id, 4 * 3600) -- simulated time: far more than a create takes
  t.eq(v.status, "succeeded", json.encode(v.error))
  local hp
  for _, c in ipairs(v.children or {}) do if c.tool == "hyperpod_create" then hp = c end end
  t.ok(hp and hp.operation_id ~= child.operation_id, "a new hyperpod_create child, not the cancelled one")
  t.eq(hp and hp.status, "succeeded", "it ran to its end")
  local d = E.call("sagemaker", "DescribeCluster", { ClusterName = "hypd-cxl-hp" })
  t.eq(d.ClusterStatus, "InService", "the HyperPod cluster is there")
  t.ok((((v.result or {}).stages or {}).hyperpod_create or {}).hyperpod_cluster ~= nil or
    (v.result or {}).hyperpod_cluster ~= nil, "the result names the HyperPod cluster: " .. json.encode(v.result))
end)

t.test("cancelled in its first stage, cluster_create stops cluster_create_eks and the work beside it", function()
  local acc = assert(dispatch.call("cluster_create", { cluster_tag = "cxe", instance_type = "ml.g5.12xlarge",
    instance_count = 1, availability_zone = "us-west-2a" }, E.WHO))
  local eks
  for _ = 1, 2000 do
    eks = running_child(acc.operation_id, "cluster_create_eks")
    if eks or op.get(acc.operation_id).status ~= "running" then break end
    task.sleep(0.5)
  end
  t.ok(eks, "cluster_create_eks runs as a child")
  if not eks then return end
  local v = assert(dispatch.call("operation_cancel", { operation_id = acc.operation_id }, E.WHO))
  t.eq({ v.status, op.get(eks.operation_id).status }, { "cancelled", "cancelled" }, "both are cancelled")
  local m = E.mark()
  task.sleep(3600)
  local counts = E.since(m)
  local mutations = {}
  for k, x in pairs(counts) do
    local svc, o = k:match("^(%S+) (%S+)$")
    if E.is_mutation(svc, o) then mutations[#mutations + 1] = k .. " x" .. x end
  end
  t.eq(mutations, {}, "no mutation after the cancel, from the stage or from the work beside it")
end)
