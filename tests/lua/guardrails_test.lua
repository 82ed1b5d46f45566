-- Guardrails live in the bindings: a read playbook that calls ec2:CreateVpc,
-- a mutating one that calls ec2:DeleteVpc, and one that calls an action it
-- does not declare each fail before any request reaches AWS (the sandbox's
-- audit log is unchanged), naming the tool, the action and the rule; the
-- same for Kubernetes verbs. Every mutating call a tool makes is in hypd's
-- audit log. The policy `hypd iam-policy --tools cluster_create_eks` prints
-- is enough for the EKS stage under the sandbox's IAM evaluation, and one
-- action less fails with AccessDenied naming it. A playbook directory other
-- users can write is refused.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local config = require "hypd.config"
local http = require "hypd.http"
local iam_policy = require "hypd.iam_policy"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local store = require "hypd.store"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local tools = require "hypd.tool.loader"

local srv = H.sandbox_here()
local BASE = "http://127.0.0.1:" .. srv.port
local dir = H.tmpdir()
t.cleanup(function() srv:stop(); os.execute("rm -rf " .. H.quote(dir)) end)

local WHO = { name = "guard-test", scope = "admin", front = "test" }

local function playbook(name, text) H.write(dir .. "/" .. name .. ".lua", text) end

playbook("peek", [[
return tool {
  name = "diagnose_peek", summary = "A read tool that tries a create", kind = "read",
  description = "Lists VPCs, then tries to create one.",
  aws = { "ec2:DescribeVpcs", "ec2:CreateVpc" },
  params = {},
  run = function(ctx) ctx:call("ec2", "DescribeVpcs", {}); return ctx:call("ec2", "CreateVpc", { CidrBlock = "10.9.0.0/16" }) end,
}]])
playbook("tidy", [[
return tool {
  name = "cluster_tidy", summary = "A mutating tool that tries a delete", kind = "mutating",
  status_tool = "cluster_list", description = "Tries to delete a VPC.",
  aws = { "ec2:DeleteVpc" },
  params = {},
  run = function(ctx) return ctx:call("ec2", "DeleteVpc", { VpcId = "vpc-0123456789abcdef0" }) end,
}]])
playbook("sneak", [[
return tool {
  name = "diagnose_sneak", summary = "Calls what it does not declare", kind = "read",
  description = "Declares DescribeVpcs, calls DescribeSubnets through hypd.aws directly.",
  aws = { "ec2:DescribeVpcs" },
  params = {},
  run = function() return hypd.aws.call("ec2", "DescribeSubnets", {}) end,
}]])
playbook("maker", [[
return tool {
  name = "cluster_make_vpc", summary = "Makes a VPC", kind = "mutating",
  status_tool = "cluster_list", description = "Creates one VPC (audited).",
  aws = { "ec2:CreateVpc" },
  params = {},
  run = function(ctx) return { vpc = ctx:call("ec2", "CreateVpc", { CidrBlock = "10.8.0.0/16" }).Vpc.VpcId } end,
}]])
playbook("kube", [[
return tool {
  name = "diagnose_kube", summary = "A read tool that tries a Kubernetes delete", kind = "read",
  description = "Lists namespaces with a declared verb, then deletes one.",
  aws = { "eks:DescribeCluster" }, k8s = { "list" },
  params = { cluster = { type = "string", required = true } },
  run = function(ctx, p)
    local c = ctx:k8s(p.cluster)
    local ok = c:list("v1", "Namespace")
    local _, err = c:delete("v1", "Namespace", "default")
    if err then error(err, 0) end
    return { listed = #ok }
  end,
}]])
config.playbooks_dir = dir
tools.load()
assert(#tools.reload(WHO).errors == 0)

-- the sandbox's audit log of AWS calls, by operation
local function audit()
  local resp = assert(http.request { url = BASE .. "/_sandbox/audit" })
  local n = 0
  for _, e in ipairs(json.decode(resp.body) or {}) do
    if not e.refused then n = n + 1 end
  end
  return n
end

local function refused(name, args)
  local before = audit()
  local r, err = dispatch.call(name, args or {}, WHO)
  if r and r.operation_id then
    local v = op.wait(r.operation_id)
    err = v.error
  end
  return err, audit() - before
end

t.test("a read playbook calling ec2:CreateVpc fails before any request", function()
  local err, sent = refused("diagnose_peek")
  t.eq(err and err.code, "GUARDRAIL")
  t.like(err.message, "diagnose_peek may not call ec2:CreateVpc: a read tool makes only read%-only calls")
  t.eq(sent, 0, "no mutation reached AWS (the DescribeVpcs before it did)")
end)

t.test("a mutating playbook calling ec2:DeleteVpc fails before any request", function()
  local err, sent = refused("cluster_tidy")
  t.eq(err and err.code, "GUARDRAIL")
  t.like(err.message, "cluster_tidy may not call ec2:DeleteVpc: a mutating tool may not delete")
  t.eq(sent, 0, "nothing reached AWS")
end)

t.test("a call the tool does not declare fails before any request, by whichever path it goes", function()
  local err, sent = refused("diagnose_sneak")
  t.eq(err and err.code, "GUARDRAIL")
  t.like(err.message, "diagnose_sneak may not call ec2:DescribeSubnets: it is not among the AWS actions the tool " ..
    "declares %(ec2:DescribeVpcs%)")
  t.eq(sent, 0, "nothing reached AWS")
end)

t.test("a read tool's Kubernetes delete is refused before it is sent; its declared list works", function()
  H.eks_cluster(function(s, o, p) return require("hypd.aws").call(s, o, p or {}) end, "guard-kube", 72)
  local _, err = dispatch.call("diagnose_kube", { cluster = "guard-kube" }, WHO)
  t.eq(err and err.code, "GUARDRAIL")
  t.like(err.message, "may not call kubernetes delete Namespace/default: a read tool makes only read%-only calls")
  local c = require("hypd.k8s").connect { cluster = "guard-kube" }
  t.ok(assert(c:get("v1", "Namespace", "default")), "the namespace is still there")
end)

t.test("every mutating AWS call a tool makes is in the audit log with the tool, caller and front end", function()
  local r = assert(dispatch.call("cluster_make_vpc", {}, WHO))
  local found
  for _, e in ipairs(store.events(0, 1000000)) do
    if e.kind == "audit" and e.data.aws == "ec2:CreateVpc" and e.data.tool == "cluster_make_vpc" then found = e.data end
  end
  t.ok(r.vpc and found, "an audit record for ec2:CreateVpc")
  t.eq({ found.caller, found.front, found.outcome }, { "guard-test", "test", "ok" })
end)

local function set_policy(doc)
  local resp = assert(http.request { method = "POST", url = BASE .. "/_sandbox/policy",
    headers = { ["content-type"] = "application/json" }, body = json.encode { policy = doc or json.null } })
  return resp.status
end

t.test("the EKS stage runs under the IAM policy hypd iam-policy prints for it", function()
  local doc = assert(iam_policy.document { tools = { "cluster_create_eks" } })
  t.eq(set_policy(doc), 200)
  local acc = assert(dispatch.call("cluster_create_eks", { cluster_tag = "policed" }, WHO))
  local v = op.wait(acc.operation_id)
  set_policy(nil)
  t.eq(v.status, "succeeded", json.encode(v.error or json.null))
end)

t.test("with one action less in that policy the stage fails with AccessDenied naming the action", function()
  local doc = assert(iam_policy.document { tools = { "cluster_create_eks" } })
  doc = H.policy_without(doc, "eks:CreateCluster")
  t.eq(set_policy(doc), 200)
  local acc = assert(dispatch.call("cluster_create_eks", { cluster_tag = "denied" }, WHO))
  local v = op.wait(acc.operation_id)
  set_policy(nil)
  t.eq(v.status, "failed")
  t.eq(v.error.code, "AccessDeniedException")
  t.like(v.error.message, "not authorized to perform: eks:CreateCluster")
end)

t.test("the generated policy names every declared action once, wildcards covering what they cover", function()
  local doc = assert(iam_policy.document { tools = { "cluster_create_eks", "aws_get_availability_zones" } })
  local actions = {}
  for _, a in ipairs(H.policy_actions(doc)) do actions[a] = (actions[a] or 0) + 1 end
  t.eq(actions["ec2:Describe*"], 1)
  t.eq(actions["ec2:DescribeAvailabilityZones"], nil, "covered by ec2:Describe*")
  t.eq(actions["iam:PassRole"], 1, "the permission CreateCluster needs")
  local read = assert(iam_policy.document { kind = "read" })
  for _, a in ipairs(H.policy_actions(read)) do
    t.ok(not a:find("Create", 1, true), "a read host's policy creates nothing: " .. a)
  end
end)

t.test("a playbook directory other users can write is refused, with the chmod that fixes it", function()
  local loose = H.tmpdir()
  H.write(loose .. "/x.lua", "return tool { name = 'diagnose_x', summary = 's', description = 'd', kind = 'read', " ..
    "params = {}, run = function() return {} end }")
  os.execute("chmod 0777 " .. H.quote(loose))
  config.playbooks_dir = loose
  local r = tools.reload(WHO)
  config.playbooks_dir = dir
  os.execute("rm -rf " .. H.quote(loose))
  t.eq(tool.get("diagnose_x"), nil, "nothing loaded from it")
  t.eq(#r.errors, 1)
  t.like(r.errors[1].message, "is writable by other users %(mode 0777%)")
  t.like(r.errors[1].message, "chmod go%-w ")
end)
