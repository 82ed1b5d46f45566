-- Cost in the reads and teardowns of a running cluster, against the
-- sandbox: cluster_get_status answers what the cluster runs costs (its EKS
-- control plane, the NAT gateway and FSx file system hypd made, the HyperPod
-- groups by their current count), cluster_list_instance_groups each HyperPod
-- group's running cost and the total, hyperpod_delete what it kept costs
-- (zero when it kept nothing), and cluster_delete's declaration lets it
-- price a kept HyperPod cluster by its groups. The rates are read from the sandbox's price table
-- (lua/sandbox/data/prices.lua), never written here. Without
-- pricing:GetProducts the reads answer whole, with cost_error.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
H.sandbox_here()
require("hypd.tool.loader").load()
local json = require "hypd.json"
local cost = require "hypd.cost"
local dispatch = require "hypd.tool.dispatch"
local op = require "hypd.tool.operations"
local PRICES = require "sandbox.data.prices"
local Hp = dofile("tests/lua/hyperpod_helpers.lua")
local WHO = { name = "tester", scope = "admin", front = "test" }
local ITYPE, COUNT = "ml.g5.12xlarge", 2

-- rate(service, family [, attrs]) -> the USD per unit the sandbox's price table lists
local function rate(service, family, attrs)
  for _, p in ipairs(PRICES.PRODUCTS) do
    local match = p[1] == service and p[2] == family
    for k, v in pairs(attrs or {}) do match = match and p[5][k] == v end
    if match then return tonumber(p[4]) end
  end
end
local INST = rate("AmazonSageMaker", "ML Instance", { instanceName = ITYPE })
local EKS = rate("AmazonEKS", "Compute")
local NAT = rate("AmazonEC2", "NAT Gateway")
local FSX = rate("AmazonFSx", "Storage", { deploymentOption = "Persistent_2", throughputCapacity = "125" })

local function near(a, b, msg, tol) t.ok(type(a) == "number" and math.abs(a - b) < (tol or 1e-6), (msg or "") .. ": " ..
  tostring(a) .. " vs " .. tostring(b)) end
local function month(h) return math.floor(h * 730 * 100 + 0.5) / 100 end
local function run(name, params) return op.wait(assert(dispatch.call(name, params, WHO)).operation_id) end

-- without_pricing(fn): fn runs while the caller's policy allows all but
-- pricing:GetProducts (with no price cached); the policy is lifted after it
local function without_pricing(fn)
  local policy = require "sandbox.policy"
  cost.forget()
  assert(policy.set { Version = "2012-10-17", Statement = {
    { Effect = "Allow", Action = "*", Resource = "*" },
    { Effect = "Deny", Action = "pricing:GetProducts", Resource = "*" } } })
  local ok, err = pcall(fn)
  policy.set(nil)
  cost.forget()
  if not ok then error(err, 0) end
end

require("hypd.core").virtual(true)
t.cleanup(function() require("hypd.core").virtual(false) end)

t.test("the sandbox's price table has the rates these tests price against", function()
  t.ok(INST and EKS and NAT and FSX, json.encode { INST, EKS, NAT, FSX })
  near(EKS, 0.10, "the EKS control plane")
end)

local fsx_gb -- the capacity of the file system storage_create_fsx made

t.test("cluster_get_status costs what the cluster runs: EKS, the NAT gateway, the groups by count, the FSx " ..
  "file system; the total is their sum and a month is 730 hours", function()
  cost.forget()
  t.eq(op.wait(Hp.E.start { cluster_tag = "crd" }).status, "succeeded")
  local v = Hp.run("hyperpod_create", { instance_type = ITYPE, instance_count = COUNT,
    availability_zone = "us-west-2a" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(run("cluster_configure_dependencies", {}).status, "succeeded")
  local s = run("storage_create_fsx", {})
  t.eq(s.status, "succeeded", json.encode(s.error))
  local r, err = dispatch.call("cluster_get_status", {}, WHO)
  t.ok(r, json.encode(err))
  local c = r and r.cost
  t.ok(c, "a cost: " .. json.encode(r and r.cost_error))
  if not c then return end
  local by, n = {}, {}
  for _, i in ipairs(c.items) do by[i.type] = i; n[i.type] = (n[i.type] or 0) + 1 end
  t.eq(n, { eks = 1, nat = 1, instance = 1, fsx = 1 }, json.encode(c.items))
  near(by.eks and by.eks.hourly, 0.10, "the EKS control plane")
  near(by.nat and by.nat.hourly, NAT, "the NAT gateway hypd made")
  t.eq(by.instance and by.instance.quantity, COUNT, "the group's current count")
  near(by.instance and by.instance.hourly, COUNT * INST, "the group: count x rate")
  fsx_gb = by.fsx and by.fsx.quantity
  t.ok((fsx_gb or 0) > 0, "the file system's capacity")
  near(by.fsx and by.fsx.hourly, (fsx_gb or 0) * FSX / 730, "capacity x price per GB-month / 730", 5e-5)
  local sum = 0
  for _, i in ipairs(c.items) do sum = sum + i.hourly end
  near(c.hourly, sum, "the total is the sum", 1e-3)
  near(c.hourly, 0.10 + NAT + COUNT * INST + (fsx_gb or 0) * FSX / 730, "the total from the rates", 1e-3)
  near(c.monthly, month(0.10 + NAT + COUNT * INST + (fsx_gb or 0) * FSX / 730), "a month is 730 hours", 0.011)
  t.eq(#c.unpriced, 0, json.encode(c.unpriced))
  t.eq(r.eks.name, "hypd-crd", "the rest of the answer")
end)

t.test("cluster_list_instance_groups gives the HyperPod group its running cost (count x rate) and the total",
  function()
  cost.forget()
  local r, err = dispatch.call("cluster_list_instance_groups", {}, WHO)
  t.ok(r, json.encode(err))
  local g
  for _, e in ipairs(r and r.instance_groups or {}) do if e.kind == "hyperpod" then g = e end end
  t.ok(g, "a HyperPod group: " .. json.encode(r and r.instance_groups))
  g = g or {}
  t.eq(g.current, COUNT)
  near(g.cost and g.cost.hourly, COUNT * INST, "the group's running cost: " .. json.encode(g.cost or g.cost_unknown))
  near(g.cost and g.cost.monthly, month(COUNT * INST), "its month")
  near(g.cost and g.cost.unit_price, INST, "its rate")
  near(r and r.cost and r.cost.hourly, COUNT * INST, "the total")
  near(r and r.cost and r.cost.monthly, month(COUNT * INST), "the total's month")
end)

t.test("without pricing:GetProducts cluster_get_status and cluster_list_instance_groups answer whole, with a " ..
  "one-line cost_error", function() without_pricing(function()
  local r, err = dispatch.call("cluster_get_status", {}, WHO)
  t.ok(r, json.encode(err))
  t.eq(r and r.cost, nil)
  t.like(r and r.cost_error or "", "pricing:GetProducts")
  t.ok(not (r and r.cost_error or "\n"):find("\n"), "one line")
  t.eq(r and r.eks and r.eks.name, "hypd-crd", "the EKS cluster is there")
  t.eq(r and r.hyperpod and #r.hyperpod.instance_groups, 1, "the HyperPod groups are there")
  local l, lerr = dispatch.call("cluster_list_instance_groups", {}, WHO)
  t.ok(l, json.encode(lerr))
  t.eq(l and l.cost, nil)
  t.like(l and l.cost_error or "", "pricing:GetProducts")
  local g
  for _, e in ipairs(l and l.instance_groups or {}) do if e.kind == "hyperpod" then g = e end end
  t.eq(g and g.current, COUNT, "the groups are there")
  t.eq(g and g.cost, nil)
end) end)

-- untag(name): the HyperPod cluster no longer carries hypd's tag (made by someone else, as far as hypd can tell)
local function untag(name)
  local aws = require "hypd.aws"
  local d = assert(aws.call("sagemaker", "DescribeCluster", { ClusterName = name }, { region = "us-west-2" }))
  assert(aws.call("sagemaker", "DeleteTags", { ResourceArn = d.ClusterArn, TagKeys = { "hypd:cluster-tag" } },
    { region = "us-west-2" }))
end

local K = "hypd-crk" -- the second cluster's EKS name

t.test("hyperpod_delete that keeps nothing says so: kept_cost is zero with no items", function()
  cost.forget()
  t.eq(op.wait(Hp.E.start { cluster_tag = "crk" }).status, "succeeded")
  local v = Hp.run("hyperpod_create", { cluster = K, instance_type = ITYPE, instance_count = 1,
    availability_zone = "us-west-2b" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  local d = run("hyperpod_delete", { cluster = K })
  t.eq(d.status, "succeeded", json.encode(d.error))
  local r = d.result or {}
  t.eq(#(r.kept or {}), 0, json.encode(r.kept))
  t.ok(#(r.deleted or {}) > 0, "it deleted what hypd made")
  local c = r.kept_cost
  t.ok(c, "a kept cost: " .. json.encode(r.kept_cost_error))
  t.eq(c and c.hourly, 0)
  t.eq(c and c.monthly, 0)
  t.eq(c and #c.items, 0)
  t.eq(c and c.currency, "USD")
end)

t.test("a HyperPod cluster hyperpod_delete keeps (not hypd's) is priced by its groups in kept_cost", function()
  cost.forget()
  local v = Hp.run("hyperpod_create", { cluster = K, instance_type = ITYPE, instance_count = 1,
    availability_zone = "us-west-2b" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  untag(v.result and v.result.hyperpod_cluster or "hypd-crk-hp")
  local d = run("hyperpod_delete", { cluster = K })
  t.eq(d.status, "succeeded", json.encode(d.error))
  local kept
  for _, k in ipairs(d.result and d.result.kept or {}) do if k.type == "sagemaker:cluster" then kept = k end end
  t.ok(kept, "the cluster is kept: " .. json.encode(d.result and d.result.kept))
  local c = d.result and d.result.kept_cost
  t.ok(c, "a kept cost: " .. json.encode(d.result and d.result.kept_cost_error))
  near(c and c.hourly, INST, "hyperpod_delete: the kept group, 1 x rate: " .. json.encode(c))
  near(c and c.monthly, month(INST), "its month")
end)

t.test("cluster_delete declares what pricing a kept HyperPod cluster reads: under its guardrail the kept " ..
  "cluster's groups are priced", function()
  cost.forget()
  -- cluster_delete's result prices its kept list with _kept_cost under its own declaration (a run of it
  -- here stops at the network, which the kept HyperPod cluster holds, before its result is written)
  local kept = { { type = "sagemaker:cluster", name = "hypd-crk-hp" } }
  local guard = require "hypd.tool.guard"
  local g = guard.new { tool = require("hypd.tool.registry").get("cluster_delete"), op_id = "op-cost-reads" }
  local kc, why = guard.with(g, require("hypd.playbook").load("_kept_cost").of, kept, "us-west-2")
  t.ok(kc, "cluster_delete's kept cost: " .. json.encode(why))
  kc = kc or {}
  local inst
  for _, i in ipairs(kc.items or {}) do if i.type == "instance" then inst = i end end
  t.ok(inst, "cluster_delete may read the kept HyperPod cluster's groups: " .. json.encode(kc))
  near(inst and inst.hourly, INST, "1 x rate")
  t.eq(#(kc.unpriced or {}), 0, json.encode(kc.unpriced))
end)
