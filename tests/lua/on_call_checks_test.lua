-- What the parameters and a few reads decide is refused on the call, over
-- REST as a client sees it: the answer is HTTP 4xx with the error (code,
-- field, rule), no operation id, and no operation is recorded (hypd.tool.operations runs
-- a staged tool's on_call check before the record). Each condition the
-- issue names: a fixed-at-create value that differs from the group's, a
-- missing operator (training and inference), elastic training on spot
-- capacity and with managed tiered checkpointing, and an instance type
-- outside SageMaker's ClusterInstanceType list, the last for every staged
-- tool that takes a HyperPod group's instance_type.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local http = require "hypd.http"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"

local TH = dofile("tests/lua/training_helpers.lua")
local call = TH.start()
local FH = TH.FH
local obj = TH.obj

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local BASE = "http://127.0.0.1:" .. srv.port
local ADMIN = auth.create { name = "checker", scope = "admin" }
local EKS, HP = "oncall-a", "oncall-a-hp"
local conn

local function rest(name, args)
  assert(srv.port, "the server runs") -- held here: a server nobody holds is collected and stops
  local r = assert(http.request { method = "POST", url = BASE .. "/api/v1/tools/" .. name, timeout = 600,
    headers = { authorization = "Bearer " .. ADMIN, ["content-type"] = "application/json" },
    body = json.encode(args) })
  return r.status, json.decode(r.body ~= "" and r.body or "null")
end

-- refused(name, args, code, field, rule [, pattern]): the call answers
-- 4xx with the error, no operation id, no operation recorded, no write
local function refused(name, args, code, field, rule, pattern)
  local before = #op.list { limit = 100000 }
  local m = FH.mark()
  local status, body = rest(name, args)
  local e = type(body) == "table" and body.error or {}
  t.ok(status >= 400 and status < 500, name .. " " .. rule .. ": HTTP 4xx, got " .. status .. " " .. json.encode(body))
  t.eq(type(body) == "table" and body.operation_id, nil, name .. " " .. rule .. ": no operation id")
  t.eq(e.code, code, name .. " " .. rule .. ": " .. json.encode(e))
  local f = e.fields and e.fields[1] or {}
  t.eq({ f.field, f.rule }, { field, rule }, name .. ": the field and the rule")
  if pattern then t.like(tostring(e.message), pattern) end
  t.eq(#op.list { limit = 100000 }, before, name .. " " .. rule .. ": no operation recorded")
  local _, total = FH.since(m)
  t.eq(total, 0, name .. " " .. rule .. ": no AWS mutation")
  t.eq(#FH.k8s_writes(m), 0, name .. " " .. rule .. ": no Kubernetes write")
  return e
end

local function job(extra)
  local a = obj { job_name = "oc", instance_type = "ml.g5.12xlarge", script = "scripts/train.py", replicas = 1 }
  for k, v in pairs(extra or {}) do a[k] = v end
  return { recipe = "pytorch-torchrun", params = a, cluster = EKS }
end

t.test("a cluster: an on-demand group gpu (ml.g5.12xlarge) and a spot group cheap (ml.g5.24xlarge), no operator",
  function()
    conn = TH.cluster(call, EKS, HP, 93, {
      { InstanceGroupName = "gpu", InstanceType = "ml.g5.12xlarge", InstanceCount = 1 },
      { InstanceGroupName = "cheap", InstanceType = "ml.g5.24xlarge", InstanceCount = 1,
        CapacityRequirements = { Spot = json.object() } } })
    t.ok(conn, "a Kubernetes connection")
  end)

t.test("a missing operator is refused on the call: training_submit, inference_deploy_managed", function()
  refused("training_submit", job(), "CONFLICT", "recipe", "operator", "hyperpod_update_advanced_features " ..
    "training_operator=true cluster=" .. EKS:gsub("%-", "%%-"))
  refused("inference_deploy_managed", { cluster = EKS, name = "oc-managed", model_source = "s3", s3_bucket = "models",
    image = "vllm/vllm-openai:v0.6.3", instance_type = "ml.g5.12xlarge", gpus = 1 }, "CONFLICT", "cluster",
    "operator", "inference_operator=true cluster=" .. EKS:gsub("%-", "%%-"))
end)

t.test("over MCP the same refusal is a tool error with no operation id, and no operation is recorded", function()
  local mcp = require "hypd.api.mcp"
  local s = mcp.session { caller = { name = "checker", scope = "admin", front = "mcp" } }
  local before = #op.list { limit = 100000 }
  local r = mcp.handle(s, { jsonrpc = "2.0", id = 1, method = "tools/call",
    params = { name = "training_submit", arguments = job() } })
  local res = r and r.result or {}
  t.eq(res.isError, true, "a tool error: " .. json.encode(r))
  local text = json.encode(res)
  t.like(text, "hyperpod_update_advanced_features training_operator=true")
  t.ok(not text:find("op%-%x%x%x%x"), "no operation id")
  t.eq(#op.list { limit = 100000 }, before, "no operation recorded")
end)

t.test("elastic training on spot capacity and with managed tiered checkpointing is refused on the call", function()
  TH.training_operator(conn)
  refused("training_submit", job { instance_type = "ml.g5.24xlarge", elastic = obj { min_replicas = 1,
    max_replicas = 1 } }, "VALIDATION", "params.elastic", "spot", "runs on spot capacity")
  local groups = {}
  for _, g in ipairs(call("sagemaker", "DescribeCluster", { ClusterName = HP }).InstanceGroups) do
    groups[#groups + 1] = { InstanceGroupName = g.InstanceGroupName, InstanceType = g.InstanceType,
      InstanceCount = g.TargetCount or g.CurrentCount, ExecutionRole = g.ExecutionRole,
      LifeCycleConfig = g.LifeCycleConfig, CapacityRequirements = g.CapacityRequirements }
  end
  call("sagemaker", "UpdateCluster", { ClusterName = HP, InstanceGroups = groups,
    TieredStorageConfig = { Mode = "Enable" } })
  FH.wait(function()
    local d = call("sagemaker", "DescribeCluster", { ClusterName = HP })
    return d.ClusterStatus == "InService" and (d.TieredStorageConfig or {}).Mode == "Enable"
  end)
  refused("training_submit", job { elastic = obj { min_replicas = 1, max_replicas = 2 } }, "VALIDATION",
    "params.elastic", "tiered_checkpointing", "managed tiered checkpointing on")
end)

t.test("a fixed-at-create value that differs from the group's is refused on the call", function()
  refused("hyperpod_scale_instance_group", { cluster = EKS, instance_group = "cheap", instance_count = 1,
    capacity_type = "on-demand" }, "VALIDATION", "capacity_type", "fixed_at_create", "fixed when instance group cheap")
  refused("hyperpod_scale_instance_group", { cluster = EKS, instance_group = "gpu", instance_count = 1,
    efa_only = true }, "VALIDATION", "efa_only", "fixed_at_create")
end)

t.test("an instance type outside SageMaker's ClusterInstanceType list is refused on the call by every staged tool " ..
  "that takes a HyperPod group's instance type", function()
  -- the tools whose instance_type is a HyperPod group's: the group-making ones (their check reads the list);
  -- hyperpod_create on an EKS cluster of its own (one EKS cluster has one HyperPod cluster)
  local acc = assert(dispatch.call("cluster_create_eks", { cluster_tag = "oncall-b" },
    { name = "checker", scope = "admin", front = "test" }))
  t.eq(op.wait(acc.operation_id).status, "succeeded", "cluster_create_eks oncall-b")
  local cases = {
    cluster_create = { cluster_tag = "oncall-new", instance_type = "ml.r5.large", instance_count = 1,
      availability_zone = "us-west-2a" },
    hyperpod_create = { cluster = "hypd-oncall-b", instance_type = "ml.r5.large", instance_count = 1,
      availability_zone = "us-west-2a" },
    hyperpod_add_instance_group = { cluster = EKS, instance_group = "new", instance_type = "ml.r5.large",
      instance_count = 1, availability_zone = "us-west-2a" },
  }
  local n = 0
  for _, def in ipairs(tool.list()) do
    -- a staged tool that takes an instance type and a count makes a HyperPod group
    if def.steps and def.params.instance_type and def.params.instance_count then
      t.ok(cases[def.name], def.name .. " takes a HyperPod group's instance_type: it has a case here")
      if cases[def.name] then
        n = n + 1
        local e = refused(def.name, cases[def.name], "VALIDATION", "instance_type", "hyperpod_type",
          "not a SageMaker HyperPod instance type")
        t.ok(not tostring(e.message):find("internal", 1, true), "the message says why")
      end
    end
  end
  t.eq(n, 3, "every such tool was called")
end)

t.test("every staged tool with a fixed-at-create parameter refuses a value that differs from what exists on the " ..
  "call", function()
  local who = { name = "checker", scope = "admin", front = "test" }
  local acc = assert(dispatch.call("cluster_create", { cluster_tag = "oncall-fix", instance_type = "ml.g5.12xlarge",
    instance_count = 1, availability_zone = "us-west-2a", fsx_storage = true }, who))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", "cluster_create oncall-fix: " .. json.encode(v.error))
  local C = "hypd-oncall-fix"
  -- per tool: a call that asks a fixed value other than the one that exists, and the field it names
  local cases = {
    cluster_create = { { cluster_tag = "oncall-fix", instance_type = "ml.g5.12xlarge", instance_count = 1,
      availability_zone = "us-west-2a", capacity_type = "spot" }, "capacity_type" },
    hyperpod_create = { { cluster = C, instance_type = "ml.g5.12xlarge", instance_count = 1,
      availability_zone = "us-west-2b" }, "availability_zone" },
    hyperpod_add_instance_group = { { cluster = C, instance_group = "oncall-fix-ig", instance_type = "ml.g5.12xlarge",
      instance_count = 1, availability_zone = "us-west-2b" }, "availability_zone" },
    hyperpod_scale_instance_group = { { cluster = C, instance_group = "oncall-fix-ig", instance_count = 1,
      capacity_type = "spot" }, "capacity_type" },
    storage_create_fsx = { { cluster = C, claim_name = "fsx-claim", deployment_type = "SCRATCH_2" },
      "deployment_type" },
  }
  local n = 0
  for _, def in ipairs(tool.list()) do
    local fixed = false
    for k, spec in pairs(def.params) do
      if k ~= "cluster_tag" and spec.fixed then fixed = true end
    end
    if def.steps and fixed then
      local c = cases[def.name]
      t.ok(c, def.name .. " has a fixed-at-create parameter: it has a case here")
      if c then
        n = n + 1
        refused(def.name, c[1], "VALIDATION", c[2], "fixed_at_create")
      end
    end
  end
  t.eq(n, 5, "every such tool was called")
end)
