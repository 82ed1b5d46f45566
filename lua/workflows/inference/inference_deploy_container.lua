-- inference_deploy_container: a self-managed model server (vLLM, SGLang or
-- any image) as a Deployment and its Service, or a model pool of warm
-- workers with no Service (inference/_container.lua makes the objects),
-- applied with server-side apply and followed until its pods are ready or
-- the scheduler says why they cannot be placed. A request no node can fit
-- is deployed all the same and stays Pending (the result warns and
-- inference_get shows the scheduler's event).
local P = require "_params"
local I = require "_inference"
local C = require "inference._container"
local K = require "_k8s_objects"
local hp = require "_hyperpod"
local PL = require "inference._pool"
local O = require "_ownership"
local LBC = require "inference._lbc"

local FAMILY = "inference-container"

local IMAGE = "^[a-zA-Z0-9][a-zA-Z0-9._/:@-]*$"
local WORD = { type = "string", max_length = 4096 }

local function gpus_of(node)
  return math.tointeger(tonumber((((node.status or {}).allocatable or {})["nvidia.com/gpu"]) or "0")) or 0
end

-- warnings(ctx, conn, p, eks, region) -> what will keep the pods from running
-- (or the Service from getting its address), said before they are made
-- (nothing is refused: the issue wants it Pending)
local function warnings(ctx, conn, p, eks, region)
  local out = hypd.json.array()
  local typed, most = 0, 0
  for _, n in ipairs(conn:list("v1", "Node") or {}) do
    if ((n.metadata.labels or {})["node.kubernetes.io/instance-type"]) == p.instance_type then
      typed = typed + 1
      most = math.max(most, gpus_of(n))
    end
  end
  if typed == 0 then
    out[#out + 1] = string.format("no node of instance type %s is in the cluster now: the pods stay Pending " ..
      "until one joins (hyperpod_add_instance_group or hyperpod_scale_instance_group)", p.instance_type)
  elseif p.gpus > most then
    out[#out + 1] = string.format("%d GPUs per pod is more than any %s node offers (%d): the pods stay Pending; " ..
      "inference_get shows the scheduler's reason", p.gpus, p.instance_type, most)
  end
  if p.service == "external" then
    local w = LBC.warning(ctx, conn, eks, region)
    if w then out[#out + 1] = w end
  end
  if not C.listens_all(p) then
    out[#out + 1] = "the SGLang command names no --host: SGLang then listens on 127.0.0.1 only and the " ..
      "Service cannot reach it; add --host 0.0.0.0"
  end
  local tp = C.tp_size(p)
  if tp and tp ~= p.gpus then
    out[#out + 1] = string.format("the command asks for tensor parallelism %d but each pod requests %d GPU(s) " ..
      "(gpus): hypd never infers gpus from the command", tp, p.gpus)
  end
  if p.storage_claim ~= "" and not K.get(conn, "v1", "PersistentVolumeClaim", p.storage_claim, p.namespace) then
    out[#out + 1] = string.format("the storage claim %s is not in namespace %s: the pods cannot start until it " ..
      "exists (storage tools make it; storage_claim=\"\" mounts none)", p.storage_claim, p.namespace)
  end
  return out
end

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local conn = hp.k8s(ctx, p)
  local port, source = C.port_of(p)
  st.port, st.port_source = port, source
  local kind = p.service == "pool" and "pool" or "container"
  local d = I.find(conn, p.name, p.namespace, kind ~= "pool")
  -- another tool's deployment of this name (the operator's for a managed
  -- one) is never taken over: CONFLICT naming its owner
  if d then O.check(d.object, FAMILY, { cluster = st.eks }) end
  if d and d.kind ~= kind then
    hypd.errors.refuse("name", "kind", string.format("%s/%s is already an inference deployment of kind %s, not %s: " ..
      "delete it with inference_delete or choose another name", p.namespace, p.name, d.kind, kind),
      { code = "CONFLICT", field_message = "name: already a " .. d.kind .. " deployment" })
  end
  if d and kind == "pool" then PL.refuse_cut(d, p.replicas, p.name) end
  local svc = kind ~= "pool" and K.get(conn, "v1", "Service", p.name, p.namespace)
  local owner = svc and (svc.metadata.labels or {})[I.NAME]
  if owner and owner ~= p.name then
    hypd.errors.refuse("name", "service", string.format("Service %s/%s belongs to inference deployment %s (a model of " ..
      "its pool); choose another name", p.namespace, p.name, owner),
      { code = "CONFLICT", field_message = "name: Service " .. p.name .. " is " .. owner .. "'s" })
  end
  st.warnings = warnings(ctx, conn, p, st.eks, st.region)
  st.objects = C.objects(p, port)
  K.claim(conn, st.objects, FAMILY, { cluster = st.eks })
end

local function apply(ctx)
  local st = ctx.state
  local conn = ctx:k8s(st.eks)
  st.applied = {}
  -- the namespace, when it is not there yet (any owner's will do)
  K.ensure(ctx, conn, { apiVersion = "v1", kind = "Namespace", metadata = { name = ctx.params.namespace,
    labels = { [I.MANAGED_BY] = "hypd" } } }, { shared = true })
  for _, o in ipairs(st.objects) do
    local obj, action = K.ensure(ctx, conn, o, { field = "name", family = FAMILY })
    st.applied[#st.applied + 1] = { kind = o.kind, name = o.metadata.name, namespace = o.metadata.namespace,
      action = action, uid = obj and obj.uid }
  end
end

local function wait(ctx)
  local st, p = ctx.state, ctx.params
  if ctx.plan then return end
  local conn = ctx:k8s(st.eks)
  st.phase = ctx:poll { what = "Deployment " .. p.namespace .. "/" .. p.name .. " to be ready", every = 5,
    timeout = 30 * 60,
    check = function()
      local dep = K.get(conn, "apps/v1", "Deployment", p.name, p.namespace)
      local ready = dep and ((dep.status or {}).readyReplicas or 0) or 0
      if ready >= p.replicas then return true, nil, "Ready" end
      local trouble
      for _, pod in ipairs(conn:list("v1", "Pod", { namespace = p.namespace, labels = { [I.NAME] = p.name } }) or {}) do
        local why = I.unschedulable(pod)
        if why then
          st.pending_reason = why
          return true, nil, "Pending"
        end
        trouble = trouble or I.trouble(pod)
      end
      return false, string.format("%d of %d pods ready%s", ready, p.replicas, trouble and ("; " .. trouble) or "")
    end }
end

local function result(ctx)
  local st, p = ctx.state, ctx.params
  if ctx.plan then return end
  local svc
  for _, o in ipairs(st.objects) do
    if o.kind == "Service" then svc = { name = o.metadata.name, type = o.spec.type, port = st.port } end
  end
  st.result = { cluster = st.eks, region = st.region, name = p.name, namespace = p.namespace,
    kind = p.service == "pool" and "pool" or "container", engine = p.engine,
    image = st.objects[1].spec.template.spec.containers[1].image, gpus = p.gpus, port = st.port,
    port_from = st.port_source, replicas = p.replicas,
    instance_type = p.instance_type, service = svc, phase = st.phase, pending_reason = st.pending_reason,
    warnings = st.warnings, objects = st.applied,
    next = p.service == "pool" and
      ("inference_assign_pool_pod pool=" .. p.name .. " model=<model> count=<n>") or
      ("inference_get name=" .. p.name .. " namespace=" .. p.namespace .. " wait_seconds=60") }
end

return tool {
  name = "inference_deploy_container",
  summary = "Deploy a self-managed model server (vLLM, SGLang or any image) or a pool of warm GPU workers",
  description = "Serves a model as a Deployment <name> of your container (vLLM, SGLang, any image) on the active (or " ..
    "named) cluster, on nodes of instance_type, each pod with exactly gpus GPUs (a decision), the S3 " ..
    "storage at /s3. service: clusterip (a Service <name>), external (an internal NLB unless " ..
    "scheme=internet-facing) or pool (warm workers for inference_assign_pool_pod). Waits until the pods " ..
    "are ready, or says why they stay Pending. Follow it with inference_get (wait_seconds); plan = true " ..
    "lists the objects.",
  kind = "mutating",
  aws = { "eks:DescribeCluster", "eks:ListPodIdentityAssociations" },
  k8s = { "get", "list", "apply" },
  status_tool = "inference_get",
  params = P.form({ "name", "instance_type", "gpus", "replicas", "service" },
    { "args", "command", "engine", "env", "health_path", "image",
      "port", "scheme", "secret_env", "storage_claim", "namespace", "cluster", "region" },
    {
    name = P.with(I.NAME_PARAM, { decision = true }),
    namespace = I.NS_PARAM,
    engine = { type = "string", enum = { "vllm", "sglang", "custom" }, default = "custom",
      description = "what the image runs; it only picks defaults: the image (vllm/vllm-openai:latest, " ..
        "lmsysorg/sglang:latest), the port (8000, 30000) and the readiness probe path (/health). custom: any " ..
        "image, which then needs image and a port" },
    image = { type = "string", pattern = IMAGE, max_length = 512,
      pattern_help = "a container image reference like registry/name:tag",
      description = "the container image (default: the engine's)" },
    command = { type = "array", items = WORD, description = "the container's command (default: the image's " ..
      "entrypoint; for vLLM give only args, the image runs the OpenAI server)" },
    args = { type = "array", items = WORD, description = "the container's arguments, e.g. [\"--model\", " ..
      "\"/s3/models/qwen\", \"--port\", \"8000\"]" },
    gpus = { type = "integer", required = true, decision = true, minimum = 0, maximum = 64,
      description = "GPUs each pod requests (nvidia.com/gpu); 0 for a CPU-only server. Never inferred from " ..
        "tensor-parallel flags: a --tensor-parallel-size that differs only gives a warning" },
    port = { type = "integer", minimum = 1, maximum = 65535,
      description = "the port the server listens on (default: the command's --port, else the engine's)" },
    instance_type = P.with(P.instance_type, { required = true, decision = true,
      description = "the instance type the pods run on (node.kubernetes.io/instance-type)" }),
    replicas = { type = "integer", default = 1, minimum = 0, maximum = 100, decision = true,
      description = "how many pods (for a pool: warm workers)" },
    service = { type = "string", enum = { "clusterip", "external", "pool" }, default = "clusterip", decision = true,
      description = "clusterip: a ClusterIP Service <name>; external: a LoadBalancer Service (NLB); pool: a " ..
        "model pool with no Service" },
    scheme = { type = "string", enum = { "internal", "internet-facing" }, default = "internal",
      description = "the NLB's scheme for service=external (internet-facing exposes the model to the internet " ..
        "with no authentication)" },
    health_path = { type = "string", pattern = "^/[A-Za-z0-9._~/-]*$", max_length = 256,
      pattern_help = "an HTTP path like /health",
      description = "the readiness probe's path (default: the engine's /health; custom: no probe)" },
    storage_claim = { type = "string", default = "s3-claim", pattern = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$",
      max_length = 253, pattern_help = "a PersistentVolumeClaim name, or \"\" for none",
      description = "the S3 storage claim mounted read-only at /s3 (\"\": none)" },
    env = { type = "object", description = "environment variables of the container: {NAME: \"value\"} (kept in " ..
      "plain text: what looks like a secret, by name or value, is refused; use secret_env)" },
    secret_env = { type = "object", description = "environment variables from Kubernetes Secrets: " ..
      "{NAME: \"<secret name>/<key>\"}, e.g. {\"HF_TOKEN\": \"hf-token/token\"}" },
    cluster = P.cluster, region = P.region,
  }, { name = "Endpoint name" }),
  validate = C.validate,
  target = function(p) return I.target(p, tostring(p.namespace) .. "/" .. tostring(p.name)) end,
  steps = {
    { name = "check", run = check, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "apply", run = apply },
    { name = "wait", run = wait },
    { name = "result", run = result },
  },
}
