-- No tool takes over what another made (issue 19), against the in-process
-- sandbox under the virtual clock: an EKS cluster with the S3 and FSx CSI
-- add-ons, a HyperPod cluster of two ml.g5.12xlarge GPU nodes and one
-- ml.m5.2xlarge CPU node, the inference operator's and the training
-- operator's CRDs.
--
-- FAMILIES is the table of every tool family that makes named objects:
-- the call that makes one named x in a namespace, the objects that call
-- makes under that name, the call that deletes it, and the object someone
-- else would make under that name. From it:
--   * every ordered pair of families whose objects share a kind and name
--     (computed from the table, not listed) is tried: the first makes x,
--     the second is refused (its plan too) with CONFLICT naming the first's
--     family (hypd.io/family) and tool and a valid call of the tool that
--     removes it, and the first's objects are unchanged (resourceVersion,
--     labels and spec compared before and after);
--   * for every family, an object of its name made by someone else (no
--     app.kubernetes.io/managed-by=hypd label) is refused by its create and
--     by its delete with CONFLICT, and is unchanged;
--   * for every family, what it made before hypd.io/family existed (the
--     label removed) is applied again and deleted by its own tools.
-- And the SGLang router over two inference_deploy_container deployments
-- (which share no label selecting only them) routes to both, found by name.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local _, OPTS = H.sandbox_here()
require("hypd.tool.loader").load()
local SH = dofile("tests/lua/storage_helpers.lua")
local FH = dofile("tests/lua/features_helpers.lua")
local TH = dofile("tests/lua/training_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local json, op = require "hypd.json", require "hypd.tool.operations"
local call = FH.aws(OPTS)
local ADMIN = { name = "owner-tester", scope = "admin", front = "test" }
local EKS, HP = "hypd-owners", "hypd-owners-hp"
local GPU = "ml.g5.12xlarge"
local IAPI = "inference.sagemaker.aws.amazon.com/v1"
local TAPI = "sagemaker.amazonaws.com/v1"
local conn, FS

-- run(name, args) -> result | nil, err: a tool called and its operation waited for
local function run(name, args)
  args.cluster = args.cluster or EKS
  local acc, err = dispatch.call(name, args, ADMIN)
  if not acc then return nil, err end
  if not acc.operation_id then return acc end
  local v = op.wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error, v end
  return v.result, nil, v
end

local function must(name, args)
  local r, err = run(name, args)
  assert(r, name .. " " .. json.encode(args) .. ": " .. json.encode(err))
  return r
end

local function sglang(port)
  return { "python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--host",
    "0.0.0.0", "--port", tostring(port or 30000) }
end

-- a worker for the router family's calls: an SGLang deployment of its own
local function worker(ns, name)
  must("inference_deploy_container", { name = name, namespace = ns, engine = "sglang", command = sglang(),
    instance_type = GPU, gpus = 1, storage_claim = "" })
end

local function obj(api, kind, name, ns) return { api = api, kind = kind, name = name, ns = ns } end

local function minimal_deployment(name, ns)
  return { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = name, namespace = ns },
    spec = { replicas = 0, selector = { matchLabels = { app = name } }, template = {
      metadata = { labels = { app = name } }, spec = { containers = { { name = "c", image = "nginx" } } } } } }
end

-- the families: make(ns, x) -> tool, args; objects(ns, x) -> what it makes
-- under the name x; delete(ns, x) -> tool, args; foreign(ns, x) -> what
-- someone else would apply under that name; prepare(ns): what its make needs
local FAMILIES = {
  { family = "inference-container", tool = "inference_deploy_container",
    make = function(ns, x)
      return "inference_deploy_container", { name = x, namespace = ns, engine = "sglang", command = sglang(),
        instance_type = GPU, gpus = 1, storage_claim = "" }
    end,
    objects = function(ns, x) return { obj("apps/v1", "Deployment", x, ns), obj("v1", "Service", x, ns) } end,
    delete = function(ns, x) return "inference_delete", { name = x, namespace = ns } end,
    foreign = minimal_deployment },
  { family = "inference-managed", tool = "inference_deploy_managed",
    make = function(ns, x)
      return "inference_deploy_managed", { name = x, namespace = ns, model_source = "s3", s3_bucket = "models-owners",
        model_location = "models/qwen", instance_type = GPU, replicas = 1, image = "vllm/vllm-openai:v0.8.5",
        args = { "--model", "/opt/ml/model", "--port", "8000" }, port = 8000, gpus = 1 }
    end,
    -- the operator makes a Deployment and a Service of the resource's name
    objects = function(ns, x)
      return { obj(IAPI, "InferenceEndpointConfig", x, ns), obj("apps/v1", "Deployment", x, ns),
        obj("v1", "Service", x, ns) }
    end,
    delete = function(ns, x) return "inference_delete", { name = x, namespace = ns } end,
    foreign = function(x, ns)
      return { apiVersion = IAPI, kind = "InferenceEndpointConfig", metadata = { name = x, namespace = ns },
        -- what the CRD's schema requires: the model's source and the worker's port, mount and resources
        spec = { modelName = x, replicas = 1, instanceType = GPU,
          modelSourceConfig = { modelSourceType = "s3", s3Storage = { bucketName = "models-owners", region = "us-west-2" },
            modelLocation = "models/qwen" },
          worker = { image = "vllm/vllm-openai:latest", modelInvocationPort = { containerPort = 8000 },
            modelVolumeMount = { name = "model-weights", mountPath = "/opt/ml/model" },
            resources = { limits = { ["nvidia.com/gpu"] = 1 } } } } }
    end },
  { family = "inference-jumpstart", tool = "inference_deploy_jumpstart",
    make = function(ns, x)
      return "inference_deploy_jumpstart", { name = x, namespace = ns,
        model_id = "meta-textgeneration-llama-3-2-1b-instruct", instance_type = GPU, accept_eula = true }
    end,
    objects = function(ns, x)
      return { obj(IAPI, "JumpStartModel", x, ns), obj("apps/v1", "Deployment", x, ns), obj("v1", "Service", x, ns) }
    end,
    delete = function(ns, x) return "inference_delete", { name = x, namespace = ns } end,
    foreign = function(x, ns)
      return { apiVersion = IAPI, kind = "JumpStartModel", metadata = { name = x, namespace = ns },
        spec = { model = { modelHubName = "SageMakerPublicHub", modelId = "meta-textgeneration-llama-3-2-1b-instruct",
          acceptEula = true }, server = { instanceType = GPU }, replicas = 0 } }
    end },
  { family = "inference-router", tool = "inference_deploy_router",
    prepare = function(ns) worker(ns, "wk") end,
    make = function(ns, x) return "inference_deploy_router", { name = x, namespace = ns, workers = { "wk" } } end,
    objects = function(ns, x)
      return { obj("apps/v1", "Deployment", x, ns), obj("v1", "Service", x .. "-service", ns),
        obj("v1", "ServiceAccount", x, ns) }
    end,
    delete = function(ns, x) return "inference_delete", { name = x, namespace = ns } end,
    foreign = minimal_deployment },
  { family = "training", tool = "training_submit",
    make = function(ns, x)
      local params = json.object()
      params.job_name, params.namespace, params.instance_type, params.script, params.replicas = x, ns, GPU,
        "scripts/train.py", 1
      params.gpus_per_node = 1
      return "training_submit", { recipe = "pytorch-torchrun", params = params }
    end,
    objects = function(ns, x) return { obj(TAPI, "HyperPodPyTorchJob", x, ns) } end,
    delete = function(ns, x) return "training_delete_job", { name = x, namespace = ns } end,
    foreign = function(x, ns)
      return { apiVersion = TAPI, kind = "HyperPodPyTorchJob", metadata = { name = x, namespace = ns },
        spec = { nprocPerNode = "1", replicaSpecs = { { name = "pods", replicas = 0, template = { spec = {
          containers = { { name = "c", image = "busybox" } } } } } } } }
    end },
  { family = "download", tool = "model_download",
    prepare = function(ns) must("storage_create_s3", { claim_name = "s3-claim", namespace = ns }) end,
    make = function(ns, x)
      return "model_download", { name = x, namespace = ns, model_id = "Qwen/Qwen2.5-0.5B-Instruct" }
    end,
    objects = function(ns, x) return { obj("batch/v1", "Job", x, ns) } end,
    delete = function(ns, x) return "job_delete", { name = x, namespace = ns } end,
    foreign = function(x, ns)
      return { apiVersion = "batch/v1", kind = "Job", metadata = { name = x, namespace = ns },
        spec = { suspend = true, template = { spec = { restartPolicy = "Never",
          containers = { { name = "c", image = "busybox" } } } } } }
    end },
  { family = "storage-s3", tool = "storage_create_s3",
    make = function(ns, x) return "storage_create_s3", { claim_name = x, namespace = ns } end,
    objects = function(ns, x)
      return { obj("v1", "PersistentVolumeClaim", x, ns), obj("v1", "PersistentVolume", "s3-pv-" .. ns .. "-" .. x) }
    end,
    delete = function(ns, x) return "storage_delete", { claim_name = x, namespace = ns } end,
    foreign = function(x, ns)
      return { apiVersion = "v1", kind = "PersistentVolumeClaim", metadata = { name = x, namespace = ns },
        spec = { accessModes = { "ReadWriteOnce" }, resources = { requests = { storage = "1Gi" } } } }
    end },
  { family = "storage-fsx", tool = "storage_create_fsx",
    make = function(ns, x) return "storage_create_fsx", { claim_name = x, namespace = ns, file_system_id = FS } end,
    objects = function(ns, x)
      return { obj("v1", "PersistentVolumeClaim", x, ns), obj("v1", "PersistentVolume", "fsx-pv-" .. ns .. "-" .. x) }
    end,
    delete = function(ns, x) return "storage_delete", { claim_name = x, namespace = ns } end,
    foreign = function(x, ns)
      return { apiVersion = "v1", kind = "PersistentVolumeClaim", metadata = { name = x, namespace = ns },
        spec = { accessModes = { "ReadWriteOnce" }, resources = { requests = { storage = "1Gi" } } } }
    end },
}

local function key(o) return o.kind .. "/" .. tostring(o.ns) .. "/" .. o.name end

-- pairs_of(families) -> every ordered pair {a, b} whose objects under the same name collide
local function pairs_of(families)
  local out = {}
  for _, a in ipairs(families) do
    for _, b in ipairs(families) do
      if a ~= b then
        local mine = {}
        for _, o in ipairs(a.objects("ns", "x")) do mine[key(o)] = true end
        local hit = false
        for _, o in ipairs(b.objects("ns", "x")) do hit = hit or mine[key(o)] == true end
        if hit then out[#out + 1] = { a, b } end
      end
    end
  end
  return out
end

-- snapshot(objects) -> what each existing object is: {key = {rv, labels, spec}}
local function snapshot(objects)
  local out = {}
  for _, o in ipairs(objects) do
    local live = conn:get(o.api, o.kind, o.name, { namespace = o.ns })
    if live then
      out[key(o)] = json.encode { live.metadata.resourceVersion, live.metadata.labels or {}, live.spec or {} }
    end
  end
  return out
end

local function count(t_)
  local n = 0
  for _ in pairs(t_) do n = n + 1 end
  return n
end

local NS = 0
local function namespace()
  NS = NS + 1
  local ns = "own-" .. NS
  assert(conn:create { apiVersion = "v1", kind = "Namespace", metadata = { name = ns } })
  return ns
end

-- guarded(body, after): body's assertions, then after whatever happened
-- (what a test made is removed, so the GPUs are free for the next)
local function guarded(body, after)
  local ok, err = pcall(body)
  after()
  if not ok then error(err, 0) end
end

t.test("a cluster: EKS with the S3 and FSx CSI add-ons, two GPU nodes and a CPU node, the operators' CRDs", function()
  local eks = SH.cluster(EKS, 93, { "aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver" })
  conn = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = EKS .. "-exec", AssumeRolePolicyDocument = trust }).Role.Arn
  local sg = call("ec2", "CreateSecurityGroup", { GroupName = EKS .. "-hp", Description = "hyperpod",
    VpcId = eks.resourcesVpcConfig.vpcId }).GroupId
  call("sagemaker", "CreateCluster", { ClusterName = HP, NodeRecovery = "None",
    InstanceGroups = {
      { InstanceGroupName = "gpu", InstanceType = GPU, InstanceCount = 2, ExecutionRole = role },
      { InstanceGroupName = "cpu", InstanceType = "ml.m5.2xlarge", InstanceCount = 1, ExecutionRole = role } },
    Orchestrator = { Eks = { ClusterArn = eks.arn } },
    VpcConfig = { Subnets = { eks.resourcesVpcConfig.subnetIds[1] }, SecurityGroupIds = { sg } } })
  FH.wait(function() return call("sagemaker", "DescribeCluster", { ClusterName = HP }).ClusterStatus == "InService" end)
  FH.wait(function() return #(conn:list("v1", "Node") or {}) == 3 end)
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "inference.sagemaker.aws.amazon.com" then assert(conn:create(resources.crd(row))) end
  end
  TH.training_operator(conn)
  call("s3", "CreateBucket", { Bucket = "models-owners",
    CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  FS = call("fsx", "CreateFileSystem", { FileSystemType = "LUSTRE", StorageCapacity = 1200,
    SubnetIds = { eks.resourcesVpcConfig.subnetIds[1] },
    LustreConfiguration = { DeploymentType = "SCRATCH_2" } }).FileSystem.FileSystemId
  SH.until_true(function()
    return call("fsx", "DescribeFileSystems", { FileSystemIds = { FS } }).FileSystems[1].Lifecycle == "AVAILABLE"
  end, 3600, "the FSx file system")
  t.eq(#conn:list("v1", "Node"), 3, "three nodes")
end)

local PAIRS = pairs_of(FAMILIES)

t.test("the pairs that can collide come from the table: the four inference families and the two storages", function()
  local rows = {}
  for _, p in ipairs(PAIRS) do rows[#rows + 1] = p[1].family .. ">" .. p[2].family end
  t.eq(#PAIRS, 14, table.concat(rows, " "))
  local fams = {}
  for _, p in ipairs(PAIRS) do fams[p[1].family] = true end
  t.eq(count(fams), 6, "every inference family and both storages have a partner")
end)

for _, pair in ipairs(PAIRS) do
  local a, b = pair[1], pair[2]
  t.test(string.format("%s's x is not taken over by %s (CONFLICT naming %s, nothing changed)", a.tool, b.tool,
    a.tool), function()
    local ns = namespace()
    guarded(function()
      if a.prepare then a.prepare(ns) end
      if b.prepare and b.prepare ~= a.prepare then b.prepare(ns) end
      local tn, args = a.make(ns, "x")
      local r, err = run(tn, args)
      t.ok(r, tn .. " makes x: " .. json.encode(err))
      local before = snapshot(a.objects(ns, "x"))
      t.ok(count(before) > 0, "the first tool's objects exist")
      local bn, bargs = b.make(ns, "x")
      bargs.plan = true
      local planned, perr = run(bn, bargs)
      t.eq(planned, nil, bn .. "'s plan does not offer to take it over")
      t.eq(perr and perr.code, "CONFLICT", "its plan: " .. json.encode(perr))
      bargs.plan = nil
      local r2, err2 = run(bn, bargs)
      t.eq(r2, nil, bn .. " is refused")
      t.eq(err2 and err2.code, "CONFLICT", json.encode(err2))
      local msg = err2 and err2.message or ""
      t.like(msg, "hypd%.io/family=" .. a.family:gsub("%-", "%%-"), "names the first's family")
      t.like(msg, "was made by " .. a.tool, "names the first's tool")
      -- the call it suggests is complete: the registry accepts its parameters
      local fix = msg:match("remove it first with: (.+)$")
      local manager = a.delete(ns, "x")
      t.ok(fix and fix:find("^" .. manager .. " "), "the fix is a call of " .. manager .. ": " .. tostring(fix))
      if fix then
        local ftool, rest = fix:match("^(%S+)%s+(.*)$")
        local fargs = {}
        for k, v in rest:gmatch("([%w_]+)=(%S+)") do fargs[k] = v end
        fargs.plan = true
        local fplan, ferr = dispatch.call(ftool, fargs, ADMIN)
        t.ok(fplan, "the suggested call " .. fix .. " is valid: " .. json.encode(ferr))
      end
      t.eq(snapshot(a.objects(ns, "x")), before, "the first tool's objects are unchanged")
      -- each carries its owner (a controller's objects: their ownerReference)
      for k in pairs(before) do
        local kind, kns, name = k:match("^([^/]+)/([^/]+)/(.+)$")
        for _, o in ipairs(a.objects(ns, "x")) do
          if o.kind == kind and tostring(o.ns) == kns and o.name == name then
            local live = conn:get(o.api, o.kind, o.name, { namespace = o.ns })
            local owner = live.metadata.ownerReferences
            if not owner then
              t.eq((live.metadata.labels or {})["hypd.io/family"], a.family, k .. " carries its family")
              t.eq((live.metadata.labels or {})["app.kubernetes.io/managed-by"], "hypd", k .. " is hypd's")
            end
          end
        end
      end
      local dn, dargs = a.delete(ns, "x")
      t.ok(run(dn, dargs), "the first tool's x is removed by its own delete")
    end, function()
      run(a.delete(ns, "x"))
      if a.prepare or b.prepare then run("inference_delete", { name = "wk", namespace = ns }) end
    end)
  end)
end

t.test("an object someone else made under the family's name is refused by every family's create and delete",
  function()
    for _, f in ipairs(FAMILIES) do
      local ns = namespace()
      local o = f.foreign("x", ns)
      guarded(function()
        if f.prepare then f.prepare(ns) end
        assert(conn:create(o), f.family .. ": the foreign object")
        -- as kubectl apply makes it: no hypd label
        assert(conn:patch(o.apiVersion, o.kind, "x", { metadata = { labels = {
          ["app.kubernetes.io/managed-by"] = json.null } } }, { namespace = ns }))
        local function state()
          local live = conn:get(o.apiVersion, o.kind, "x", { namespace = ns })
          return live and json.encode { live.metadata.resourceVersion, live.metadata.labels or {}, live.spec } or nil
        end
        local before = state()
        t.ok(before and not before:find("managed-by", 1, true), f.family .. ": the object carries no hypd label")
        local mn, margs = f.make(ns, "x")
        local r, err = run(mn, margs)
        t.eq(r, nil, f.family .. ": " .. mn .. " is refused")
        t.eq(err and err.code, "CONFLICT", f.family .. ": " .. json.encode(err))
        t.like(err and err.message or "", "was not made by hypd", f.family .. ": says whose it is not")
        t.eq(state(), before, f.family .. ": unchanged by the create")
        local dn, dargs = f.delete(ns, "x")
        r, err = run(dn, dargs)
        t.eq(r, nil, f.family .. ": " .. dn .. " is refused")
        t.eq(err and err.code, "CONFLICT", f.family .. ": " .. json.encode(err))
        t.eq(state(), before, f.family .. ": unchanged (not deleted) by " .. dn)
      end, function()
        conn:delete(o.apiVersion, o.kind, "x", { namespace = ns })
        if f.prepare then run("inference_delete", { name = "wk", namespace = ns }) end
      end)
    end
  end)

t.test("objects made before the family label (their old labels only) stay manageable by their own tools", function()
  for _, f in ipairs(FAMILIES) do
    local ns = namespace()
    guarded(function()
      if f.prepare then f.prepare(ns) end
      local tn, args = f.make(ns, "old")
      must(tn, args)
      -- as hypd made them before this change: the same labels without hypd.io/family
      local stripped = 0
      for _, o in ipairs(f.objects(ns, "old")) do
        local live = conn:get(o.api, o.kind, o.name, { namespace = o.ns })
        if live and (live.metadata.labels or {})["hypd.io/family"] then
          assert(conn:patch(o.api, o.kind, o.name, { metadata = { labels = { ["hypd.io/family"] = json.null } } },
            { namespace = o.ns }))
          stripped = stripped + 1
        end
      end
      t.ok(stripped > 0, f.family .. ": its objects had the label")
      local r, err = run(tn, args)
      t.ok(r, f.family .. ": " .. tn .. " applies it again: " .. json.encode(err))
      local dn, dargs = f.delete(ns, "old")
      r, err = run(dn, dargs)
      t.ok(r, f.family .. ": " .. dn .. " removes it: " .. json.encode(err))
    end, function()
      run(f.delete(ns, "old"))
      if f.prepare then run("inference_delete", { name = "wk", namespace = ns }) end
    end)
  end
  -- and another family is still refused by the old labels
  local ns = namespace()
  guarded(function()
    must(FAMILIES[1].make(ns, "old"))
    for _, k in ipairs { { "apps/v1", "Deployment" }, { "v1", "Service" } } do
      assert(conn:patch(k[1], k[2], "old", { metadata = { labels = { ["hypd.io/family"] = json.null } } },
        { namespace = ns }))
    end
    local _, err = run(FAMILIES[2].make(ns, "old"))
    t.eq(err and err.code, "CONFLICT", "another family is refused by the old labels")
    t.like(err and err.message or "", "was made by inference_deploy_container")
    must(FAMILIES[1].make(ns, "old"))
    local dep = conn:get("apps/v1", "Deployment", "old", { namespace = ns })
    t.eq(dep.metadata.labels["hypd.io/family"], "inference-container", "its own tool adds the label again")
  end, function() run("inference_delete", { name = "old", namespace = ns }) end)
end)

t.test("the SGLang router routes to two inference_deploy_container deployments by name, with no hand labels",
  function()
    local ns = namespace()
    worker(ns, "sgl-a")
    worker(ns, "sgl-b")
    local r, err = run("inference_deploy_router", { workers = { "sgl-a", "sgl-b" }, namespace = ns,
      policy = "round_robin" })
    t.ok(r, "the router is deployed: " .. json.encode(err))
    if not r then return end
    t.eq(r.worker_urls, { "http://sgl-a." .. ns .. ".svc.cluster.local:30000",
      "http://sgl-b." .. ns .. ".svc.cluster.local:30000" }, "each worker by its Service")
    for _, n in ipairs { "sgl-a", "sgl-b" } do
      local d = conn:get("apps/v1", "Deployment", n, { namespace = ns })
      t.eq(d.spec.template.metadata.labels.model, nil, n .. " was not relabelled")
      t.eq(d.metadata.labels["hypd.io/family"], "inference-container", n .. " is still the container family's")
    end
    for i = 1, 6 do
      local a
      FH.wait(function()
        a = dispatch.call("inference_call_model", { name = "sglang-router", namespace = ns, cluster = EKS,
          prompt = "Tell me about GPUs, " .. i, max_tokens = 8 }, ADMIN)
        return a ~= nil
      end, 120, 5)
      t.ok(a and a.answer, "request " .. i .. " answered through the router")
    end
    -- the router's log names the worker each request went to (round_robin:
    -- inference_call_model's requests alternate between the two)
    local pod = conn:list("v1", "Pod", { namespace = ns, labels = { app = "sglang-router" } })[1]
    local log = tostring(pod and conn:logs(pod.metadata.name, { namespace = ns }))
    for _, n in ipairs { "sgl-a", "sgl-b" } do
      local url = ("http://" .. n .. "." .. ns .. ".svc"):gsub("[%-%.]", "%%%0")
      local _, sent = log:gsub(" %-> " .. url .. "[^\n]* 200", "")
      t.ok(sent >= 3, n .. " answered requests through the router (" .. sent .. ")")
    end
  end)

