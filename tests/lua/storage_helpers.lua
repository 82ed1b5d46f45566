-- Helpers of the storage tests (storage_s3_test.lua, storage_fsx_test.lua,
-- storage_delete_test.lua): an ACTIVE EKS cluster in the in-process
-- sandbox, made the active one, with or without the CSI driver add-ons;
-- the storage tools called through the registry; operations followed to
-- their end. Loaded with dofile after H.sandbox_here():
--   local SH = dofile("tests/lua/storage_helpers.lua")
local t = require "hypd.tap"
local aws = require "hypd.aws"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")

local SH = {}
SH.OPTS = { region = "us-west-2" }
SH.WHO = { name = "tester", scope = "admin", front = "test" }
SH.OPERATE = { name = "operator", scope = "operate", front = "test" }
SH.ACCOUNT = "123456789012"

function SH.call(service, operation, params) return aws.call(service, operation, params or {}, SH.OPTS) end
function SH.try(service, operation, params) return aws.try(service, operation, params or {}, SH.OPTS) end

-- cluster(name, octet [, addons]) -> the DescribeCluster of a new ACTIVE EKS
-- cluster tagged hypd:cluster-tag=<name without hypd->, now the active
-- cluster, with the add-ons named in addons ACTIVE
function SH.cluster(name, octet, addons)
  local c = H.eks_cluster(SH.call, name, octet)
  local tag = name:match("^hypd%-(.+)$") or name
  SH.call("eks", "TagResource", { resourceArn = c.arn, tags = { ["hypd:cluster-tag"] = tag } })
  require("hypd.clusters").set_active { name = name, region = "us-west-2", arn = c.arn }
  for _, a in ipairs(addons or {}) do SH.addon(name, a) end
  return SH.call("eks", "DescribeCluster", { name = name }).cluster
end

-- addon(cluster, name): the EKS add-on, created and waited for until ACTIVE
function SH.addon(cluster, name)
  SH.call("eks", "CreateAddon", { clusterName = cluster, addonName = name })
  SH.until_true(function()
    return SH.call("eks", "DescribeAddon", { clusterName = cluster, addonName = name }).addon.status == "ACTIVE"
  end, 600, "add-on " .. name)
end

-- until_true(fn, limit, what): polls fn every 5 simulated seconds
function SH.until_true(fn, limit, what)
  local waited = 0
  while not fn() do
    if waited > (limit or 600) then error("still waiting for " .. tostring(what), 0) end
    task.sleep(5)
    waited = waited + 5
  end
  return waited
end

-- run(name, params [, caller]) -> view: a staged tool's operation, to its end
function SH.run(name, params, caller)
  local acc, err = dispatch.call(name, params, caller or SH.WHO)
  t.ok(acc, name .. " is accepted: " .. json.encode(err))
  if not acc then return nil, err end
  if name:find("^storage_") then t.eq(acc.status_tool, "storage_list", name .. " names its status tool") end
  return op.wait(acc.operation_id), acc
end

-- ok_run(name, params) -> result: the operation succeeded
function SH.ok_run(name, params, caller)
  local view = SH.run(name, params, caller)
  t.eq(view and view.status, "succeeded", name .. " succeeds: " .. json.encode(view and view.error))
  return view and view.result or {}, view
end

-- read(name, params) -> result (raises the tool's error)
function SH.read(name, params)
  local r, err = dispatch.call(name, params or {}, SH.WHO)
  if not r then error(err, 0) end
  return r
end

-- the sandbox's audit log (eks_helpers'): mark() -> position; mutations(mark) -> {"service Operation" = n}, total
local E = dofile("tests/lua/eks_helpers.lua")
SH.mark, SH.mutations = E.mark, E.since

-- rows(plan) -> {"action type name", ...}
function SH.rows(p)
  local out = {}
  for i, e in ipairs(p.plan) do out[i] = e.action .. " " .. e.type .. " " .. e.name end
  return out
end

-- k8s(cluster) -> a Kubernetes connection to a sandbox cluster (no tool's guardrail)
function SH.k8s(cluster)
  return require("hypd.k8s").connect { cluster = cluster, region = "us-west-2" }
end


return SH
