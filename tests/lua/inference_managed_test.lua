-- The operator-managed inference tools (inference_deploy_managed,
-- inference_list_jumpstart_models, inference_deploy_jumpstart) against the
-- in-process sandbox under the virtual clock: an EKS cluster with a
-- HyperPod cluster of three ml.g5.12xlarge nodes (4 GPUs each). Without the
-- inference operator both deploys refuse before creating anything, naming
-- the call that enables it; a plan sends nothing; with the operator's CRDs
-- an InferenceEndpointConfig from S3 reaches DeploymentComplete with a
-- Deployment and a Service it owns (pods carrying hypd's labels) and a
-- SageMaker endpoint; the public hub answers boto3 and the list tool; a
-- JumpStartModel deploys at the newest version; bad model ids, versions
-- and instance types are refused naming the field; a repeated call makes no
-- Kubernetes write.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local _, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local dispatch = require "hypd.tool.dispatch"
local json, op = require "hypd.json", require "hypd.tool.operations"
local ADMIN = { name = "inference-tester", scope = "admin", front = "test" }
local EKS = "infer-a"
local API = "inference.sagemaker.aws.amazon.com/v1"

local field_rules = H.field_rules

local function deploy(name, args)
  args.cluster = args.cluster or EKS
  local acc, err = dispatch.call(name, args, ADMIN)
  if not acc then return nil, err end
  if args.plan then return acc end
  local v = op.wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error, v end
  return v.result, nil, v
end

local function managed(extra)
  local a = { name = "qwen", model_source = "s3", s3_bucket = "models-infer-a", model_location = "models/qwen2-5-7b",
    instance_type = "ml.g5.12xlarge", replicas = 2, image = "vllm/vllm-openai:v0.8.5",
    args = { "--model", "/opt/ml/model", "--port", "8000", "--served-model-name", "qwen" }, port = 8000, gpus = 1,
    enable_l1_cache = true, enable_l2_cache = true, l2_backend = "tieredstorage", routing_strategy = "prefixaware",
    endpoint_name = "qwen-sm" }
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

local conn
local function list(kind)
  return conn:list(API, kind, { namespace = "default" }) or {}
end

t.test("a cluster: EKS and a HyperPod cluster with a group of three ml.g5.12xlarge nodes", function()
  conn = FH.gpu_cluster(call, EKS, EKS .. "-hp", 83, 3)
  t.ok(conn, "three GPU nodes in Kubernetes")
end)

t.test("without the inference operator both deploys refuse before creating anything, naming the call that enables it",
  function()
    local m = FH.mark()
    local _, err = deploy("inference_deploy_managed", managed())
    t.eq(err and err.code, "CONFLICT")
    t.like(err and err.message, "needs the HyperPod inference operator")
    t.like(err and err.message, "hyperpod_update_advanced_features inference_operator=true")
    _, err = deploy("inference_deploy_jumpstart", { name = "llama", model_id = "meta-textgeneration-llama-3-2-1b-instruct",
      instance_type = "ml.g5.12xlarge", accept_eula = true })
    t.eq(err and err.code, "CONFLICT")
    t.like(err and err.message, "a JumpStartModel needs .*inference_operator=true")
    local _, total = FH.since(m)
    t.eq(total, 0, "no AWS mutation")
    t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
  end)

t.test("bad input is refused at the call naming the field: no GPU count, s3 without a bucket, l2 url without redis",
  function()
    local a = managed()
    a.gpus = nil
    local acc, err = dispatch.call("inference_deploy_managed", a, ADMIN)
    t.eq(acc, nil)
    t.eq(field_rules(err), { "gpus:required" }, "the GPU count is a required decision")
    _, err = dispatch.call("inference_deploy_managed", managed { gpus = 0 }, ADMIN)
    t.eq(field_rules(err), { "gpus:minimum" })
    _, err = dispatch.call("inference_deploy_managed", managed { gpus = "1" }, ADMIN)
    t.eq(field_rules(err), { "gpus:type" })
    local b = managed()
    b.s3_bucket = nil
    _, err = dispatch.call("inference_deploy_managed", b, ADMIN)
    t.eq(field_rules(err), { "s3_bucket:required" })
    _, err = dispatch.call("inference_deploy_managed", managed { l2_url = "redis://cache:6379" }, ADMIN)
    t.eq(field_rules(err), { "l2_url:backend" })
    _, err = dispatch.call("inference_deploy_managed", managed { model_location = "../secrets" }, ADMIN)
    t.eq(field_rules(err), { "model_location:pattern" })
    _, err = dispatch.call("inference_deploy_managed", managed { routing_strategy = "random" }, ADMIN)
    t.eq(field_rules(err), { "routing_strategy:enum" })
    _, err = dispatch.call("inference_deploy_managed", managed { image = "vLLM/vllm openai:latest" }, ADMIN)
    t.eq(field_rules(err), { "image:pattern" }, "an invalid image reference")
    _, err = dispatch.call("inference_deploy_managed", managed { max_replicas = 3, min_replicas = 4 }, ADMIN)
    t.eq(field_rules(err), { "min_replicas:maximum" })
    _, err = dispatch.call("inference_deploy_managed", managed { max_replicas = 3, prometheus_query = "sum(x)" }, ADMIN)
    t.eq(field_rules(err), { "prometheus_target:required" })
  end)

t.test("with the operator, a type the cluster lacks or more GPUs than it has are refused before anything is created",
  function()
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "inference.sagemaker.aws.amazon.com" then assert(conn:create(resources.crd(row))) end
  end
  local m = FH.mark()
  local _, err = deploy("inference_deploy_managed", managed { instance_type = "ml.p5.48xlarge" })
  t.eq(field_rules(err), { "instance_type:exists" })
  t.like(err and err.message, "has no instance group of ml%.p5%.48xlarge %(its types: ml%.g5%.12xlarge%)")
  _, err = deploy("inference_deploy_managed", managed { namespace = "serving" })
  t.eq(field_rules(err), { "namespace:exists" })
  _, err = deploy("inference_deploy_managed", managed { gpus = 8 })
  t.eq(field_rules(err), { "gpus:fits" })
  t.like(err and err.message, "8 GPUs per replica can never be scheduled: an ml%.g5%.12xlarge has 4")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
  t.eq(#list("InferenceEndpointConfig"), 0)
end)

t.test("plan mode lists the InferenceEndpointConfig it would create and sends nothing", function()
  local m = FH.mark()
  local a = managed()
  a.plan = true
  local r, err = deploy("inference_deploy_managed", a)
  t.ok(r, err and err.message)
  local rows = {}
  for _, e in ipairs(r and r.plan or {}) do rows[#rows + 1] = e.action .. " " .. e.type .. " " .. e.name end
  t.eq(rows, { "create k8s:inferenceendpointconfig default/qwen" })
  t.eq(#FH.k8s_writes(m), 0)
  local _, total = FH.since(m)
  t.eq(total, 0, "no AWS mutation")
  t.eq(#list("InferenceEndpointConfig"), 0)
end)

t.test("deploy managed from S3 reaches DeploymentComplete with a Deployment and Service the object owns", function()
  local r, err = deploy("inference_deploy_managed", managed())
  t.ok(r, err and err.message)
  if not r then return end
  t.eq({ r.kind, r.name, r.state, r.replicas, r.object.action }, { "InferenceEndpointConfig", "qwen",
    "DeploymentComplete", 2, "created" })
  local iec = list("InferenceEndpointConfig")[1]
  local l = iec.metadata.labels
  t.eq({ l["app.kubernetes.io/managed-by"], l["hypd.io/inference"], l["hypd.io/inference-kind"] },
    { "hypd", "qwen", "managed" }, "the contract labels")
  local managers = {}
  for _, f in ipairs(iec.metadata.managedFields or {}) do managers[#managers + 1] = f.manager end
  t.like(table.concat(managers, ","), "hypd", "server-side apply by field manager hypd")
  local s = iec.spec
  t.eq(s.modelSourceConfig, { modelSourceType = "s3", modelLocation = "models/qwen2-5-7b",
    s3Storage = { bucketName = "models-infer-a", region = "us-west-2" } })
  t.eq(s.kvCacheSpec, { enableL1Cache = true, enableL2Cache = true, l2CacheSpec = { l2CacheBackend = "tieredstorage" } })
  t.eq(s.intelligentRoutingSpec, { enabled = true, routingStrategy = "prefixaware" })
  t.eq(s.worker.resources.requests["nvidia.com/gpu"], "1")
  t.eq(s.worker.modelInvocationPort.containerPort, 8000)
  local d = conn:get("apps/v1", "Deployment", "qwen", { namespace = "default" })
  local svc = conn:get("v1", "Service", "qwen", { namespace = "default" })
  t.ok(d and svc, "Deployment and Service qwen")
  if not (d and svc) then return end
  t.eq(d.metadata.ownerReferences[1].uid, iec.metadata.uid, "the Deployment is owned by the object")
  t.eq(svc.metadata.ownerReferences[1].uid, iec.metadata.uid, "the Service is owned by the object")
  t.eq(svc.spec.ports[1].name, "http")
  local pods = conn:list("v1", "Pod", { namespace = "default", labels = { ["hypd.io/inference"] = "qwen" } }) or {}
  t.eq(#pods, 2, "two pods with hypd's labels")
  local c = pods[1] and pods[1].spec.containers[1] or {}
  t.eq({ c.image, c.ports and c.ports[1].containerPort, (pods[1] or { metadata = { labels = {} } })
    .metadata.labels["hypd.io/inference-kind"] }, { "vllm/vllm-openai:v0.8.5", 8000, "managed" })
  t.eq(c.resources and c.resources.requests["nvidia.com/gpu"], "1", "the GPU request reaches the pod")
  t.eq((iec.status.endpoints or {}).sagemaker and iec.status.endpoints.sagemaker.state, "InService")
  local ep = call("sagemaker", "DescribeEndpoint", { EndpointName = "qwen-sm" })
  t.eq({ ep.EndpointStatus, ep.ProductionVariants[1].CurrentInstanceCount }, { "InService", 2 },
    "the SageMaker endpoint is registered")
end)

t.test("a repeated deploy makes no Kubernetes write", function()
  local m = FH.mark()
  local r, err = deploy("inference_deploy_managed", managed())
  t.ok(r, err and err.message)
  t.eq(r and r.object.action, "unchanged")
  t.eq(#FH.k8s_writes(m), 0)
end)

local PY = [==[
import boto3, json
c = boto3.client("sagemaker")
ids, tok = [], None
while True:
    kw = dict(HubName="SageMakerPublicHub", HubContentType="Model", MaxResults=5)
    if tok: kw["NextToken"] = tok
    r = c.list_hub_contents(**kw)
    ids += [s["HubContentName"] for s in r["HubContentSummaries"]]
    tok = r.get("NextToken")
    if not tok: break
llama = c.list_hub_contents(HubName="SageMakerPublicHub", HubContentType="Model", NameContains="llama-3-2")
d = c.describe_hub_content(HubName="SageMakerPublicHub", HubContentType="Model",
    HubContentName="meta-textgeneration-llama-3-2-1b-instruct")
doc = json.loads(d["HubContentDocument"])
v = c.list_hub_content_versions(HubName="SageMakerPublicHub", HubContentType="Model",
    HubContentName="meta-textgeneration-llama-3-2-1b-instruct")
try:
    c.describe_hub_content(HubName="SageMakerPublicHub", HubContentType="Model", HubContentName="no-such-model")
    missing = None
except c.exceptions.ResourceNotFound as e:
    missing = "ResourceNotFound"
print(json.dumps({"n": len(ids), "sorted": ids == sorted(ids),
  "llama": [s["HubContentName"] for s in llama["HubContentSummaries"]],
  "version": d["HubContentVersion"], "default": doc["DefaultInferenceInstanceType"], "gated": "HostingEulaUri" in doc,
  "versions": [s["HubContentVersion"] for s in v["HubContentSummaries"]], "missing": missing}))
]==]

t.test("a changed call updates the object in place and the operator follows it", function()
  local r, err = deploy("inference_deploy_managed", managed { replicas = 1 })
  t.ok(r, err and err.message)
  t.eq({ r and r.object.action, r and r.replicas }, { "changed", 1 })
  local d = conn:get("apps/v1", "Deployment", "qwen", { namespace = "default" })
  t.eq(d and d.spec.replicas, 1, "the Deployment follows spec.replicas")
  local ep = call("sagemaker", "DescribeEndpoint", { EndpointName = "qwen-sm" })
  t.eq(ep.ProductionVariants[1].DesiredInstanceCount, 1)
end)

t.test("an FSx model with autoscaling gets a KEDA ScaledObject on its Deployment", function()
  local a = managed { name = "mistral", model_source = "fsx", fsx_file_system_id = "fs-0123456789abcdef0",
    fsx_mount_name = "abcdefgh", model_location = "mistral-7b", replicas = 1, min_replicas = 1, max_replicas = 3,
    prometheus_query = "sum(rate(vllm:num_requests_waiting[1m]))", prometheus_target = 5,
    enable_l2_cache = false, l2_backend = "redis", l2_url = "redis://cache:6379" }
  a.s3_bucket = nil
  local _, err = dispatch.call("inference_deploy_managed", a, ADMIN)
  t.eq(field_rules(err), { "enable_l2_cache:required" })
  a.enable_l2_cache = true
  _, err = deploy("inference_deploy_managed", a)
  t.eq(field_rules(err), { "endpoint_name:exists" }, "a SageMaker endpoint name another deployment registered")
  t.like(err and err.message, "qwen%-sm is already registered by InferenceEndpointConfig default/qwen")
  a.endpoint_name = nil
  local r
  r, err = deploy("inference_deploy_managed", a)
  t.ok(r, err and err.message)
  if not r then return end
  t.eq(r.state, "DeploymentComplete")
  local iec = conn:get(API, "InferenceEndpointConfig", "mistral", { namespace = "default" })
  t.eq(iec.spec.modelSourceConfig, { modelSourceType = "fsx", modelLocation = "mistral-7b",
    fsxStorage = { fileSystemId = "fs-0123456789abcdef0", mountName = "abcdefgh" } })
  t.eq(iec.spec.kvCacheSpec.l2CacheSpec, { l2CacheBackend = "redis", l2CacheLocalUrl = "redis://cache:6379" })
  t.eq({ iec.spec.autoScalingSpec.minReplicaCount, iec.spec.autoScalingSpec.maxReplicaCount,
    iec.spec.autoScalingSpec.prometheusTrigger.targetValue }, { 1, 3, 5 })
  local so = conn:get("keda.sh/v1alpha1", "ScaledObject", "mistral-scaled-object", { namespace = "default" })
  t.ok(so, "a ScaledObject")
  if so then
    t.eq(so.spec.scaleTargetRef.name, "mistral")
    t.eq({ so.spec.minReplicaCount, so.spec.maxReplicaCount, so.spec.triggers[1].type }, { 1, 3, "prometheus" })
    t.eq(so.metadata.ownerReferences[1].uid, iec.metadata.uid)
  end
  t.eq(iec.status.endpoints, nil, "no SageMaker endpoint without endpoint_name")
end)

t.test("a deployment that cannot complete within max_deploy_seconds fails with the operator's reason", function()
  local a = managed { name = "big", gpus = 4, replicas = 4, max_deploy_seconds = 600 }
  a.endpoint_name, a.enable_l2_cache, a.l2_backend, a.routing_strategy = nil, nil, nil, nil
  local r, err = deploy("inference_deploy_managed", a)
  t.eq(r, nil)
  t.eq(err and err.code, "STATE")
  t.like(err and err.message or "", "InferenceEndpointConfig default/big failed to deploy: Deployment big did not " ..
    "complete in 600 seconds %(maxDeployTimeInSeconds%): %d of 4 replicas available")
  local o = conn:get(API, "InferenceEndpointConfig", "big", { namespace = "default" })
  t.eq({ o.status.state, o.status.conditions[#o.status.conditions].reason }, { "DeploymentFailed", "DeploymentTimedOut" })
  assert(conn:delete(API, "InferenceEndpointConfig", "big", { namespace = "default" }))
  FH.wait(function()
    return #(conn:list("v1", "Pod", { namespace = "default", labels = { ["hypd.io/inference"] = "big" } }) or {}) == 0
  end)
end)

t.test("a JumpStartModel applied by hand with a type its model does not support is DeploymentFailed", function()
  assert(conn:apply({ apiVersion = API, kind = "JumpStartModel", metadata = { name = "by-hand", namespace = "default" },
    spec = { model = { modelId = "huggingface-llm-qwen2-5-72b-instruct", acceptEula = false },
      server = { instanceType = "ml.g5.12xlarge" } } }, { field_manager = "kubectl" }))
  local o
  FH.wait(function()
    o = conn:get(API, "JumpStartModel", "by-hand", { namespace = "default" })
    return ((o or {}).status or {}).state == "DeploymentFailed"
  end)
  local last = o.status.conditions[#o.status.conditions]
  t.eq({ last.type, last.reason }, { "DeploymentFailed", "UnsupportedInstanceType" })
  t.like(last.message, "supported: ml%.g5%.48xlarge")
  t.eq(conn:get("apps/v1", "Deployment", "by-hand", { namespace = "default" }), nil, "nothing runs")
  assert(conn:delete(API, "JumpStartModel", "by-hand", { namespace = "default" }))
end)

t.test("the public hub answers boto3 and the aws CLI with botocore's shapes: paging, filters, versions, documents",
  function()
    if H.sh("python3 -c 'import boto3' 2>/dev/null") ~= 0 then return t.skip("no boto3 in python3") end
    local dir = H.tmpdir()
    local env, pid = H.sandbox_process(dir, "--virtual-clock")
    t.cleanup(function() if pid then os.execute("kill " .. pid .. " 2>/dev/null") end end)
    t.ok(env, "a sandbox process")
    if not env then return end
    H.write(dir .. "/hub.py", PY)
    local rc, out, errs = H.with_env(env, dir, "python3 " .. H.quote(dir .. "/hub.py"))
    t.eq(rc, 0, errs)
    local r = rc == 0 and json.decode(out) or nil
    if r then
      t.eq(r.n, 12, "a dozen models over three pages")
      t.eq(r.sorted, true)
      t.eq(r.llama, { "meta-textgeneration-llama-3-2-1b-instruct" })
      t.eq({ r.version, r.default, r.gated }, { "1.3.1", "ml.g6.xlarge", true })
      t.eq(r.versions, { "1.0.0", "1.1.0", "1.2.0", "1.3.1" })
      t.eq(r.missing, "ResourceNotFound")
    end
    if H.sh("command -v aws") ~= 0 then return t.skip("no aws CLI") end
    rc, out, errs = H.with_env(env, dir, "aws sagemaker list-hub-contents --hub-name SageMakerPublicHub " ..
      "--hub-content-type Model --name-contains qwen --query 'HubContentSummaries[].HubContentName' --output text")
    t.eq(rc, 0, errs)
    t.eq(out and (out:gsub("%s+$", "")), "deepseek-llm-r1-distill-qwen-1-5b\thuggingface-llm-qwen2-5-72b-instruct\t" ..
      "huggingface-llm-qwen2-5-7b-instruct\t" ..
      "huggingface-llm-qwen3-8b")
  end)

t.test("inference_list_jumpstart_models filters by name and task, pages, and shows instance types", function()
  local r = assert(dispatch.call("inference_list_jumpstart_models", { task = "text-generation", max_results = 4 }, ADMIN))
  t.eq(#r.models, 4)
  t.eq(r.total, 10, "ten text-generation models")
  t.eq(r.next_token, "4")
  local ids = {}
  for _, m in ipairs(r.models) do ids[#ids + 1] = m.id end
  local r2 = assert(dispatch.call("inference_list_jumpstart_models", { task = "text-generation", max_results = 4,
    next_token = r.next_token }, ADMIN))
  t.eq(#r2.models, 4)
  t.ok(r2.models[1].id > ids[4], "the next page follows")
  local q = assert(dispatch.call("inference_list_jumpstart_models", { name_contains = "qwen2-5-7b" }, ADMIN))
  t.eq(#q.models, 1)
  local m = q.models[1] or {}
  t.eq({ m.id, m.version, m.display_name, m.task, m.recommended_instance_type, m.gated },
    { "huggingface-llm-qwen2-5-7b-instruct", "1.2.3", "Qwen2.5 7B Instruct", "text-generation", "ml.g5.2xlarge", false })
  t.ok(#(m.supported_instance_types or {}) > 5, "supported instance types")
end)

t.test("deploy JumpStart: unknown model, version, unsupported instance type and EULA are refused naming the field",
  function()
    local m = FH.mark()
    local base = { name = "llama", model_id = "meta-textgeneration-llama-3-2-1b-instruct",
      instance_type = "ml.g5.12xlarge", accept_eula = true }
    local function with(k, v)
      local a = {}
      for x, y in pairs(base) do a[x] = y end
      a[k] = v
      return a
    end
    local _, err = deploy("inference_deploy_jumpstart", with("model_id", "meta-textgeneration-llama-9"))
    t.eq(field_rules(err), { "model_id:exists" })
    t.like(err and err.message, "inference_list_jumpstart_models")
    _, err = deploy("inference_deploy_jumpstart", with("model_version", "9.9.9"))
    t.eq(field_rules(err), { "model_version:exists" })
    t.like(err and err.message, "versions: 1%.0%.0, 1%.1%.0, 1%.2%.0, 1%.3%.1")
    _, err = deploy("inference_deploy_jumpstart", { name = "qwen72", model_id = "huggingface-llm-qwen2-5-72b-instruct",
      instance_type = "ml.g5.12xlarge" })
    t.eq(field_rules(err), { "instance_type:supported" })
    t.like(err and err.message, "it supports: ml%.g5%.48xlarge, ml%.g6e%.48xlarge, ml%.p4d%.24xlarge, ml%.p5%.48xlarge")
    _, err = deploy("inference_deploy_jumpstart", with("accept_eula", false))
    t.eq(field_rules(err), { "accept_eula:required" })
    _, err = deploy("inference_deploy_jumpstart", with("instance_type", "ml.g5.2xlarge"))
    t.eq(field_rules(err), { "instance_type:exists" }, "supported by the model but not in the cluster")
    t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
    t.eq(#list("JumpStartModel"), 0)
  end)

t.test("deploy JumpStart pins the newest version, runs the hub's image on every GPU and registers the endpoint",
  function()
    local args = { name = "llama", model_id = "meta-textgeneration-llama-3-2-1b-instruct",
      instance_type = "ml.g5.12xlarge", accept_eula = true, endpoint_name = "llama-sm" }
    local r, err = deploy("inference_deploy_jumpstart", args)
    t.ok(r, err and err.message)
    if not r then return end
    t.eq({ r.kind, r.state, r.model_version, r.replicas }, { "JumpStartModel", "DeploymentComplete", "1.3.1", 1 })
    local j = list("JumpStartModel")[1]
    t.eq(j.spec.model, { acceptEula = true, modelHubName = "SageMakerPublicHub",
      modelId = "meta-textgeneration-llama-3-2-1b-instruct", modelVersion = "1.3.1" })
    t.eq(j.spec.server, { instanceType = "ml.g5.12xlarge" })
    t.eq(j.spec.sageMakerEndpoint, { name = "llama-sm" })
    t.eq(j.metadata.labels["hypd.io/inference-kind"], "jumpstart")
    local pods = conn:list("v1", "Pod", { namespace = "default", labels = { ["hypd.io/inference"] = "llama" } }) or {}
    t.eq(#pods, 1)
    local c = pods[1] and pods[1].spec.containers[1] or {}
    t.like(c.image or "", "^763104351884%.dkr%.ecr%.us%-west%-2%.amazonaws%.com/djl%-inference:")
    t.eq(c.resources and c.resources.requests["nvidia.com/gpu"], "4")
    t.eq(j.status.conditions[#j.status.conditions].type, "DeploymentComplete", "the newest condition last")
    local ep = call("sagemaker", "DescribeEndpoint", { EndpointName = "llama-sm" })
    t.eq(ep.EndpointStatus, "InService")
    local m = FH.mark()
    r, err = deploy("inference_deploy_jumpstart", args)
    t.eq(r and r.object.action, "unchanged", err and err.message)
    t.eq(#FH.k8s_writes(m), 0, "a repeated call makes no write")
  end)

t.test("SageMaker Runtime InvokeEndpoint reaches a ready pod's model server, or fails with ModelError", function()
  local A = require "sandbox.k8s.controllers._aws"
  local body = json.encode { inputs = "Hello", parameters = { max_new_tokens = 8 } }
  local _, err = A.call("us-west-2", "sagemaker-runtime", "InvokeEndpoint", { EndpointName = "llama-sm", Body = body })
  t.eq({ err and err.code, err and err.status }, { "ModelError", 424 },
    "the model server is still loading: " .. tostring(err and err.message))
  t.eq(err and err.fields and err.fields.OriginalStatusCode, 502)
  t.like(err and err.message or "", "Received server error %(502%) from primary with message \"pod llama%-.*connection refused")
  -- a model server as a simulated program would be (sandbox.k8s.programs)
  local programs = require "sandbox.k8s.programs"
  package.preload["sandbox.k8s.programs.test_lmi"] = function()
    return { match = function(_, c) return (c.image or ""):find("/djl%-inference:") ~= nil end,
      http = function(env, req)
        return { status = 200, headers = { ["content-type"] = "application/json" },
          body = json.encode { generated_text = "Hi there", path = req.path, port = req.port,
            pod = env.pod.metadata.name, asked = json.decode(req.body).inputs } }
      end }
  end
  table.insert(programs.NAMES, 1, "test_lmi")
  local out
  out, err = A.call("us-west-2", "sagemaker-runtime", "InvokeEndpoint", { EndpointName = "llama-sm", Body = body,
    ContentType = "application/json" })
  t.ok(out, err and err.message)
  local a = out and json.decode(out.Body) or {}
  t.eq({ a.generated_text, a.path, a.port, a.asked }, { "Hi there", "/invocations", 8080, "Hello" })
  t.like(a.pod or "", "^llama%-")
  t.eq(out and out.InvokedProductionVariant, "AllTraffic")
  _, err = A.call("us-west-2", "sagemaker-runtime", "InvokeEndpoint", { EndpointName = "nope", Body = body })
  t.eq(err and err.code, "ValidationError")
  t.like(err and err.message or "", "Endpoint nope of account %d+ not found")
  -- the LMI container's own simulated server, once its model is loaded
  table.remove(programs.NAMES, 1)
  FH.wait(function()
    out = A.call("us-west-2", "sagemaker-runtime", "InvokeEndpoint", { EndpointName = "llama-sm", Body = body,
      ContentType = "application/json" })
    return out ~= nil
  end, 120, 5)
  a = json.decode(out.Body) or {}
  a = a[1] or a -- a list of generations, as TGI and LMI answer
  t.ok(type(a.generated_text) == "string" and #a.generated_text > 0, "the loaded server generates text: " .. out.Body)
end)

t.test("deleting the object takes its Deployment, Service and SageMaker endpoint with it", function()
  assert(conn:delete(API, "JumpStartModel", "llama", { namespace = "default" }))
  FH.wait(function()
    local d = conn:get("apps/v1", "Deployment", "llama", { namespace = "default" })
    local ok = pcall(call, "sagemaker", "DescribeEndpoint", { EndpointName = "llama-sm" })
    return d == nil and not ok
  end)
  t.eq(conn:get("v1", "Service", "llama", { namespace = "default" }), nil)
end)

