-- Helpers of the stage 4 tests (hyperpod_create_test.lua,
-- hyperpod_instance_group_test.lua): tools called through the registry as
-- the tester, their operations awaited through hypd.tool.operations, the Kubernetes
-- nodes of an instance group. Loaded with dofile after H.sandbox_here():
--   local Hp = dofile("tests/lua/hyperpod_helpers.lua")
local t = require "hypd.tap"
local json = require "hypd.json"
local k8s = require "hypd.k8s"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"

local E = dofile("tests/lua/eks_helpers.lua")
local Hp = { E = E }

-- stage1(tag [, params]) -> the EKS cluster's name, made by cluster_create_eks
function Hp.stage1(tag, params)
  local p = { cluster_tag = tag }
  for k, v in pairs(params or {}) do p[k] = v end
  local v = op.wait(E.start(p))
  t.eq(v.status, "succeeded", "cluster_create_eks " .. tag .. ": " .. json.encode(v.error))
  return "hypd-" .. tag
end

-- run(name, params) -> the finished operation's view of a staged tool's call
function Hp.run(name, params)
  local acc, err = dispatch.call(name, params, E.WHO)
  t.ok(acc, name .. " answers: " .. json.encode(err))
  t.eq(acc.status_tool, "hyperpod_get_creation_status")
  return op.wait(acc.operation_id)
end

-- plan(name, params) -> what the tool answers with plan = true
function Hp.plan(name, params)
  local p = { plan = true }
  for k, v in pairs(params) do p[k] = v end
  local out, err = dispatch.call(name, p, E.WHO)
  t.ok(out, "the plan answers: " .. json.encode(err))
  return out
end

-- nodes_of(eks, hyperpod, group) -> the group's Node objects
function Hp.nodes_of(eks, hyperpod, group)
  local c = k8s.connect { cluster = eks, region = "us-west-2" }
  return assert(c:list("v1", "Node", { labels = { ["sagemaker.amazonaws.com/cluster-name"] = hyperpod,
    ["sagemaker.amazonaws.com/instance-group-name"] = group } }))
end

function Hp.ready(node)
  for _, c in ipairs(node.status.conditions or {}) do
    if c.type == "Ready" then return c.status == "True" end
  end
  return false
end

-- refused(name, params, field, rule [, pattern [, code]]) -> the error:
-- the call itself answers VALIDATION (or code) naming the field and the
-- rule, no operation is recorded, and nothing reaches the sandbox's audit
-- log (the check step runs on the call: hypd.tool.operations)
function Hp.refused(name, params, field, rule, pattern, code)
  local m = E.mark()
  local before = #op.list {}
  local acc, err = dispatch.call(name, params, E.WHO)
  t.eq(acc, nil, field .. " " .. rule .. ": refused on the call, no operation: " .. json.encode(acc))
  err = err or {}
  t.eq(err.code, code or "VALIDATION", json.encode(err))
  t.eq(err.fields and err.fields[1] and { err.fields[1].field, err.fields[1].rule }, { field, rule })
  if pattern then t.like(err.message, pattern) end
  t.eq(#op.list {}, before, "no operation recorded")
  local counts, total = E.since(m)
  t.eq(total, 0, "no mutation: " .. json.encode(counts))
  return err
end

return Hp
