-- The inference parts of issue 14 across their owners, against the
-- in-process sandbox under the virtual clock (an EKS cluster with a
-- HyperPod group of three ml.g5.12xlarge nodes and the inference
-- operator's CRDs): inference_call_model reaches an InferenceEndpointConfig
-- deployed by inference_deploy_managed (a vLLM image) and a JumpStartModel
-- deployed by inference_deploy_jumpstart (the hub's LMI image) through the
-- Deployment and Service the sandbox's operator makes; the JumpStart's
-- SageMaker endpoints answer InvokeEndpoint (the managed one on its
-- invocationEndpoint and port, the JumpStart one once its model loaded);
-- inference_list shows each managed deployment once (not also the
-- Deployment it owns); inference_scale changes the custom resource's
-- replicas and the operator follows; inference_set_autoscaling on a
-- managed deployment refuses, naming the operator's own autoscaling;
-- inference_delete removes the custom resource and what it owns.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local _, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local dispatch = require "hypd.tool.dispatch"
local json, op = require "hypd.json", require "hypd.tool.operations"
local ADMIN = { name = "cross-tester", scope = "admin", front = "test" }
local EKS = "cross-a"
local API = "inference.sagemaker.aws.amazon.com/v1"
local conn

local function run(name, args)
  args.cluster = args.cluster or EKS
  local acc, err = dispatch.call(name, args, ADMIN)
  if not acc then return nil, err end
  if not acc.operation_id then return acc end
  local v = op.wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error, v end
  return v.result, nil, v
end

local function read(name, args)
  args.cluster = args.cluster or EKS
  return dispatch.call(name, args, ADMIN)
end

-- answered(name) -> inference_call_model's answer once the server has loaded its model
local function answered(name, args)
  local r, err
  FH.wait(function()
    local a = { name = name, prompt = "Name a prime number.", max_tokens = 16 }
    for k, v in pairs(args or {}) do a[k] = v end
    r, err = read("inference_call_model", a)
    return r ~= nil or not tostring(err and err.message):find("does not answer", 1, true)
  end, 600, 10)
  return r, err
end

-- ready_answer(r, err, name) -> the call_model answer ({} when none) of a deploy that completed
local function ready_answer(r, err, name)
  t.ok(r, json.encode(err))
  t.eq(r and r.state, "DeploymentComplete")
  local a, e = answered(name)
  t.ok(a, "an answer: " .. json.encode(e))
  return a or {}
end

t.test("a cluster: EKS, three ml.g5.12xlarge HyperPod nodes and the inference operator's CRDs", function()
  conn = FH.gpu_cluster(call, EKS, EKS .. "-hp", 87, 3)
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "inference.sagemaker.aws.amazon.com" then assert(conn:create(resources.crd(row))) end
  end
  t.ok(conn, "the cluster")
end)

t.test("inference_call_model answers through an InferenceEndpointConfig's Deployment and Service (vLLM image)",
  function()
    local r, err = run("inference_deploy_managed", { name = "qwen", model_source = "s3", s3_bucket = "models-cross",
      model_location = "models/Qwen--Qwen2.5-0.5B-Instruct", instance_type = "ml.g5.12xlarge", replicas = 1,
      image = "vllm/vllm-openai:v0.8.5", args = { "--model", "/opt/ml/model", "--port", "8000",
        "--served-model-name", "qwen" }, port = 8000, gpus = 1, endpoint_name = "qwen-sm" })
    local a = ready_answer(r, err, "qwen")
    t.eq({ a.model, a.service, a.port, a.deployment }, { "qwen", "qwen", 8000, "qwen" })
    t.like(a.answer or "", "^Simulated answer from qwen")
    t.ok((a.latency_ms or 0) > 0 and a.usage and a.usage.completion_tokens <= 16, json.encode(a))
    t.like(a.pod or "", "^qwen%-")
    -- SageMaker Runtime posts to the resource's invocationEndpoint (v1/chat/completions) on its port
    local iec = conn:get(API, "InferenceEndpointConfig", "qwen", { namespace = "default" }) or { spec = {} }
    t.eq({ iec.spec.invocationEndpoint, iec.spec.worker and iec.spec.worker.modelInvocationPort.containerPort },
      { "v1/chat/completions", 8000 })
    local A = require "sandbox.k8s.controllers._aws"
    local out, e2 = A.call("us-west-2", "sagemaker-runtime", "InvokeEndpoint", { EndpointName = "qwen-sm",
      ContentType = "application/json", Body = json.encode { model = "qwen", max_tokens = 8,
        messages = { { role = "user", content = "Hello" } } } })
    t.ok(out, json.encode(e2))
    local b = json.decode(out and out.Body or "null") or {}
    t.like(b.choices and b.choices[1].message.content or "", "^Simulated answer from qwen", tostring(out and out.Body))
  end)

t.test("inference_call_model answers through a JumpStartModel's Deployment and Service (the hub's LMI image); " ..
  "InvokeEndpoint on its SageMaker endpoint answers once the model has loaded", function()
  local r, err = run("inference_deploy_jumpstart", { name = "llama", model_id = "meta-textgeneration-llama-3-2-1b-instruct",
    instance_type = "ml.g5.12xlarge", accept_eula = true, endpoint_name = "llama-sm" })
  local a = ready_answer(r, err, "llama")
  t.ok(type(a.answer) == "string" and #a.answer > 0, json.encode(a))
  t.like(a.pod or "", "^llama%-")
  -- SageMaker Runtime, as an in-cluster client dials it
  local A = require "sandbox.k8s.controllers._aws"
  local out
  FH.wait(function()
    out = A.call("us-west-2", "sagemaker-runtime", "InvokeEndpoint", { EndpointName = "llama-sm",
      Body = json.encode { inputs = "Hello", parameters = { max_new_tokens = 8 } }, ContentType = "application/json" })
    return out ~= nil
  end, 600, 10)
  local g = json.decode(out and out.Body or "null") or {}
  g = g[1] or g
  t.ok(type(g.generated_text) == "string" and #g.generated_text > 0, "InvokeEndpoint generates: " ..
    tostring(out and out.Body))
end)

t.test("inference_list shows each managed deployment once, not also the Deployment it owns", function()
  local l = assert(read("inference_list", {}))
  local rows = {}
  for _, d in ipairs(l.deployments or l.items or {}) do rows[#rows + 1] = d.name .. ":" .. d.kind end
  table.sort(rows)
  t.eq(rows, { "llama:jumpstart", "qwen:managed" }, json.encode(l))
end)

t.test("inference_scale on the managed deployment changes the custom resource's replicas; the operator follows",
  function()
    local r, err = run("inference_scale", { name = "qwen", replicas = 2 })
    t.ok(r, json.encode(err))
    local iec = conn:get(API, "InferenceEndpointConfig", "qwen", { namespace = "default" })
    t.eq(iec and iec.spec.replicas, 2, "the custom resource's replicas")
    FH.wait(function()
      local d = conn:get("apps/v1", "Deployment", "qwen", { namespace = "default" })
      return d and d.spec.replicas == 2 and (d.status or {}).readyReplicas == 2
    end, 600, 10)
    local g = assert(read("inference_get", { name = "qwen" }))
    t.eq(g.replicas and { g.replicas.desired, g.replicas.ready }, { 2, 2 }, json.encode(g.replicas))
  end)

t.test("inference_set_autoscaling on a managed deployment refuses, naming the operator's own autoscaling", function()
  local m = FH.mark()
  local r, err = run("inference_set_autoscaling", { name = "qwen", min_replicas = 1, max_replicas = 3,
    query = "sum(vllm:num_requests_waiting)", threshold = 5 })
  t.eq(r, nil, "refused")
  t.eq(H.field_rules(err), { "name:operator_managed" }, json.encode(err))
  t.like(err and err.message or "", "belongs to InferenceEndpointConfig qwen: the HyperPod inference operator sets " ..
    "its replicas")
  t.like(err and err.message or "", "inference_deploy_managed name=qwen again with min_replicas, max_replicas and " ..
    "prometheus_query")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
  t.eq(#(conn:list("keda.sh/v1alpha1", "ScaledObject", { namespace = "default" }) or {}), 0, "no ScaledObject")
end)

t.test("inference_delete removes the custom resource with its Deployment, Service and endpoint", function()
  local r, err = run("inference_delete", { name = "llama" })
  t.ok(r, json.encode(err))
  FH.wait(function()
    return not conn:get(API, "JumpStartModel", "llama", { namespace = "default" })
      and not conn:get("apps/v1", "Deployment", "llama", { namespace = "default" })
      and not conn:get("v1", "Service", "llama", { namespace = "default" })
      and not require("hypd.aws").try("sagemaker", "DescribeEndpoint", { EndpointName = "llama-sm" }, OPTS)
  end, 600, 10)
  t.eq(conn:get(API, "JumpStartModel", "llama", { namespace = "default" }), nil)
  t.eq(conn:get("apps/v1", "Deployment", "llama", { namespace = "default" }), nil)
  local _, e2 = require("hypd.aws").try("sagemaker", "DescribeEndpoint", { EndpointName = "llama-sm" }, OPTS)
  t.eq(e2 and e2.code, "ValidationException", "the SageMaker endpoint is gone")
  local l = assert(read("inference_list", {}))
  local rows = {}
  for _, d in ipairs(l.deployments or l.items or {}) do rows[#rows + 1] = d.name end
  t.eq(rows, { "qwen" })
end)
