-- inference/_container: the objects of a self-managed inference deployment
-- (inference_deploy_container), as the reference's hybrid container
-- template makes them (hyperpod-notes.md §8 "Self-managed path"): a
-- Deployment placed by instance type (required node affinity, preferred
-- HyperPod 100 / EKS node group 90 / Karpenter 80), requesting the GPUs the
-- caller decided, with the S3 claim read-only at /s3, /dev/shm in memory,
-- IPC_LOCK and the nvidia.com/gpu toleration; a Service <name> (ClusterIP,
-- or an NLB LoadBalancer) or, for a model pool, none (pods
-- business=unassigned, deployment-type=model-pool).
--   ENGINES[engine] -> {image, port, health, container}
--   port_of(p) -> port, source ("param" | "command" | "engine"), or a VALIDATION
--   tp_size(p) -> the --tensor-parallel-size / --tp the command names, or nil
--   objects(p, port) -> {Deployment [, Service]}
--   service(name, ns, selector, port, variant, scheme, labels) -> a Service
--     (ClusterIP, or for variant "external" an NLB LoadBalancer)
--   validate(p): the tool's rules across fields (image, port, env; no secret
--     in env, command or args: secret_env names Kubernetes Secrets instead)
local I = require "_inference"

local M = {}

M.ENGINES = {
  vllm = { image = "vllm/vllm-openai:latest", port = 8000, health = "/health", container = "vllm" },
  sglang = { image = "lmsysorg/sglang:latest", port = 30000, health = "/health", container = "sglang" },
  custom = { container = "server" },
}

-- the annotations of an NLB made by the AWS Load Balancer Controller
M.NLB = {
  ["service.beta.kubernetes.io/aws-load-balancer-type"] = "external",
  ["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"] = "ip",
}
M.SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"

-- words(p) -> every whitespace-separated word of command and args (a
-- shell command line in one element counts word by word)
local function words(p)
  local out = {}
  for _, list in ipairs { p.command or {}, p.args or {} } do
    for _, x in ipairs(list) do
      for w in tostring(x):gmatch("%S+") do out[#out + 1] = w end
    end
  end
  return out
end

-- flag(p, names) -> the values of a flag given as "--f N" or "--f=N"
local function flag(p, names)
  local w, out = words(p), {}
  for i, x in ipairs(w) do
    for _, n in ipairs(names) do
      if x == n and w[i + 1] then out[#out + 1] = w[i + 1] end
      local v = x:match("^" .. n:gsub("%-", "%%-") .. "=(.*)$")
      if v then out[#out + 1] = v end
    end
  end
  return out
end

-- port_of(p) -> port, source: p.port, else the command's --port, else the
-- engine's default; refuses a --port that is not a port, two different
-- --port values, a port that differs from --port, and custom with none
function M.port_of(p)
  local from_cmd
  for _, v in ipairs(flag(p, { "--port" })) do
    local n = math.tointeger(tonumber(v))
    if not n or n < 1 or n > 65535 or not v:match("^%d+$") then
      hypd.errors.refuse("command", "port", "command: --port " .. v .. " is not a port number (1 to 65535)")
    end
    if from_cmd and from_cmd ~= n then
      hypd.errors.refuse("command", "port", string.format("command: --port is given twice (%d and %d)", from_cmd, n))
    end
    from_cmd = n
  end
  if p.port and from_cmd and p.port ~= from_cmd then
    hypd.errors.refuse("port", "matches_command", string.format("port: %d differs from the command's --port %d; the " ..
      "container serves on --port, so give one port (or leave port out)", p.port, from_cmd))
  end
  if p.port then return p.port, "param" end
  if from_cmd then return from_cmd, "command" end
  local e = M.ENGINES[p.engine]
  if e.port then return e.port, "engine" end
  hypd.errors.refuse("port", "required", "port: required for engine custom unless the command names --port (hypd does " ..
    "not guess the port an image serves on)")
end

-- listens_all(p) -> false when an SGLang command names no --host (SGLang
-- then listens on 127.0.0.1, out of the Service's reach)
function M.listens_all(p)
  if p.engine ~= "sglang" then return true end
  return #flag(p, { "--host" }) > 0
end

-- tp_size(p) -> the tensor-parallel size the command names, or nil (never
-- used for the GPU request: only to warn when it differs)
function M.tp_size(p)
  local v = flag(p, { "--tensor-parallel-size", "--tp-size", "--tp", "-tp" })[1]
  return v and math.tointeger(tonumber(v))
end

-- secret_name(name) -> true for an environment variable that holds a
-- secret by its name (HF_TOKEN, *_SECRET*, *PASSWORD*, *API_KEY*, ...)
function M.secret_name(name)
  local u = name:upper()
  return u:find("TOKEN", 1, true) or u:find("SECRET", 1, true) or u:find("PASSWORD", 1, true) or
    u:find("PASSWD", 1, true) or u:find("API_KEY", 1, true) or u:find("ACCESS_KEY", 1, true) or
    u:find("PRIVATE_KEY", 1, true) or false
end

-- secret_value(v) -> true for a value shaped like a Hugging Face token
-- (hf_...) or an AWS secret access key
function M.secret_value(v)
  v = tostring(v)
  return v:match("^hf_[A-Za-z0-9]+$") ~= nil and #v >= 23 or
    (#v == 40 and v:match("^[A-Za-z0-9/+]+$") ~= nil and v:match("[/+]") ~= nil and v:match("%u") ~= nil)
end

-- validate(p): the rules across fields (the tool's validate, before any operation)
function M.validate(p)
  local e = M.ENGINES[p.engine]
  if not p.image and not e.image then
    hypd.errors.refuse("image", "required", "image: required for engine custom (vllm and sglang have a default image)")
  end
  if p.engine == "sglang" and not p.command then
    hypd.errors.refuse("command", "required", "command: required for engine sglang (its image starts no server), e.g. " ..
      "[\"python3\", \"-m\", \"sglang.launch_server\", \"--model-path\", \"/s3/models/qwen\", \"--host\", " ..
      "\"0.0.0.0\", \"--port\", \"30000\"]")
  end
  for k, v in pairs(p.env or {}) do
    if type(k) ~= "string" or not k:match("^[A-Za-z_][A-Za-z0-9_.-]*$") then
      hypd.errors.refuse("env", "name", "env: " .. tostring(k) .. " is not an environment variable name")
    end
    if type(v) ~= "string" then hypd.errors.refuse("env." .. k, "type", "env." .. k .. ": must be a string") end
    if M.secret_name(k) or M.secret_value(v) then
      hypd.errors.refuse("env." .. k, "secret", "env." .. k .. ": looks like a secret, and env values are kept in plain " ..
        "text (in the operation and the Deployment); put it in a Kubernetes Secret and name it in secret_env: " ..
        "{\"" .. k .. "\": \"<secret name>/<key>\"}")
    end
  end
  for k, v in pairs(p.secret_env or {}) do
    if type(k) ~= "string" or not k:match("^[A-Za-z_][A-Za-z0-9_.-]*$") then
      hypd.errors.refuse("secret_env", "name", "secret_env: " .. tostring(k) .. " is not an environment variable name")
    end
    local sname = type(v) == "string" and v:match("^([a-z0-9][-a-z0-9.]*)/[-._%w]+$")
    if not sname or sname:match("[-.]$") or #sname > 253 then
      hypd.errors.refuse("secret_env." .. k, "pattern", "secret_env." .. k .. ": must be <secret name>/<key>")
    end
  end
  for _, f in ipairs { "command", "args" } do
    for i, x in ipairs(p[f] or {}) do
      for w in tostring(x):gmatch("%S+") do
        if M.secret_value(w:match("=(.*)$") or w) then
          hypd.errors.refuse(f .. "[" .. (i - 1) .. "]", "secret", f .. "[" .. (i - 1) .. "]: holds what looks like a " ..
            "token; pass secrets through secret_env (a Kubernetes Secret), never on the command line")
        end
      end
    end
  end
  return M.port_of(p)
end

-- sorted_env(env, secret_env) -> the container's env: values, then
-- valueFrom secretKeyRef for each secret_env NAME = "<secret>/<key>"
local function sorted_env(env, secret_env)
  local out = {}
  for _, src in ipairs { env or {}, secret_env or {} } do
    local keys = {}
    for k in pairs(src) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do
      if src == secret_env then
        local sname, skey = src[k]:match("^([^/]+)/(.+)$")
        out[#out + 1] = { name = k, valueFrom = { secretKeyRef = { name = sname, key = skey } } }
      else
        out[#out + 1] = { name = k, value = src[k] }
      end
    end
  end
  return #out > 0 and out or nil
end

-- objects(p, port) -> the Deployment and (unless a pool) the Service
function M.objects(p, port)
  local e = M.ENGINES[p.engine]
  local kind = p.service == "pool" and "pool" or "container"
  local top = I.labels(p.name, kind, { app = p.name, [I.ENGINE] = p.engine })
  local podl = I.labels(p.name, kind, { app = p.name, [I.ENGINE] = p.engine })
  if kind == "pool" then
    podl[I.BUSINESS], podl[I.POOL_TYPE] = I.UNASSIGNED, "model-pool"
  end
  local c = { name = e.container, image = p.image or e.image, command = p.command, args = p.args,
    ports = { { name = "http", containerPort = port, protocol = "TCP" } }, env = sorted_env(p.env, p.secret_env),
    securityContext = { capabilities = { add = { "IPC_LOCK" } } },
    volumeMounts = { { name = "shm", mountPath = "/dev/shm" } } }
  if p.gpus > 0 then
    local r = { ["nvidia.com/gpu"] = tostring(p.gpus) }
    c.resources = { requests = r, limits = { ["nvidia.com/gpu"] = tostring(p.gpus) } }
  end
  local health = p.health_path or e.health
  if health then
    c.readinessProbe = { httpGet = { path = health, port = "http" }, periodSeconds = 10, failureThreshold = 3 }
  end
  local volumes = { { name = "shm", emptyDir = { medium = "Memory" } } }
  if p.storage_claim ~= "" then
    table.insert(c.volumeMounts, 1, { name = "s3", mountPath = "/s3", readOnly = true })
    table.insert(volumes, 1, { name = "s3", persistentVolumeClaim = { claimName = p.storage_claim, readOnly = true } })
  end
  local function pref(weight, key, op, values)
    return { weight = weight, preference = { matchExpressions = { { key = key, operator = op, values = values } } } }
  end
  local dep = {
    apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = p.name, namespace = p.namespace, labels = top },
    spec = {
      replicas = p.replicas,
      selector = { matchLabels = { [I.NAME] = p.name } },
      template = {
        metadata = { labels = podl },
        spec = {
          affinity = { nodeAffinity = {
            requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = { { matchExpressions = {
              { key = "node.kubernetes.io/instance-type", operator = "In", values = { p.instance_type } } } } } },
            preferredDuringSchedulingIgnoredDuringExecution = {
              pref(100, "sagemaker.amazonaws.com/compute-type", "In", { "hyperpod" }),
              pref(90, "alpha.eksctl.io/nodegroup-name", "Exists"),
              pref(80, "karpenter.sh/capacity-type", "Exists") } } },
          tolerations = { { key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" } },
          containers = { c },
          volumes = volumes,
        },
      },
    },
  }
  local out = { dep }
  if kind ~= "pool" then
    out[2] = M.service(p.name, p.namespace, { [I.NAME] = p.name }, port, p.service, p.scheme,
      I.labels(p.name, kind, { app = p.name }))
  end
  return out
end

-- service(name, ns, selector, port, variant, scheme, labels) -> a Service
-- (variant clusterip: ClusterIP; external: an NLB LoadBalancer)
function M.service(name, ns, selector, port, variant, scheme, labels)
  local ext = variant == "external"
  local ann
  if ext then
    ann = {}
    for k, v in pairs(M.NLB) do ann[k] = v end
    ann[M.SCHEME] = scheme or "internal"
  end
  return { apiVersion = "v1", kind = "Service",
    metadata = { name = name, namespace = ns, labels = labels, annotations = ann },
    spec = { type = ext and "LoadBalancer" or "ClusterIP", selector = selector,
      ports = { { name = "http", port = port, targetPort = "http", protocol = "TCP" } } } }
end

return M
