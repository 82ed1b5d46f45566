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
local dispatch = require "hypd.tool.dispatch"
local tool, op = require "hypd.tool.registry", require "hypd.tool.operations"
require("hypd.tool.loader").load()
local ADMIN = { name = "serving-tester", scope = "admin", front = "test" }
local READER = { name = "serving-reader", scope = "read", front = "test" }
local EKS = "serve-eks"
local conn

local function call(name, args, who)
  args.cluster = args.cluster or EKS
  return dispatch.call(name, args, who or ADMIN)
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

t.test("the model server program matches what real serving containers run, and nothing else", function()
  local ms = require "sandbox.k8s.programs.model_server"
  local function cfg(c) local x = ms.config(c) return x and { x.kind, x.port, x.model } or false end
  t.eq(cfg { image = "vllm/vllm-openai:v0.9.2", args = { "--model", "Qwen/Qwen2.5-7B-Instruct" } },
    { "vllm", 8000, "Qwen/Qwen2.5-7B-Instruct" }, "the vLLM image's entrypoint, args only")
  t.eq(cfg { image = "python:3.12", command = { "sh", "-c", "pip install vllm && vllm serve meta-llama/Llama-3.2-1B " ..
    "--port 8080" } }, { "vllm", 8080, "meta-llama/Llama-3.2-1B" }, "vllm serve MODEL in a shell")
  t.eq(cfg { image = "img", command = { "python", "-m", "vllm.entrypoints.openai.api_server", "--model=/s3/m",
    "--served-model-name", "m1", "m2" } }, { "vllm", 8000, "m1" }, "--served-model-name wins")
  t.eq(cfg { image = "lmsysorg/sglang:latest", command = { "python3", "-m", "sglang.launch_server",
    "--model-path", "Qwen/Qwen3-8B" } }, { "sglang", 30000, "Qwen/Qwen3-8B" })
  t.eq(cfg { image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/huggingface-pytorch-tgi-inference:2.4.0-tgi2.3.1",
    env = { { name = "HF_MODEL_ID", value = "google/gemma-2b" } } }, { "tgi", 8080, "google/gemma-2b" })
  t.eq(cfg { image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.32.0-lmi14.0.0-cu124",
    env = { { name = "HF_MODEL_ID", value = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B" } } },
    { "lmi", 8080, "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B" })
  t.eq(cfg { image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/tei:2.0.1-tei1.4.0-gpu-py310-cu122-ubuntu22.04",
    env = { { name = "HF_MODEL_ID", value = "/opt/ml/model" } }, ports = { { containerPort = 8080 } } },
    { "tei", 8080, "/opt/ml/model" }, "SageMaker's embeddings container (JumpStart)")
  t.eq(cfg { image = "ghcr.io/huggingface/text-generation-inference:3.0", args = { "--model-id", "m/x" } },
    { "tgi", 80, "m/x" }, "TGI's own image listens on 80")
  t.eq(cfg { image = "myorg/llm:1", args = { "--model-id", "x/y" }, ports = { { containerPort = 9000 } } },
    { "openai", 9000, "x/y" }, "any OpenAI-style server that exposes a port and names a model")
  t.eq(cfg { image = "lmsysorg/sglang:latest", command = { "python3", "-m", "sglang_router.launch_router" } }, false,
    "the router is its own program")
  local r = require("sandbox.k8s.programs.sglang_router").config { image = "lmsysorg/sglang:latest",
    command = { "python3", "-m", "sglang_router.launch_router", "--policy", "round_robin", "--service-discovery",
      "--selector", "app=w", "tier=gpu" } }
  t.eq({ r.kind, r.port, r.policy, r.selector, r.sd_port }, { "router", 30000, "round_robin", { app = "w", tier = "gpu" },
    80 })
  t.eq(cfg { image = "nginx:1.27", ports = { { containerPort = 80 } } }, false)
  t.eq(cfg { image = "python:3.12", command = { "sh", "-c", "hf download Qwen/Qwen3-8B --local-dir /nvme/q" } }, false)
  t.eq(cfg { image = "modelscope/ms-swift:3", command = { "swift", "sft", "--model", "Qwen/Qwen3-8B" },
    ports = { { containerPort = 8080 } } }, false, "a training container that names a model is not a server")
  t.eq(cfg { image = "pytorch", command = { "torchrun", "train.py", "--model", "m" }, ports = { { containerPort = 8080 } } },
    false)
  local text, n, why = ms.compose("m", "hello there", 4)
  t.eq({ n, why }, { 4, "length" })
  t.eq(text, "Simulated answer from m")
  t.eq(select(1, ms.compose("m", "hello there")), select(1, ms.compose("m", "hello there")), "deterministic")
end)

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
  local got = answered(function()
    local code, text, why = kubectl("get --raw /api/v1/namespaces/default/services/qwen:8000/proxy/v1/models")
    if code == 0 then return { code, text, why } end
    return nil, { message = why }
  end)
  local rc, out, err = table.unpack(got)
  t.eq(rc, 0, err)
  local models = json.decode(out or "") or {}
  t.eq(models.data and models.data[1].id, "qwen-7b", "the served model name")
  rc, out, err = kubectl("get --raw /api/v1/namespaces/default/services/http:qwen:http/proxy/health")
  t.eq({ rc, out }, { 0, "" }, err)
  rc, out = kubectl("get --raw /api/v1/namespaces/default/services/qwen:8000/proxy/metrics")
  t.eq(rc, 0)
  t.like(out, "vllm:num_requests_running{model_name=\"qwen%-7b\"} 0")
  local _
  _, _, err = kubectl("get --raw /api/v1/namespaces/default/services/https:qwen:8000/proxy/v1/models")
  t.like(err, "error trying to reach service: tls: first record does not look like a TLS handshake",
    "https: to a plain HTTP server")
  _, _, err = kubectl("get --raw /api/v1/namespaces/default/services/a:b:c:d/proxy/")
  t.like(err, 'Error from server %(BadRequest%): invalid service request "a:b:c:d"')
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
  rc, out = kubectl("get --raw /api/v1")
  t.eq(rc, 0)
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
  t.ok(type(r.latency_ms) == "number" and r.latency_ms > 0, "latency_ms " .. tostring(r.latency_ms))
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

t.test("kubectl proxy and curl: a chat completion POSTed through the API server's service proxy", function()
  if not S.ready then return skip() end
  local dir = S.dir
  local out = dir .. "/kproxy.out"
  local p = io.popen(string.format("env -u AWS_SESSION_TOKEN -u AWS_PROFILE %s kubectl --kubeconfig %s proxy " ..
    "--port=0 >%s 2>&1 & echo $!", (function()
      local parts = {}
      for k, v in pairs(S.env) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
      return table.concat(parts, " ")
    end)(), H.quote(S.kc.kc), H.quote(out)))
  local pid = p:read("l")
  p:close()
  local port = until_ok(function() return (H.read(out) or ""):match("Starting to serve on 127%.0%.0%.1:(%d+)") end)
  t.ok(port, "kubectl proxy serves: " .. tostring(H.read(out)))
  if port then
    local body = json.encode { model = "qwen-7b", messages = { { role = "user", content = "Say hi" } }, max_tokens = 8 }
    local rc, text, err = H.sh(string.format("curl -s -X POST -H 'Content-Type: application/json' -d %s " ..
      "http://127.0.0.1:%s/api/v1/namespaces/default/services/qwen:8000/proxy/v1/chat/completions", H.quote(body), port))
    t.eq(rc, 0, err)
    local a = json.decode(text or "") or {}
    t.eq({ a.object, a.model, a.usage and a.usage.completion_tokens }, { "chat.completion", "qwen-7b", 8 }, text)
    t.like(a.choices and a.choices[1].message.content or "", "^Simulated answer from qwen%-7b")
  end
  os.execute("kill " .. tostring(pid) .. " 2>/dev/null")
end)

-- background(dir, args, out) -> the pid of `kubectl args` run in the
-- background with the sandbox's environment, its output to out
local function background(args, out)
  local parts = {}
  for k, v in pairs(S.env) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  local p = io.popen(string.format("env -u AWS_SESSION_TOKEN -u AWS_PROFILE %s kubectl --kubeconfig %s %s >%s 2>&1 & " ..
    "echo $!", table.concat(parts, " "), H.quote(S.kc.kc), args, H.quote(out)))
  local pid = p:read("l")
  p:close()
  return pid
end

t.test("kubectl port-forward to the vLLM Service: curl on the local port gets its answers, one connection or many", function()
  if not S.ready then return skip() end
  local out = S.dir .. "/pf.out"
  local pid = background("port-forward svc/qwen 0:8000", out)
  local port = until_ok(function() return (H.read(out) or ""):match("Forwarding from 127%.0%.0%.1:(%d+) %-> 8000") end)
  t.ok(port, "kubectl forwards: " .. tostring(H.read(out)))
  if port then
    local base = "http://127.0.0.1:" .. port
    local rc, text, err = H.sh("curl -s -f " .. base .. "/v1/models")
    t.eq(rc, 0, err)
    local models = json.decode(text or "") or {}
    t.eq(models.data and models.data[1].id, "qwen-7b", text)
    -- two requests on one kept-alive connection, then a POST with a body
    rc, text = H.sh("curl -s -f -w '[%{http_code}]\\n' " .. base .. "/health " .. base .. "/v1/models")
    t.eq(rc, 0)
    t.like(text or "", "^%[200%]\n.*\"id\":\"qwen%-7b\".*%[200%]\n$")
    local body = json.encode { model = "qwen-7b", messages = { { role = "user", content = "Say hi" } }, max_tokens = 8 }
    rc, text, err = H.sh(string.format("curl -s -f -X POST -H 'Content-Type: application/json' -d %s %s/v1/chat/completions",
      H.quote(body), base))
    t.eq(rc, 0, err)
    local a = json.decode(text or "") or {}
    t.eq({ a.object, a.model, a.usage and a.usage.completion_tokens }, { "chat.completion", "qwen-7b", 8 }, text)
    t.like(a.choices and a.choices[1].message.content or "", "^Simulated answer from qwen%-7b")
    -- the server's own 404 comes through as it is
    rc, text = H.sh("curl -s -o /dev/null -w '%{http_code}' " .. base .. "/nope")
    t.eq({ rc, text }, { 0, "404" })
    t.like(H.read(out) or "", "Handling connection for " .. port, "kubectl saw the connections")
  end
  os.execute("kill " .. tostring(pid) .. " 2>/dev/null")
end)

t.test("kubectl port-forward to a port nothing listens on: the connection ends and kubectl prints the kubelet's error", function()
  if not S.ready then return skip() end
  local pod = conn:list("v1", "Pod", { namespace = "default", labels = { app = "qwen" } })[1]
  local out = S.dir .. "/pf9999.out"
  local pid = background("port-forward pod/" .. pod.metadata.name .. " 0:9999", out)
  local port = until_ok(function() return (H.read(out) or ""):match("Forwarding from 127%.0%.0%.1:(%d+) %-> 9999") end)
  t.ok(port, "kubectl forwards: " .. tostring(H.read(out)))
  if port then
    local rc = H.sh("curl -s -m 20 http://127.0.0.1:" .. port .. "/v1/models")
    t.ok(rc ~= 0, "curl gets no answer")
    local said = until_ok(function()
      local text = H.read(out) or ""
      return text:match("error forwarding port 9999 to pod [^\n]*connection refused") and text
    end)
    t.ok(said, "kubectl prints the error: " .. tostring(H.read(out)))
  end
  os.execute("kill " .. tostring(pid) .. " 2>/dev/null")
  -- a reader (the view policy) may not open one: port-forward asks create on pods/portforward
  local rc, _, err = kubectl("auth can-i create pods/portforward")
  t.eq(rc, 0, err)
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
  _, _, err = kubectl("get --raw /api/v1/namespaces/default/services/huge:9000/proxy/v1/models")
  t.eq(err, 'Error from server (ServiceUnavailable): no service port 9000 found for service "huge"\n')
  _, _, err = kubectl("get --raw /api/v1/namespaces/default/services/absent:8000/proxy/v1/models")
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
  _, _, err = kubectl("get --raw /api/v1/namespaces/default/services/qwen-wrong:8000/proxy/v1/models")
  t.like(err, "^Error from server %(ServiceUnavailable%): error trying to reach service: dial tcp [%d.]+:8080: " ..
    "connect: connection refused")
  assert(conn:delete("v1", "Service", "qwen-wrong", { namespace = "default" }))
  assert(conn:delete("apps/v1", "Deployment", "huge", { namespace = "default" }))
  assert(conn:delete("v1", "Service", "huge", { namespace = "default" }))
end)

t.test("a readiness probe the model server fails keeps the pod out of the endpoints; the right one lets it in", function()
  if not S.ready then return skip() end
  local function probed(path)
    return deployment("probed", { image = "vllm/vllm-openai:v0.9.2", args = { "--model", "Qwen/Qwen3-0.6B" },
      ports = { { name = "http", containerPort = 8000 } },
      readinessProbe = { httpGet = { path = path, port = "http" }, periodSeconds = 5 } })
  end
  assert(conn:apply(probed("/ready"))) -- vLLM serves /health, not /ready: 404, never Ready
  assert(conn:apply(service("probed", 8000)))
  local pod = until_ok(function()
    local p = (conn:list("v1", "Pod", { namespace = "default", labels = { app = "probed" } }) or {})[1]
    return p and (p.status or {}).phase == "Running" and p
  end)
  t.ok(pod, "the pod runs")
  local _, err = call("inference_call_model", { name = "probed", prompt = "hi" })
  t.eq(err and err.code, "STATE")
  t.like(err and err.message, "has no ready endpoint: deployment probed has 0/1 replicas ready; pod probed%-[%w-]+: " ..
    "Running")
  local ep = conn:get("v1", "Endpoints", "probed", { namespace = "default" })
  t.ok(ep and ep.subsets and ep.subsets[1].notReadyAddresses and not ep.subsets[1].addresses,
    "the pod is a not-ready address")
  assert(conn:apply(probed("/health")))
  t.ok(ready("probed"), "Ready once /health answers")
  local r, cerr = answered(function() return call("inference_call_model", { name = "probed", prompt = "hi" }) end)
  t.ok(r and r.answer, cerr and cerr.message or (r and r.err and r.err.message))
  assert(conn:delete("apps/v1", "Deployment", "probed", { namespace = "default" }))
end)

t.test("the guardrail: a tool that does not declare the proxy verb cannot reach a workload", function()
  if not S.ready then return skip() end
  local dir = H.tmpdir()
  H.write(dir .. "/peek.lua", [==[
return tool {
  name = "diagnose_peek_model", summary = "A read tool that tries the service proxy undeclared", kind = "read",
  description = "Reads a Service, then tries to call its workload through the proxy without declaring it.",
  aws = { "eks:DescribeCluster" }, k8s = { "get" },
  params = { cluster = { type = "string", required = true } },
  run = function(ctx, p)
    local c = ctx:k8s(p.cluster)
    assert(c:get("v1", "Service", "qwen", { namespace = "default" }))
    local _, err = c:proxy("Service", "qwen", "/v1/models", { namespace = "default", port = 8000 })
    if err then error(err, 0) end
    return {}
  end,
}]==])
  local config = require "hypd.config"
  local before = config.playbooks_dir
  config.playbooks_dir = dir
  require("hypd.tool.loader").reload(ADMIN)
  local _, err = call("diagnose_peek_model", {})
  config.playbooks_dir = before
  require("hypd.tool.loader").reload(ADMIN)
  os.execute("rm -rf " .. H.quote(dir))
  t.eq(err and err.code, "GUARDRAIL")
  t.like(err and err.message, "diagnose_peek_model may not call kubernetes proxy Service/qwen:8000: it is not among " ..
    "the Kubernetes verbs the tool declares %(get%); nothing was sent")
end)

t.test("inference_call_model reaches a pool's model through its Service <model> (no Deployment of that name)", function()
  if not S.ready then return skip() end
  local pool = deployment("pool", { image = "vllm/vllm-openai:v0.9.2", args = { "--model", "/s3/models/llama-a" },
    ports = { { name = "http", containerPort = 8000 } } }, 1, { business = "unassigned",
      ["deployment-type"] = "model-pool" })
  pool.metadata.labels["hypd.io/inference-kind"] = "pool"
  assert(conn:apply(pool))
  t.ok(ready("pool"))
  local _, err = call("inference_call_model", { name = "llama-a", prompt = "hi" })
  t.eq(err and err.code, "NOT_FOUND", "no Service for the model yet")
  local pod = conn:list("v1", "Pod", { namespace = "default", labels = { app = "pool" } })[1]
  assert(conn:patch("v1", "Pod", pod.metadata.name, { metadata = { labels = { business = "llama-a" } } },
    { namespace = "default" }))
  assert(conn:apply(service("llama-a", 8000, 8000, { business = "llama-a" })))
  until_ok(function()
    local ep = conn:get("v1", "Endpoints", "llama-a", { namespace = "default" })
    return ep and ep.subsets
  end)
  local r, cerr = answered(function() return call("inference_call_model", { name = "llama-a", prompt = "hi" }) end)
  t.ok(r and r.answer, cerr and cerr.message or (r and r.err and r.err.message))
  t.eq({ r and r.model, r and r.service, r and r.pod }, { "/s3/models/llama-a", "llama-a", pod.metadata.name })
end)

local SGL = function()
  return { image = "lmsysorg/sglang:v0.4.9", command = { "python3", "-m", "sglang.launch_server", "--model-path",
    "meta-llama/Llama-3.1-8B-Instruct", "--port", "30000", "--host", "0.0.0.0", "--enable-metrics" },
    ports = { { name = "http", containerPort = 30000 } } }
end

local FH = dofile("tests/lua/features_helpers.lua")
local mark, k8s_writes = FH.mark, FH.k8s_writes
local function rows(plan)
  local out = {}
  for _, e in ipairs(plan or {}) do out[#out + 1] = e.action .. " " .. e.type .. " " .. e.name end
  return out
end

t.test("inference_deploy_router refuses bad workers before writing, and plans its five objects", function()
  if not S.ready then return skip() end
  assert(conn:apply(deployment("sgl-a", SGL(), 2, { model = "llama-sgl" })))
  assert(conn:apply(deployment("sgl-b", SGL(), 1, { model = "llama-sgl" })))
  assert(conn:apply(service("sgl-a", 30000)))
  t.ok(ready("sgl-a", 2) and ready("sgl-b", 1), "three SGLang workers")
  local m = mark()
  local _, err = staged("inference_deploy_router", { workers = { "qwen" } })
  t.eq(H.field_rules(err), { "workers[0]:sglang" }, "a vLLM deployment is not an SGLang worker")
  _, err = staged("inference_deploy_router", { workers = { "sgl-a", "nope" } })
  t.eq(H.field_rules(err), { "workers[1]:exists" })
  _, err = call("inference_deploy_router", { workers = { "sgl-a", "sgl-a" } })
  t.eq(H.field_rules(err), { "workers[1]:unique" }, "refused at the call")
  _, err = call("inference_deploy_router", { workers = { "sgl-a" }, policy = "least_loaded" })
  t.eq(H.field_rules(err), { "policy:enum" })
  local plan = assert(staged("inference_deploy_router", { workers = { "sgl-a", "sgl-b" }, plan = true }))
  t.eq(rows(plan.plan), { "create k8s:serviceaccount default/sglang-router",
    "create k8s:clusterrole hypd-default-sglang-router-discovery",
    "create k8s:clusterrolebinding hypd-default-sglang-router-discovery",
    "create k8s:deployment default/sglang-router", "create k8s:service default/sglang-router-service" })
  t.eq(#k8s_writes(m), 0, "no Kubernetes write")
  t.eq(conn:get("apps/v1", "Deployment", "sglang-router", { namespace = "default" }), nil, "nothing made")
end)

local function worker_of(pod_logs_before)
  -- the worker pods whose logs grew since the last look
  local grew = {}
  for _, p in ipairs(conn:list("v1", "Pod", { namespace = "default", labels = { model = "llama-sgl" } })) do
    local n = select(2, tostring(conn:logs(p.metadata.name, { namespace = "default" })):gsub("Prefill batch", ""))
    if n > (pod_logs_before[p.metadata.name] or 0) then grew[#grew + 1] = p.metadata.name end
    pod_logs_before[p.metadata.name] = n
  end
  return grew
end

t.test("the router forwards to the SGLang workers it discovers: round_robin spreads, cache_aware sticks", function()
  if not S.ready then return skip() end
  local r, err = staged("inference_deploy_router", { workers = { "sgl-a", "sgl-b" }, policy = "round_robin" })
  t.ok(r, err and err.message)
  if not r then return end
  t.eq({ r.service, r.port, r.worker_port, r.policy }, { "sglang-router-service", 30000, 30000, "round_robin" })
  t.eq(r.selector, { "model=llama-sgl" }, "one selector for both worker deployments")
  local dep = conn:get("apps/v1", "Deployment", "sglang-router", { namespace = "default" })
  t.eq(dep.metadata.labels["hypd.io/inference-kind"], "router")
  t.eq(dep.spec.template.metadata.labels["hypd.io/inference-kind"], "router")
  t.eq(dep.metadata.labels["app.kubernetes.io/managed-by"], "hypd")
  t.like(table.concat(dep.spec.template.spec.containers[1].command, " "), "^python3 %-m sglang_router%.launch_router " ..
    "%-%-host 0%.0%.0%.0 %-%-port 30000 %-%-policy round_robin %-%-service%-discovery %-%-selector model=llama%-sgl " ..
    "%-%-service%-discovery%-port 30000 %-%-service%-discovery%-namespace default")
  -- every worker has loaded its model (a worker still loading would take a turn and refuse)
  for _, p in ipairs(conn:list("v1", "Pod", { namespace = "default", labels = { model = "llama-sgl" } })) do
    t.ok(until_ok(function()
      local resp = conn:proxy("Pod", p.metadata.name, "/health", { namespace = "default", port = 30000 })
      return resp and resp.status == 200
    end, 300), p.metadata.name .. " listens")
  end
  local seen, before = {}, {}
  worker_of(before)
  for i = 1, 3 do
    local a, aerr = answered(function()
      return call("inference_call_model", { name = "sglang-router", prompt = "Tell me about GPUs, " .. i,
        model = "meta-llama/Llama-3.1-8B-Instruct" })
    end)
    t.ok(a and a.answer, aerr and aerr.message or (a and a.err and a.err.message))
    t.like(a and a.answer, "^Simulated answer from meta%-llama/Llama%-3%.1%-8B%-Instruct")
    t.eq(a and a.service, "sglang-router-service")
    for _, w in ipairs(worker_of(before)) do seen[w] = (seen[w] or 0) + 1 end
  end
  local n = 0
  for _, c in pairs(seen) do n = n + 1; t.eq(c, 1, "each worker once") end
  t.eq(n, 3, "round robin: three requests, three workers")
  local rc, out = kubectl("get --raw /api/v1/namespaces/default/services/sglang-router-service:29000/proxy/metrics")
  t.eq(rc, 0)
  t.like(out, "sgl_router_processed_requests_total{worker=\"http://[%d.]+:30000\"} 1")
  -- the same router, now cache_aware: the same prompt goes back to the same worker
  r = assert(staged("inference_deploy_router", { workers = { "sgl-a", "sgl-b" } }))
  t.eq(r.policy, "cache_aware")
  t.ok(ready("sglang-router"))
  local picks = {}
  for i = 1, 3 do
    answered(function()
      return call("inference_call_model", { name = "sglang-router", prompt = "A long shared system prompt. " ..
        (i == 3 and "Different ending" or "Same question"), model = "meta-llama/Llama-3.1-8B-Instruct" })
    end)
    picks[i] = worker_of(before)[1]
  end
  t.ok(picks[1] ~= nil, "a worker answered")
  t.eq(picks[2], picks[1], "the same prompt: the worker that has its prefix")
  local logs = conn:logs(conn:list("v1", "Pod", { namespace = "default", labels = { app = "sglang-router" } })[1]
    .metadata.name, { namespace = "default" })
  t.like(logs, "policy cache_aware")
end)

t.test("the router with no worker answers its own 503; a plan of an applied router changes nothing", function()
  if not S.ready then return skip() end
  local lonely = deployment("lonely-router", { image = "lmsysorg/sglang:latest", command = { "python3", "-m",
    "sglang_router.launch_router", "--port", "30000", "--service-discovery", "--selector", "model=none",
    "--service-discovery-port", "30000" }, ports = { { name = "http", containerPort = 30000 } },
    resources = { requests = { cpu = "1" } } })
  assert(conn:apply(lonely))
  assert(conn:apply(service("lonely-router", 30000)))
  t.ok(ready("lonely-router"))
  local e = {}
  local r = answered(function() -- until the router listens
    local x, y = call("inference_call_model", { name = "lonely-router", prompt = "anyone?", model = "m" })
    if x then return x end
    if y and tostring(y.message):find("connection refused", 1, true) then return nil, y end
    e = y
    return true
  end)
  t.ok(r, "answered")
  t.eq(e.code, "FAILED")
  t.like(e.message, "answered 503 to POST /v1/chat/completions: No available workers")
  local plan = assert(staged("inference_deploy_router", { workers = { "sgl-a", "sgl-b" }, plan = true }))
  t.eq(#(plan.plan or {}), 0, "nothing to change: " .. json.encode(plan.plan))
end)

t.test("inference_set_autoscaling: a KEDA ScaledObject on the engine's queue depth; validation; plan", function()
  if not S.ready then return skip() end
  local _, err = call("inference_set_autoscaling", { name = "sgl-a", min_replicas = 5, max_replicas = 2 })
  t.eq(H.field_rules(err), { "max_replicas:ge_min", "min_replicas:le_max" }, "refused at the call, naming both")
  _, err = call("inference_set_autoscaling", { name = "sgl-a" })
  t.eq(H.field_rules(err), { "max_replicas:required" })
  local m = mark()
  local plan = assert(staged("inference_set_autoscaling", { name = "sgl-a", max_replicas = 4, plan = true }))
  t.eq(rows(plan.plan), { "create k8s:scaledobject default/sgl-a-scaler" })
  t.eq(#k8s_writes(m), 0, "the plan writes nothing")
  local r, serr = staged("inference_set_autoscaling", { name = "sgl-a", max_replicas = 4, threshold = 8 })
  t.ok(r, serr and serr.message)
  if not r then return end
  local so = conn:get("keda.sh/v1alpha1", "ScaledObject", "sgl-a-scaler", { namespace = "default" })
  t.eq(so.spec.scaleTargetRef, { apiVersion = "apps/v1", kind = "Deployment", name = "sgl-a" })
  t.eq({ so.spec.minReplicaCount, so.spec.maxReplicaCount, so.spec.pollingInterval, so.spec.cooldownPeriod },
    { 1, 4, 30, 300 })
  local tr = so.spec.triggers[1]
  t.eq({ tr.type, tr.metricType }, { "prometheus", "AverageValue" })
  t.eq(tr.metadata, { serverAddress = "http://prometheus-server.monitoring.svc.cluster.local:80",
    query = 'sum(sglang:num_queue_reqs{namespace="default",pod=~"sgl-a-.*"})', threshold = "8",
    activationThreshold = "0" })
  t.eq({ so.metadata.labels["hypd.io/inference"], so.metadata.labels["hypd.io/inference-kind"],
    so.metadata.labels["app.kubernetes.io/managed-by"] }, { "sgl-a", "container", "hypd" })
  local v = assert(staged("inference_set_autoscaling", { name = "qwen", max_replicas = 2, cooldown_period = 120 }))
  t.eq(v.query, 'sum(vllm:num_requests_waiting{namespace="default",pod=~"qwen-.*"})', "vLLM's queue")
  local rr = assert(staged("inference_set_autoscaling", { name = "sglang-router", max_replicas = 2 }))
  t.eq(rr.query, 'sum(sgl_router_job_queue_depth{namespace="default",pod=~"sglang-router-.*"})', "the router's")
  local g, gerr = call("inference_get", { name = "sglang-router" })
  local a = g and (g.autoscaling or {})[1] or {}
  t.eq({ a.name, a.min, a.max, a.triggers and a.triggers[1].query }, { "sglang-router-scaler", 1, 2, rr.query },
    "inference_get (the status tool) shows the ScaledObject: " .. tostring(gerr and gerr.message))
  local _, cerr = staged("inference_set_autoscaling", { name = "sgl-a", max_replicas = 3, scaled_object_name = "other" })
  t.eq(cerr and cerr.code, "CONFLICT")
  t.like(cerr and cerr.message, "already scaled by ScaledObject sgl%-a%-scaler")
  local again = assert(staged("inference_set_autoscaling", { name = "sgl-a", max_replicas = 4, threshold = 8 }))
  t.eq(again.object.action, "unchanged", "the same call again changes nothing")
  -- KEDA absent: the CRD gone, the tool refuses naming what installs it
  assert(conn:delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", "scaledobjects.keda.sh"))
  until_ok(function()
    return conn:get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "scaledobjects.keda.sh") == nil
  end)
  local _, kerr = staged("inference_set_autoscaling", { name = "sgl-a", max_replicas = 4 })
  t.eq(kerr and kerr.code, "CONFLICT")
  t.like(kerr and kerr.message, "KEDA is not installed on cluster serve%-eks %(no scaledobjects%.keda%.sh CRD%)")
  t.like(kerr and kerr.message, "hyperpod_update_advanced_features inference_operator=true")
end)

t.test("the sandbox's KEDA scales a deployment from the simulated metric its Prometheus scrapes", function()
  if not S.ready then return skip() end
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "keda.sh" then assert(conn:apply(resources.crd(row))) end
  end
  until_ok(function() return conn:get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "scaledobjects.keda.sh") end)
  for _, n in ipairs { "keda", "monitoring" } do assert(conn:apply { apiVersion = "v1", kind = "Namespace",
    metadata = { name = n } }) end
  local function put(o, ns) o.metadata.namespace = ns; assert(conn:apply(o)) end
  local keda = deployment("keda-operator", { image = "ghcr.io/kedacore/keda:2.15.1", resources = { requests = {
    cpu = "100m" } } })
  put(keda, "keda")
  local scaled = deployment("scaled", { image = "vllm/vllm-openai:v0.9.2", args = { "--model", "Qwen/Qwen3-0.6B" },
    ports = { { name = "http", containerPort = 8000 } } })
  scaled.spec.template.metadata.annotations = { ["prometheus.io/scrape"] = "true", ["prometheus.io/port"] = "8000" }
  assert(conn:apply(scaled))
  assert(conn:apply(service("scaled", 8000)))
  t.ok(ready("scaled"), "a vLLM deployment whose pods are annotated for scraping")
  local q = 'sum(vllm:request_success_total{namespace="default",pod=~"scaled-.*"})'
  local r, err = staged("inference_set_autoscaling", { name = "scaled", min_replicas = 1, max_replicas = 3,
    query = q, threshold = 1, polling_interval = 15 })
  t.ok(r, err and err.message)
  local function so()
    return conn:get("keda.sh/v1alpha1", "ScaledObject", "scaled-scaler", { namespace = "default" }) or {}
  end
  local function cond(o, ctype)
    for _, c in ipairs((o.status or {}).conditions or {}) do if c.type == ctype then return c end end
    return {}
  end
  local bad = until_ok(function() local o = so() return cond(o, "Ready").status == "False" and o end)
  t.like(cond(bad or {}, "Ready").message, "lookup prometheus%-server%.monitoring%.svc%.cluster%.local: no such host",
    "no Prometheus yet: KEDA says why and scales nothing")
  local prom = deployment("prometheus-server", { image = "quay.io/prometheus/prometheus:v2.54.1",
    args = { "--config.file=/etc/config/prometheus.yml", "--web.listen-address=:9090" },
    ports = { { containerPort = 9090 } }, resources = { requests = { cpu = "500m" } } })
  put(prom, "monitoring")
  local psvc = service("prometheus-server", 80, 9090)
  put(psvc, "monitoring")
  t.ok(until_ok(function()
    local d = conn:get("apps/v1", "Deployment", "prometheus-server", { namespace = "monitoring" })
    return d and ((d.status or {}).readyReplicas or 0) > 0
  end, 300), "Prometheus runs")
  local rc, out = kubectl("get --raw '/api/v1/namespaces/monitoring/services/prometheus-server:80/proxy/api/v1/query" ..
    "?query=" .. q:gsub("[^%w]", function(c) return string.format("%%%02X", c:byte()) end) .. "'")
  t.eq(rc, 0)
  t.like(out, '"resultType":"vector"', "Prometheus answers the query")
  for i = 1, 3 do
    local a, aerr = answered(function()
      return call("inference_call_model", { name = "scaled", prompt = "load " .. i, model = "Qwen/Qwen3-0.6B" })
    end)
    t.ok(a and a.answer, aerr and aerr.message)
  end
  local d = until_ok(function()
    local x = conn:get("apps/v1", "Deployment", "scaled", { namespace = "default" })
    return x and x.spec.replicas == 3 and x
  end, 300)
  t.eq(d and d.spec.replicas, 3, "three successful requests over a threshold of 1: three replicas, the maximum; " ..
    json.encode((so() or {}).status))
  local o = so()
  t.eq({ cond(o, "Ready").status, cond(o, "Active").status }, { "True", "True" })
  t.eq((o.status or {}).originalReplicaCount, 1)
  t.ok((o.status or {}).lastActiveTime, "lastActiveTime")
end)

t.cleanup(function() S.cleanup() end)
