-- The serving path (issue 14): the API server's service and pod proxy in
-- the sandbox reaching simulated model servers (vLLM, SGLang and the SGLang
-- router), inference_call_model through it with hypd's client,
-- inference_deploy_router and inference_set_autoscaling. A `hypd sandbox
-- --virtual-clock` process with a HyperPod-ready EKS cluster (two
-- ml.g5.12xlarge nodes), judged by kubectl (get --raw through the proxy)
-- and by the tools called in this process.
local t = require "hypd.tap"
local json = require "hypd.json"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local H, kubectl = S.H, S.kubectl
local until_ok, skip = S.until_ok, S.skip
local tool, op = require "hypd.tool", require "hypd.op"
require("hypd.tools").load()
local ADMIN = { name = "serving-tester", scope = "admin", front = "test" }
local READER = { name = "serving-reader", scope = "read", front = "test" }
local EKS = "serve-eks"
local conn

local function call(name, args, who)
  args.cluster = args.cluster or EKS
  return tool.call(name, args, who or ADMIN)
end

local function staged(name, args)
  local acc, err = call(name, args)
  if not acc then return nil, err end
  if args.plan then return acc end
  local v = op.wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error, v end
  return v.result, nil, v
end

local function labels(name, extra)
  local l = { app = name, ["app.kubernetes.io/managed-by"] = "hypd", ["hypd.io/inference"] = name,
    ["hypd.io/inference-kind"] = "container" }
  for k, v in pairs(extra or {}) do l[k] = v end
  return l
end

-- deployment(name, container [, replicas, extra labels]) -> a Deployment of one container
local function deployment(name, c, replicas, extra)
  c.name = c.name or "server"
  c.resources = c.resources or { requests = { ["nvidia.com/gpu"] = "1" }, limits = { ["nvidia.com/gpu"] = "1" } }
  return { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = name, namespace = "default", labels = labels(name, extra) },
    spec = { replicas = replicas or 1, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = labels(name, extra) }, spec = { containers = { c } } } } }
end

local function service(name, port, target, selector)
  return { apiVersion = "v1", kind = "Service", metadata = { name = name, namespace = "default", labels = labels(name) },
    spec = { selector = selector or { app = name }, ports = { { name = "http", port = port, targetPort = target or port,
      protocol = "TCP" } } } }
end

local function ready(name, n)
  return until_ok(function()
    local d = conn:get("apps/v1", "Deployment", name, { namespace = "default" })
    return d and ((d.status or {}).readyReplicas or 0) >= (n or 1) and d
  end, 300)
end

-- answered(fn) -> fn's answer once the model server listens (it loads its model first)
local function answered(fn)
  return until_ok(function()
    local r, err = fn()
    if r then return r end
    if err and not tostring(err.message):find("connection refused", 1, true) then return { err = err } end
  end, 300)
end

t.test("a sandbox with a HyperPod-ready EKS cluster, and hypd's client on it", function()
  S.start(EKS, "serve-hp")
  conn = S.conn
end)

local VLLM = { image = "vllm/vllm-openai:v0.9.2", args = { "--model", "Qwen/Qwen2.5-7B-Instruct", "--port", "8000",
  "--served-model-name", "qwen-7b" }, ports = { { name = "http", containerPort = 8000 } } }

t.test("a vLLM Deployment and Service made directly answer kubectl get --raw through the service proxy", function()
  if not S.ready then return skip() end
  assert(conn:apply(deployment("qwen", VLLM)))
  assert(conn:apply(service("qwen", 8000)))
  t.ok(ready("qwen"), "the deployment is ready")
  local rc, out, err = answered(function()
    local rc, out, err = kubectl("get --raw /api/v1/namespaces/default/services/qwen:8000/proxy/v1/models")
    if rc == 0 then return { rc, out, err } end
    return nil, { message = err }
  end)
  rc, out, err = table.unpack(rc)
  t.eq(rc, 0, err)
  local models = json.decode(out or "") or {}
  t.eq(models.data and models.data[1].id, "qwen-7b", "the served model name")
  rc, out, err = kubectl("get --raw /api/v1/namespaces/default/services/http:qwen:http/proxy/health")
  t.eq({ rc, out }, { 0, "" }, err)
  rc, out = kubectl("get --raw /api/v1/namespaces/default/services/qwen:8000/proxy/metrics")
  t.eq(rc, 0)
  t.like(out, "vllm:num_requests_running{model_name=\"qwen%-7b\"} 0")
  -- the pod proxy, by the pod's name and port
  local pod = conn:list("v1", "Pod", { namespace = "default", labels = { app = "qwen" } })[1]
  rc, out, err = kubectl("get --raw /api/v1/namespaces/default/pods/" .. pod.metadata.name .. ":8000/proxy/v1/models")
  t.eq(rc, 0, err)
  t.like(out, '"id":"qwen%-7b"')
  rc, _, err = kubectl("get --raw /api/v1/namespaces/default/pods/" .. pod.metadata.name .. ":9999/proxy/v1/models")
  t.ok(rc ~= 0)
  t.like(err, "Error from server %(ServiceUnavailable%): error trying to reach service: dial tcp " ..
    pod.status.podIP:gsub("%.", "%%.") .. ":9999: connect: connection refused")
  -- the subresources are in discovery
  rc, out = kubectl("api-resources --api-group= -o name")
  t.eq(rc, 0)
  t.like(out, "services\n")
  rc, out = kubectl("get --raw /api/v1")
  t.like(out, '"name":"services/proxy"')
  t.like(out, '"name":"pods/proxy"')
end)
