-- Elastic training and checkpointless training on the HyperPodPyTorchJob
-- recipes: elastic renders spec.elasticPolicy and replicaSpecs maxReplicas;
-- bad ranges and elastic with checkpointless are refused at the call, naming
-- the field; training_submit refuses before creating anything on a spot
-- instance group and with managed tiered checkpointing on (the cluster's
-- TieredStorageConfig), and checkpointless with tiered checkpointing; an
-- elastic job on on-demand capacity runs to Completed in the sandbox.
local t = require "hypd.tap"
local TH = dofile("tests/lua/training_helpers.lua")
local call = TH.start()
local H, FH = TH.H, TH.FH
local dispatch = require "hypd.tool.dispatch"
local json = require "hypd.json"
local ADMIN = { name = "elastic-tester", scope = "admin", front = "test" }
local EKS, HP = "el-a", "el-a-hp"
local field_rules = H.field_rules

local obj = TH.obj

local function params(extra)
  local a = obj { job_name = "el", instance_type = "ml.g5.12xlarge", script = "scripts/train.py", replicas = 1 }
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

local function render(p) return dispatch.call("training_render", { recipe = "pytorch-torchrun", params = p }, ADMIN) end

t.test("elastic renders elasticPolicy and the replica spec's maxReplicas; the job starts with replicas", function()
  local r, err = render(params { replicas = 2, elastic = obj { min_replicas = 1, max_replicas = 4,
    replica_increment_step = 1 } })
  t.ok(r, err and err.message)
  if not r then return end
  local spec = r.objects[1].spec
  t.eq(spec.elasticPolicy, { minReplicas = 1, maxReplicas = 4, replicaIncrementStep = 1 })
  t.eq({ spec.replicaSpecs[1].replicas, spec.replicaSpecs[1].maxReplicas }, { 2, 4 })
  local plain = assert(render(params()))
  t.eq({ plain.objects[1].spec.elasticPolicy, plain.objects[1].spec.replicaSpecs[1].maxReplicas }, { nil, nil })
end)

t.test("bad elastic input is refused at the call naming the field: range, required, checkpointless", function()
  local cases = {
    { params { elastic = obj { min_replicas = 3, max_replicas = 2 }, replicas = 2 }, "params.elastic.max_replicas:range" },
    { params { elastic = obj { min_replicas = 2, max_replicas = 4 }, replicas = 1 }, "params.replicas:range" },
    { params { elastic = obj { max_replicas = 4 } }, "params.elastic.min_replicas:required" },
    { params { elastic = obj { min_replicas = 1, max_replicas = 2, replica_increment_step = 3 } },
      "params.elastic.replica_increment_step:range" },
    { params { elastic = obj { min_replicas = 1, max_replicas = 2 }, checkpointless = true },
      "params.elastic:checkpointless" },
  }
  for _, c in ipairs(cases) do
    local _, err = render(c[1])
    t.eq(field_rules(err), { c[2] }, c[2])
  end
  local acc, err = dispatch.call("training_submit", { recipe = "pytorch-torchrun", params = cases[5][1], cluster = EKS },
    ADMIN)
  t.eq(acc, nil, "refused at the call: no operation")
  t.eq(field_rules(err), { "params.elastic:checkpointless" })
  local v = obj { job_name = "rl", instance_type = "ml.g5.12xlarge", model = "models/qwen", train_files = "a.parquet",
    val_files = "b.parquet", elastic = obj { min_replicas = 1, max_replicas = 2 } }
  local _, verr = dispatch.call("training_render", { recipe = "verl", params = v }, ADMIN)
  t.eq(field_rules(verr), { "params.elastic:unknown" }, "not offered on the RayJob recipe")
end)

local conn
local function submit(extra)
  return TH.run("training_submit", { recipe = "pytorch-torchrun", params = params(extra), cluster = EKS }, ADMIN)
end

t.test("a cluster: an on-demand group gpu (2 x ml.g5.12xlarge) and a spot group cheap (1 x ml.g5.24xlarge)",
  function()
    conn = TH.cluster(call, EKS, HP, 87, {
      { InstanceGroupName = "gpu", InstanceType = "ml.g5.12xlarge", InstanceCount = 2 },
      { InstanceGroupName = "cheap", InstanceType = "ml.g5.24xlarge", InstanceCount = 1,
        CapacityRequirements = { Spot = json.object() } } })
    TH.training_operator(conn)
    local d = call("sagemaker", "DescribeCluster", { ClusterName = HP })
    local spot
    for _, g in ipairs(d.InstanceGroups) do if g.InstanceGroupName == "cheap" then spot = g.CapacityRequirements end end
    t.ok(spot and spot.Spot, "the sandbox keeps the spot capacity type")
  end)

t.test("elastic on spot capacity is refused before anything is created, naming the group", function()
  local m = FH.mark()
  local _, err = submit { instance_type = "ml.g5.24xlarge", elastic = obj { min_replicas = 1, max_replicas = 1 } }
  t.eq(field_rules(err), { "params.elastic:spot" })
  t.like(err and err.message, "instance group cheap %(ml%.g5%.24xlarge%) runs on spot capacity")
  _, err = submit { instance_group = "cheap", instance_type = "ml.g5.24xlarge",
    elastic = obj { min_replicas = 1, max_replicas = 1 } }
  t.eq(field_rules(err), { "params.elastic:spot" }, "by group as well")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
end)

t.test("an elastic job on on-demand capacity runs to Completed with its elasticPolicy", function()
  local r, err = submit { job_name = "grow", replicas = 1, elastic = obj { min_replicas = 1, max_replicas = 2 } }
  t.ok(r, err and err.message)
  if not r then return end
  local live = assert(conn:get("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", "grow", { namespace = "default" }))
  t.eq(live.spec.elasticPolicy, { minReplicas = 1, maxReplicas = 2 })
  t.eq(TH.follow({ name = "grow", cluster = EKS }, ADMIN).phase, "Completed")
end)

t.test("with managed tiered checkpointing on, elastic and checkpointless are refused naming the setting", function()
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
  local m = FH.mark()
  local _, err = submit { job_name = "grow2", elastic = obj { min_replicas = 1, max_replicas = 2 } }
  t.eq(field_rules(err), { "params.elastic:tiered_checkpointing" })
  t.like(err and err.message, "managed tiered checkpointing on")
  _, err = submit { job_name = "cpl", checkpointless = true }
  t.eq(field_rules(err), { "params.checkpointless:tiered_checkpointing" })
  t.like(err and err.message, "incompatible with checkpointless training")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
  local r = assert(render(params { checkpointless = true }))
  t.eq(r.objects[1].metadata.labels["hypd.io/checkpointless"], "true", "checkpointless is visible on the job")
end)
