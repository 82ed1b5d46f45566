-- The first tools through the registry, against the in-process sandbox:
-- zones, instance types, cluster_list/switch/get_status, the operation
-- tools; validation that names each field and rule; scopes.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local srv, OPTS = H.sandbox_here()

local ADMIN = { name = "test", scope = "admin", front = "test" }
local READ = { name = "reader", scope = "read", front = "test" }
local function call(name, args, who) return dispatch.call(name, args or {}, who or ADMIN) end

t.test("every tool has a prefix, a kind, a schema, and mutating tools name their status tool", function()
  for _, def in ipairs(tool.list()) do
    local s = tool.input_schema(def)
    t.eq(s["$schema"], "https://json-schema.org/draft/2020-12/schema", def.name)
    t.eq(s.additionalProperties, false)
    if def.steps then t.ok(tool.get(def.status_tool), def.name .. " -> " .. tostring(def.status_tool)) end
    t.ok(#def.description > 40, def.name .. " describes itself for an agent")
  end
  t.ok(tool.get("cluster_list") and tool.get("aws_get_instance_types") and tool.get("operation_cancel"), "tools")
end)

t.test("aws_get_availability_zones gives names and zone IDs", function()
  local r = assert(call("aws_get_availability_zones"))
  t.eq(r.region, "us-west-2")
  t.ok(#r.zones >= 3, #r.zones .. " zones")
  t.eq(r.zones[1].name, "us-west-2a")
  t.like(r.zones[1].zone_id, "^usw2%-az%d$")
end)

t.test("aws_get_instance_types: HyperPod types with GPU count, model, memory and EFA; per zone", function()
  local r = assert(call("aws_get_instance_types", { gpu_only = true }))
  local by = {}
  for _, it in ipairs(r.instance_types) do by[it.name] = it end
  local p5 = by["ml.p5.48xlarge"]
  t.ok(p5, "ml.p5.48xlarge is offered")
  t.eq(p5.accelerator_count, 8)
  t.like(p5.accelerator, "H100")
  t.eq(p5.accelerator_memory_gib, 640)
  t.eq(p5.efa_interfaces, 32)
  t.eq(by["ml.c5.18xlarge"], nil, "gpu_only leaves CPU types out")
  local z = assert(call("aws_get_instance_types", { zone = "us-west-2a" }))
  t.ok(#z.instance_types > 0 and #z.instance_types <= #r.instance_types + 200, "some types in the zone")
  local _, err = call("aws_get_instance_types", { zone = "nowhere", gpu_only = "yes" })
  t.eq(err.code, "VALIDATION")
  t.eq(#err.fields, 2)
  t.eq({ err.fields[1].field, err.fields[1].rule }, { "gpu_only", "type" })
  t.eq({ err.fields[2].field, err.fields[2].rule }, { "zone", "pattern" })
end)

t.test("cluster_list marks the clusters hypd manages; cluster_switch and cluster_get_status", function()
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "eks.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = aws.call("iam", "CreateRole", { RoleName = "tools-eks", AssumeRolePolicyDocument = trust }, OPTS).Role.Arn
  local vpc = aws.call("ec2", "CreateVpc", { CidrBlock = "10.80.0.0/16" }, OPTS).Vpc.VpcId
  local subnets = {}
  for i, az in ipairs { "us-west-2a", "us-west-2b" } do
    subnets[i] = aws.call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.80." .. i .. ".0/24",
      AvailabilityZone = az }, OPTS).Subnet.SubnetId
  end
  for _, c in ipairs { { "hypd-demo", { ["hypd:cluster-tag"] = "demo" } }, { "other", nil } } do
    aws.call("eks", "CreateCluster", { name = c[1], roleArn = role, resourcesVpcConfig = { subnetIds = subnets },
      accessConfig = { authenticationMode = "API" }, tags = c[2] }, OPTS)
  end
  task.sleep(900)
  local l = assert(call("cluster_list"))
  t.eq(#l.clusters, 2)
  t.eq({ l.clusters[1].name, l.clusters[1].managed, l.clusters[1].cluster_tag }, { "hypd-demo", true, "demo" })
  t.eq({ l.clusters[2].name, l.clusters[2].managed }, { "other", false })
  t.eq(l.active, nil)
  local _, none = call("cluster_get_status")
  t.eq(none.code, "NOT_FOUND")
  t.like(none.message, "cluster_switch")
  local _, forbidden = call("cluster_switch", { cluster = "hypd-demo" }, READ)
  t.eq(forbidden.code, "FORBIDDEN")
  local seen
  local changes = {}
  local unsub = op.subscribe(function(ev)
    if ev.kind == "resource.changed" then changes[#changes + 1] = ev end
    if ev.kind == "resource.changed" and ev.resource == "active_cluster" then seen = ev end
  end)
  local sw = assert(call("cluster_switch", { cluster = "hypd-demo" }))
  unsub()
  t.eq(changes[#changes] and { changes[#changes].resource, changes[#changes].tool, changes[#changes].cluster },
    { "tool", "cluster_switch", "hypd-demo" }, "a quick mutation that succeeds is a resource.changed event naming it")
  t.eq(sw.active.name, "hypd-demo")
  t.eq({ seen.resource, seen.name, seen.region }, { "active_cluster", "hypd-demo", "us-west-2" },
    "a resource.changed event")
  changes = {}
  unsub = op.subscribe(function(ev) if ev.kind == "resource.changed" then changes[#changes + 1] = ev end end)
  local _, missing = call("cluster_switch", { cluster = "nope" })
  assert(call("cluster_get_status", {}, READ))
  unsub()
  t.eq(#changes, 0, "neither a refused mutation nor a read is a change")
  t.eq(missing.code, "NOT_FOUND", "named for a person, with the clusters there are")
  t.like(missing.message, "the clusters there are: [^;]*hypd%-demo")
  local st = assert(call("cluster_get_status", {}, READ))
  t.eq(st.eks.name, "hypd-demo")
  t.eq(st.eks.status, "ACTIVE")
  t.eq(st.eks.authentication_mode, "API")
  t.like(st.eks.endpoint, "^https://")
  t.eq(st.active, true)
  t.eq(st.hyperpod, nil)
  t.eq(assert(call("cluster_list")).active, "hypd-demo")
end)

t.test("operation tools: unknown ids are NOT_FOUND, bad ids fail validation, cancel needs operate", function()
  local _, nf = call("operation_get", { operation_id = "op-0123456789abcdef" })
  t.eq(nf.code, "NOT_FOUND")
  local _, bad = call("operation_get", { operation_id = "42" })
  t.eq(bad.code, "VALIDATION")
  t.eq(bad.fields[1].rule, "pattern")
  local _, req = call("operation_get", {})
  t.eq({ req.fields[1].field, req.fields[1].rule }, { "operation_id", "required" })
  local _, scope = call("operation_cancel", { operation_id = "op-0123456789abcdef" }, READ)
  t.eq(scope.code, "FORBIDDEN")
  local l = assert(call("operation_list", { limit = 5 }, READ))
  t.eq(type(l.operations), "table")
  local _, unknown = call("no_such_tool")
  t.eq(unknown.code, "NOT_FOUND")
end)

t.cleanup(function()
  require("sandbox.k8s").stop_all()
  srv:stop()
end)
