-- inference_call_model: one OpenAI-style chat completion to a deployed
-- model, through the Kubernetes API's service proxy with hypd's own client
-- (no port forward, no load balancer needed): the Service that selects the
-- deployment's pods (inference/_serving, contract 3), /v1/models for the
-- model's name when none is given, then POST /v1/chat/completions (not
-- streamed). Answers the text, usage, latency and, when it can tell, the
-- pod that answered (the only ready endpoint, or the pod whose log names
-- the completion's id).
--
-- A read tool: it creates, changes and deletes nothing in the cluster or
-- the account; it declares the Kubernetes verb proxy (classed read by the
-- guardrail: an HTTP request to a workload) and reads logs to name the pod.
local P = require "_params"
local S = require "inference._serving"
local hp = require "_hyperpod"

local function unavailable(msg, extra)
  extra = extra or {}
  extra.retryable = true
  hypd.errors.raise("STATE", msg, extra)
end

-- pod_of(conn, ns, eps, id) -> the pod that answered, when it can be told
local function pod_of(conn, ns, eps, id)
  if #eps.ready == 1 then return eps.ready[1].pod end
  if not id then return nil end
  for _, a in ipairs(eps.ready) do
    if a.pod then
      local text = conn:logs(a.pod, { namespace = ns, tail = 200 })
      if text and tostring(text):find(id, 1, true) then return a.pod end
    end
  end
end

local function run(ctx, p)
  local e = hp.eks(ctx, p)
  local conn = ctx:k8s(e.name)
  local ns = p.namespace
  local dep = S.deployment(conn, ns, p.name)
  local svc, port
  if dep then
    svc, port = S.service(conn, ns, dep, p.name)
  else
    -- a model of a pool: its Service <model> selects the assigned pods
    svc, port = S.named_service(conn, ns, p.name)
    dep = svc and S.as_deployment(svc)
  end
  if not dep then
    hypd.errors.refuse("name", "exists", string.format("no inference deployment %s/%s on cluster %s, nor a model Service " ..
      "of that name (inference_list lists them)", ns, p.name, e.name),
      { code = "NOT_FOUND", field_message = "name: no such deployment" })
  end
  if not svc then
    hypd.errors.raise("STATE", string.format("no Service in %s selects the pods of deployment %s, so nothing can " ..
      "reach it (a model pool's pods get one when assigned: inference_assign_pool_pod; then call the model's " ..
      "name); inference_get name=%s", ns, dep.metadata.name, p.name))
  end
  local sname = svc.metadata.name
  local eps = S.endpoints(conn, ns, sname)
  local function failed(err)
    local msg = tostring(err and err.message or err)
    if msg:find("no endpoints available", 1, true) then
      unavailable(string.format("Service %s/%s has no ready endpoint: deployment %s has %s. The API server said: " ..
        "%s. See inference_get name=%s (and wait_seconds) for why", ns, sname, dep.metadata.name,
        S.state(conn, ns, dep), msg, p.name), { service = sname })
    elseif msg:find("connection refused", 1, true) or msg:find("error trying to reach service", 1, true) then
      unavailable(string.format("the model server behind Service %s/%s port %s does not answer (%s): it is still " ..
        "loading the model, or it listens on another port than the Service's targetPort; deployment %s: %s; " ..
        "its logs: job_get_logs kind=deployment name=%s", ns, sname, tostring(port), msg, dep.metadata.name,
        S.state(conn, ns, dep), dep.metadata.name), { service = sname })
    end
    error(err, 0)
  end
  local model = p.model
  if not model then
    local status, body = S.call(conn, ns, sname, port, "GET", "/v1/models", nil, p.timeout_seconds)
    if not status then failed(body) end
    if status >= 400 or type(body) ~= "table" or type(body.data) ~= "table" or not body.data[1] then
      hypd.errors.raise("FAILED", string.format("the model server behind %s/%s answered GET /v1/models with %s " ..
        "and no model; give model= explicitly", ns, sname, tostring(status)), { status = status })
    end
    model = body.data[1].id
  end
  local messages = p.messages
  if not messages then messages = { { role = "user", content = p.prompt } } end
  local req = { model = model, messages = messages, max_tokens = p.max_tokens, temperature = p.temperature,
    stream = false }
  local status, body, took = S.call(conn, ns, sname, port, "POST", "/v1/chat/completions", req, p.timeout_seconds)
  if not status then failed(body) end
  if status >= 400 or type(body) ~= "table" or type(body.choices) ~= "table" then
    local said = type(body) == "table" and (body.message or (type(body.error) == "table" and body.error.message)
      or body.detail) or tostring(body)
    hypd.errors.raise("FAILED", string.format("the model server behind %s/%s answered %d to POST " ..
      "/v1/chat/completions: %s", ns, sname, status, tostring(said)), { status = status, model = model })
  end
  local choice = body.choices[1] or {}
  local msg = choice.message or {}
  return { answer = msg.content or choice.text, model = body.model or model, finish_reason = choice.finish_reason,
    usage = body.usage, latency_ms = math.floor(took * 10000 + 0.5) / 10, id = body.id,
    pod = pod_of(conn, ns, eps, body.id), service = sname, port = port, deployment = dep.metadata.name,
    namespace = ns, cluster = e.name, ready_endpoints = #eps.ready }
end

return tool {
  name = "inference_call_model",
  summary = "Send a chat completion to a deployed model and answer its reply, token usage and latency",
  description = "Calls an inference deployment of the active (or named) cluster with one OpenAI-style chat " ..
    "completion (POST /v1/chat/completions, not streamed) through the Kubernetes API's service proxy, with " ..
    "hypd's own Kubernetes client: the Service that selects the deployment's pods (preferring one named like " ..
    "it), its port named http (else its first). Give messages (a chat) or prompt (one user message); model " ..
    "defaults to the first one the server lists on /v1/models. Answers the reply text, finish_reason, usage " ..
    "(prompt, completion, total tokens), latency_ms (the whole call through the API server, to 0.1 ms) and the pod that " ..
    "answered when it can tell. With no ready endpoint it says so with the deployment's state (see " ..
    "inference_get); a server that refuses the connection (still loading) or answers an error is named with " ..
    "its answer. It changes nothing in the cluster.",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "logs", "proxy" },
  params = P.form({ "prompt", "name" },
    { "messages", "max_tokens", "temperature", "model", "timeout_seconds", "namespace", "cluster", "region" },
    {
    name = P.with(S.NAME, { required = true,
      description = "the inference deployment's name (inference_list lists them)" }),
    namespace = S.NS, cluster = P.cluster, region = P.region,
    messages = { type = "array", description = "the chat: [{role, content}], in order",
      items = { type = "object", properties = {
        role = { type = "string", required = true, enum = { "system", "user", "assistant", "tool" }, label = "Role",
          order = 1 },
        content = { type = "string", required = true, max_length = 200000, label = "Content", order = 2 } } },
      help = "A whole conversation, message by message, instead of one prompt." },
    prompt = { type = "string", min_length = 1, max_length = 200000,
      description = "one user message (instead of messages)", help = "What you ask the model." },
    model = { type = "string", min_length = 1, max_length = 256,
      description = "the model name the server serves (default: the first on its /v1/models)" },
    max_tokens = { type = "integer", minimum = 1, maximum = 131072, default = 256,
      description = "the most tokens the answer may have" },
    temperature = { type = "number", minimum = 0, maximum = 2, default = 0.7, description = "sampling temperature" },
    timeout_seconds = { type = "integer", minimum = 1, maximum = 600, default = 120,
      description = "how long to wait for the answer" },
  }, { name = "Endpoint" }),
  validate = function(p)
    if (p.messages == nil) == (p.prompt == nil) then
      hypd.errors.refuse(p.messages and "prompt" or "messages", "one_of",
        "messages or prompt: give exactly one (a chat as messages, or one user message as prompt)")
    end
    if p.messages and #p.messages == 0 then hypd.errors.refuse("messages", "min_items", "messages: give at least one message") end
  end,
  run = run,
}
