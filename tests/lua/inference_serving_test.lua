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

t.test("inference_call_model answers through the service proxy: text, usage, latency, the pod; a read tool", function()
  if not S.ready then return skip() end
  local r, err = call("inference_call_model", { name = "qwen", prompt = "What is the capital of France?",
    max_tokens = 64 }, READER)
  t.ok(r, err and err.message)
  if not r then return end
  t.like(r.answer, "^Simulated answer from qwen%-7b to \"What is the capital of France%?\"")
  t.eq(r.model, "qwen-7b", "the model from /v1/models")
  t.eq({ r.service, r.port, r.deployment, r.namespace }, { "qwen", 8000, "qwen", "default" })
  t.ok(r.usage.prompt_tokens > 7 and r.usage.completion_tokens > 0, json.encode(r.usage))
  t.eq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
  t.ok(math.type(r.latency_ms) == "integer" and r.latency_ms >= 0, "latency_ms " .. tostring(r.latency_ms))
  t.like(r.pod, "^qwen%-", "the only ready pod answered")
  local again = assert(call("inference_call_model", { name = "qwen", prompt = "What is the capital of France?",
    max_tokens = 64 }, READER))
  t.eq(again.answer, r.answer, "the same prompt gets the same answer")
  local other = assert(call("inference_call_model", { name = "qwen", messages = {
    { role = "system", content = "You are terse." }, { role = "user", content = "Name a prime number." } },
    max_tokens = 5, model = "qwen-7b" }))
  t.ok(other.answer ~= r.answer, "another prompt, another answer")
  t.eq({ other.finish_reason, other.usage.completion_tokens }, { "length", 5 }, "max_tokens caps the answer")
  local logs = conn:logs(r.pod, { namespace = "default" })
  t.like(logs, '"POST /v1/chat/completions HTTP/1%.1" 200 OK', "the engine logs the request")
  t.like(logs, "Received request " .. tostring(r.id):gsub("%-", "%%-"), "the request id in the log")
  local _, e2 = call("inference_call_model", { name = "qwen", prompt = "hi", model = "llama" })
  t.eq(e2 and e2.code, "FAILED")
  t.like(e2 and e2.message, "answered 404 to POST /v1/chat/completions: The model `llama` does not exist")
  local _, e3 = call("inference_call_model", { name = "qwen" })
  t.eq(H.field_rules(e3), { "messages:one_of" }, "messages or prompt is required")
  local _, e4 = call("inference_call_model", { name = "nope", prompt = "hi" })
  t.eq(e4 and e4.code, "NOT_FOUND")
  local def = tool.get("inference_call_model")
  t.eq({ def.kind, table.concat(def.k8s, ",") }, { "read", "get,list,logs,proxy" })
end)

t.test("no ready endpoints: the proxy answers the API server's 503, and inference_call_model names the state", function()
  if not S.ready then return skip() end
  -- more GPUs than any node has: the pod stays Pending, the Service has no endpoints
  local big = deployment("huge", { image = "vllm/vllm-openai:v0.9.2", args = { "--model", "meta-llama/Llama-3.1-405B" },
    ports = { { name = "http", containerPort = 8000 } },
    resources = { requests = { ["nvidia.com/gpu"] = "8" }, limits = { ["nvidia.com/gpu"] = "8" } } })
  assert(conn:apply(big))
  assert(conn:apply(service("huge", 8000)))
  until_ok(function() return conn:get("v1", "Endpoints", "huge", { namespace = "default" }) end)
  local rc, _, err = kubectl("get --raw /api/v1/namespaces/default/services/huge:8000/proxy/v1/models")
  t.ok(rc ~= 0)
  t.eq(err, 'Error from server (ServiceUnavailable): no endpoints available for service "huge"\n')
  rc, _, err = kubectl("get --raw /api/v1/namespaces/default/services/huge:9000/proxy/v1/models")
  t.eq(err, 'Error from server (ServiceUnavailable): no service port 9000 found for service "huge"\n')
  rc, _, err = kubectl("get --raw /api/v1/namespaces/default/services/absent:8000/proxy/v1/models")
  t.eq(err, 'Error from server (NotFound): services "absent" not found\n')
  local _, e = call("inference_call_model", { name = "huge", prompt = "hi" })
  t.eq(e and e.code, "STATE")
  t.like(e and e.message, "Service default/huge has no ready endpoint: deployment huge has 0/1 replicas ready; " ..
    "pod huge%-[%w-]+: Pending %(Unschedulable: ")
  t.like(e and e.message, 'no endpoints available for service "huge"')
  t.like(e and e.message, "inference_get name=huge")
  -- a Service whose targetPort nothing listens on: connection refused
  assert(conn:apply(service("qwen-wrong", 8000, 8080, { app = "qwen" })))
  until_ok(function()
    local ep = conn:get("v1", "Endpoints", "qwen-wrong", { namespace = "default" })
    return ep and ep.subsets
  end)
  rc, _, err = kubectl("get --raw /api/v1/namespaces/default/services/qwen-wrong:8000/proxy/v1/models")
  t.like(err, "^Error from server %(ServiceUnavailable%): error trying to reach service: dial tcp [%d.]+:8080: " ..
    "connect: connection refused")
  assert(conn:delete("v1", "Service", "qwen-wrong", { namespace = "default" }))
  assert(conn:delete("apps/v1", "Deployment", "huge", { namespace = "default" }))
  assert(conn:delete("v1", "Service", "huge", { namespace = "default" }))
end)
