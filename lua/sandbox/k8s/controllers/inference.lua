-- sandbox.k8s.controllers.inference: the HyperPod inference operator's
-- InferenceEndpointConfig and JumpStartModel (inference.sagemaker.aws.amazon.com/v1),
-- once their CRDs are served (the add-on amazon-sagemaker-hyperpod-inference
-- brings them). For each object it keeps, owned by the object:
--   Deployment <name>  the model server pods (label app=<name> and the
--                      object's own app.kubernetes.io/managed-by and
--                      hypd.io/* labels), placed by nodeSelector
--                      node.kubernetes.io/instance-type on spec's instance
--                      type. An InferenceEndpointConfig runs spec.worker
--                      (image, args/command, env, resources, its port named
--                      http); a JumpStartModel runs the serving image of its
--                      hub document (DescribeHubContent on the public hub)
--                      on port 8080 with every GPU of the instance type.
--   Service <name>     ClusterIP, port `http` to the model server's port
--   ScaledObject <name>-scaled-object  (KEDA) when autoScalingSpec is given
-- and the status the operator reports: state DeploymentPending ->
-- DeploymentInProgress -> DeploymentComplete (every replica available), or
-- DeploymentFailed (a JumpStart model or version not in the hub, an
-- instance type the model does not support, not complete within
-- spec.maxDeployTimeInSeconds, 3600 by default); conditions of the same names
-- (the newest last), replicas (available), selector, observedGeneration.
-- With a SageMaker endpoint name (IEC spec.endpointName, JSM
-- spec.sageMakerEndpoint.name) the endpoint is registered in SageMaker
-- (sandbox.services.sagemaker.endpoints: Creating, InService once the
-- deployment is complete) and status.endpoints.sagemaker names its ARNs; it
-- is deregistered when the object goes. SageMaker Runtime's InvokeEndpoint
-- is not simulated.
local aws = require "sandbox.k8s.controllers._aws"
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local json = require "hypd.json"
local types = require "sandbox.data.instance_types"

local M = {}
M.GROUP, M.VERSION = "inference.sagemaker.aws.amazon.com", "v1"
M.KINDS = { InferenceEndpointConfig = "inferenceendpointconfigs", JumpStartModel = "jumpstartmodels" }
M.TYPE_LABEL = "node.kubernetes.io/instance-type"
M.COMPONENT = "hyperpod-inference-operator"
M.JUMPSTART_PORT = 8080
M.MAX_DEPLOY = 3600 -- spec.maxDeployTimeInSeconds's default

local key = ctl_.key

local function split(k) return k:match("^([^|]*)|([^/]*)/(.*)$") end

-- client_labels(obj) -> the object's labels a client put there for itself
-- (app.kubernetes.io/managed-by and hypd.io/*, but the operation that last
-- wrote it), copied onto its pods
local function client_labels(obj)
  local out = {}
  for k, v in pairs(obj.metadata.labels or {}) do
    if (k == "app.kubernetes.io/managed-by" or k:find("^hypd%.io/")) and k ~= "hypd.io/operation" then out[k] = v end
  end
  return out
end

local function gpus_of(itype)
  local t = types[itype]
  local n = 0
  for _, a in ipairs(t and t.accelerators or {}) do if a.kind == "gpu" then n = n + (a.count or 0) end end
  return n
end

-- hub(ctl, spec) -> doc, version | nil, reason, message
local function hub(ctl, model)
  local input = { HubName = model.modelHubName or "SageMakerPublicHub", HubContentType = "Model",
    HubContentName = model.modelId }
  if model.modelVersion and model.modelVersion ~= "" then input.HubContentVersion = model.modelVersion end
  local d, err = aws.call(ctl.region, "sagemaker", "DescribeHubContent", input)
  if not d then return nil, "ModelNotFound", tostring(err and err.message or err) end
  local ok, doc = pcall(json.decode, d.HubContentDocument)
  if not ok or type(doc) ~= "table" then return nil, "InvalidModel", "the hub document is not JSON" end
  return doc, d.HubContentVersion
end

-- server(ctl, obj) -> {image, args, command, env, port, resources, itype,
-- replicas, mount, endpoint, model, version} | nil, reason, message
local function server(ctl, obj)
  local spec = obj.spec or {}
  if obj.kind == "InferenceEndpointConfig" then
    local w = spec.worker or {}
    if not w.image or not (w.modelInvocationPort or {}).containerPort then
      return nil, "InvalidSpec", "spec.worker needs image and modelInvocationPort.containerPort"
    end
    local env = {}
    for _, e in ipairs(w.environmentVariables or {}) do env[#env + 1] = ctl_.copy(e) end
    local src = spec.modelSourceConfig or {}
    local where
    if src.modelSourceType == "s3" then
      where = "s3://" .. tostring((src.s3Storage or {}).bucketName) .. "/" .. tostring(src.modelLocation or "")
    elseif src.modelSourceType == "fsx" then
      where = "fsx://" .. tostring((src.fsxStorage or {}).fileSystemId) .. "/" .. tostring(src.modelLocation or "")
    end
    return { image = w.image, args = w.args, command = w.command, env = env,
      port = tonumber(w.modelInvocationPort.containerPort), resources = w.resources, itype = spec.instanceType,
      replicas = tonumber(spec.replicas) or 1, mount = (w.modelVolumeMount or {}).mountPath or "/opt/ml/model",
      volume = (w.modelVolumeMount or {}).name or "model-weights", source = where,
      endpoint = spec.endpointName ~= "" and spec.endpointName or nil, model = spec.modelName,
      version = spec.modelVersion }
  end
  local model, srv = spec.model or {}, spec.server or {}
  if not model.modelId or not srv.instanceType then
    return nil, "InvalidSpec", "spec.model.modelId and spec.server.instanceType are required"
  end
  local doc, version, msg = hub(ctl, model)
  if not doc then return nil, version, msg end
  local ok = false
  for _, t in ipairs(doc.SupportedInferenceInstanceTypes or {}) do ok = ok or t == srv.instanceType end
  if not ok then
    return nil, "UnsupportedInstanceType", string.format("instance type %s is not supported by model %s; " ..
      "supported: %s", srv.instanceType, model.modelId, table.concat(doc.SupportedInferenceInstanceTypes or {}, ", "))
  end
  if doc.HostingEulaUri and model.acceptEula ~= true then
    return nil, "EulaNotAccepted", "model " .. model.modelId .. " is gated: spec.model.acceptEula must be true " ..
      "(terms: " .. doc.HostingEulaUri .. ")"
  end
  local env = {}
  for _, e in ipairs(doc.InferenceEnvironmentVariables or {}) do
    env[#env + 1] = { name = e.Name, value = tostring(e.Default) }
  end
  local g = gpus_of(srv.instanceType)
  env[#env + 1] = { name = "SM_NUM_GPUS", value = tostring(g) }
  for _, e in ipairs(spec.environmentVariables or {}) do env[#env + 1] = ctl_.copy(e) end
  local res = g > 0 and { requests = { ["nvidia.com/gpu"] = tostring(g) }, limits = { ["nvidia.com/gpu"] = tostring(g) } }
    or nil
  local ep = spec.sageMakerEndpoint or {}
  return { image = doc.HostingEcrUri, env = env, port = M.JUMPSTART_PORT, resources = res, itype = srv.instanceType,
    replicas = tonumber(spec.replicas) or 1, mount = "/opt/ml/model", volume = "model-weights",
    source = doc.HostingArtifactUri, endpoint = ep.name ~= "" and ep.name or nil, model = model.modelId,
    version = version }
end

local function labels_for(obj)
  local l = client_labels(obj)
  l.app = obj.metadata.name
  return l
end

local function deployment(obj, s)
  local name, ns = obj.metadata.name, obj.metadata.namespace
  local pod_labels = labels_for(obj)
  local c = { name = "inference-server", image = s.image, args = s.args, command = s.command,
    env = #s.env > 0 and s.env or nil, ports = { { name = "http", containerPort = s.port, protocol = "TCP" } },
    resources = s.resources, volumeMounts = { { name = s.volume, mountPath = s.mount } } }
  local top = { app = name, ["app.kubernetes.io/managed-by"] = M.COMPONENT }
  for k, v in pairs(client_labels(obj)) do if k ~= "app.kubernetes.io/managed-by" then top[k] = v end end
  return { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = name, namespace = ns, labels = top, ownerReferences = { ctl_.owner_ref(obj) } },
    spec = { replicas = s.replicas, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = pod_labels,
        annotations = { ["inference.sagemaker.aws.amazon.com/model-source"] = s.source } },
        spec = { nodeSelector = s.itype and { [M.TYPE_LABEL] = s.itype } or nil, containers = { c },
          volumes = { { name = s.volume, emptyDir = {} } },
          tolerations = { { key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" } } } } } }
end

local function service(obj, s)
  local name, ns = obj.metadata.name, obj.metadata.namespace
  local top = { app = name, ["app.kubernetes.io/managed-by"] = M.COMPONENT }
  for k, v in pairs(client_labels(obj)) do if k ~= "app.kubernetes.io/managed-by" then top[k] = v end end
  return { apiVersion = "v1", kind = "Service",
    metadata = { name = name, namespace = ns, labels = top, ownerReferences = { ctl_.owner_ref(obj) } },
    spec = { type = "ClusterIP", selector = { app = name },
      ports = { { name = "http", port = s.port, targetPort = s.port, protocol = "TCP" } } } }
end

local function scaled_object(obj)
  local a = (obj.spec or {}).autoScalingSpec
  if type(a) ~= "table" then return nil end
  local triggers = {}
  local pt = a.prometheusTrigger
  if type(pt) == "table" then
    triggers[#triggers + 1] = { type = "prometheus", metadata = { serverAddress = pt.serverAddress, query = pt.query,
      threshold = tostring(pt.targetValue or 1), activationThreshold = pt.activationTargetValue and
      tostring(pt.activationTargetValue) or nil } }
  end
  return { apiVersion = "keda.sh/v1alpha1", kind = "ScaledObject",
    metadata = { name = obj.metadata.name .. "-scaled-object", namespace = obj.metadata.namespace,
      labels = { app = obj.metadata.name, ["app.kubernetes.io/managed-by"] = M.COMPONENT },
      ownerReferences = { ctl_.owner_ref(obj) } },
    spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = obj.metadata.name },
      minReplicaCount = a.minReplicaCount, maxReplicaCount = a.maxReplicaCount,
      pollingInterval = a.pollingInterval, cooldownPeriod = a.cooldownPeriod, triggers = triggers } }
end

-- put(ctl, r, want) -> the stored object: created when missing, its spec
-- and labels replaced when they differ (replicas kept when a scaler owns them)
local function put(ctl, r, want, keep_replicas)
  local cl = ctl.cl
  local live = cl:get(r, want.metadata.namespace, want.metadata.name)
  if not live then return cl:create(r, want) end
  local c = ctl_.copy(live)
  local spec = ctl_.copy(want.spec)
  if keep_replicas and live.spec then spec.replicas = live.spec.replicas end
  if r.kind == "Service" then
    spec.clusterIP, spec.clusterIPs = live.spec.clusterIP, live.spec.clusterIPs
    spec.ipFamilies, spec.ipFamilyPolicy = live.spec.ipFamilies, live.spec.ipFamilyPolicy
    spec.sessionAffinity, spec.internalTrafficPolicy = live.spec.sessionAffinity, live.spec.internalTrafficPolicy
  end
  local same = true
  for k, v in pairs(spec) do if not ctl_.equal(live.spec[k], v) then same = false end end
  if same and ctl_.equal(live.metadata.labels, want.metadata.labels) then return live end
  for k, v in pairs(spec) do c.spec[k] = v end
  c.metadata.labels = want.metadata.labels
  return cl:update(r, c) or live
end

local LAST = { last = true }

local function set_state(st, state, reason, message)
  st.state = state
  for _, t in ipairs { "DeploymentInProgress", "DeploymentComplete", "DeploymentFailed" } do
    if t ~= state and ctl_.condition(st.conditions, t) then
      st.conditions = ctl_.set_condition(st.conditions, t, "False", reason, message)
    end
  end
  if state ~= "DeploymentPending" then
    local c = ctl_.condition(st.conditions, state)
    if not c or c.status ~= "True" or c.message ~= message then
      st.conditions = ctl_.set_condition(st.conditions, state, "True", reason, message, LAST)
    end
  end
end

local function endpoint(ctl, obj, s, ready, avail)
  local actx = aws.ctx(ctl.region, "sagemaker")
  local E = require "sandbox.services.sagemaker.endpoints"
  local e, why = E.register(actx, { name = s.endpoint, model = s.model, instance_type = s.itype,
    replicas = s.replicas, ready_replicas = avail, ready = ready, image = s.image,
    source = { kind = obj.kind, namespace = obj.metadata.namespace, name = obj.metadata.name, cluster = ctl.cl.name } })
  if not e then return { state = "Failed", endpointArn = "", configArn = "", modelArn = "" }, why end
  local cfg = actx.state:get("endpoint_config", e.EndpointConfigName)
  return { state = e.EndpointStatus, endpointArn = e.EndpointArn, configArn = cfg and cfg.EndpointConfigArn or "",
    modelArn = actx:arn("model/" .. tostring(s.model or obj.metadata.name):lower(), "sagemaker") }
end

ctl_.handlers.inference = function(ctl, k)
  local kind, ns, name = split(k)
  local r = ctl:r(M.GROUP, M.VERSION, M.KINDS[kind] or "")
  local mem = ctl:memo("inference")
  local obj = r and ctl.cl:get(r, ns, name)
  if not obj or obj.metadata.deletionTimestamp then
    -- the endpoints this object registered go with it (found by their
    -- source, so a restarted sandbox forgets none)
    require("sandbox.services.sagemaker.endpoints").deregister_source(aws.ctx(ctl.region, "sagemaker"),
      { kind = kind, namespace = ns, name = name, cluster = ctl.cl.name })
    mem[k] = nil
    return
  end
  local st = ctl_.copy(obj.status or {})
  st.observedGeneration = obj.metadata.generation
  local s, reason, msg = server(ctl, obj)
  if not s then
    set_state(st, "DeploymentFailed", reason, msg)
    if not ctl_.is_true((obj.status or {}).conditions, "DeploymentFailed") then
      ctl_.event(ctl, obj, "Warning", reason, msg, M.COMPONENT)
    end
    ctl_.put_status(ctl, r, obj, st)
    return
  end
  local dr, sr = ctl:r("apps", "v1", "deployments"), ctl:r("", "v1", "services")
  local so = scaled_object(obj)
  local sor = so and ctl:r("keda.sh", "v1alpha1", "scaledobjects")
  local d = put(ctl, dr, deployment(obj, s), so ~= nil)
  put(ctl, sr, service(obj, s))
  if so and sor then put(ctl, sor, so) end
  local ds = d.status or {}
  local want = (d.spec or {}).replicas or s.replicas
  local avail = ds.availableReplicas or 0
  local done = avail >= want and (ds.updatedReplicas or ds.replicas or 0) >= want
    and (ds.observedGeneration or 0) >= (d.metadata.generation or 1)
  st.replicas = avail
  st.selector = "app=" .. name
  -- spec.maxDeployTimeInSeconds (3600 by default): a generation not
  -- complete by then has failed
  local gen = obj.metadata.generation or 1
  local t0 = mem[k] and mem[k].gen == gen and mem[k].since or core.now()
  local limit = tonumber((obj.spec or {}).maxDeployTimeInSeconds) or M.MAX_DEPLOY
  local why
  local was = mem[k] and mem[k].endpoint
  if was and was ~= s.endpoint then
    require("sandbox.services.sagemaker.endpoints").deregister(aws.ctx(ctl.region, "sagemaker"), was)
  end
  if s.endpoint then
    local sm
    sm, why = endpoint(ctl, obj, s, done, avail)
    st.endpoints = { sagemaker = sm }
  else
    st.endpoints = nil
  end
  mem[k] = { endpoint = s.endpoint and not why and s.endpoint or nil, gen = gen, since = t0 }
  local late = not done and (core.now() - t0) * ctl_.speed() >= limit
  local prev = ctl_.condition((obj.status or {}).conditions, "DeploymentFailed")
  local failed_before = prev and prev.status == "True" and prev.reason == "DeploymentTimedOut" and
    (obj.status or {}).observedGeneration == gen
  if why then
    set_state(st, "DeploymentFailed", "SageMakerEndpointRegistrationFailed", why)
  elseif not done and (late or failed_before) then
    set_state(st, "DeploymentFailed", "DeploymentTimedOut", string.format("Deployment %s did not complete in " ..
      "%d seconds (maxDeployTimeInSeconds): %d of %d replicas available.", name, limit, avail, want))
  elseif done then
    set_state(st, "DeploymentComplete", "DeploymentComplete", string.format(
      "Deployment %s has %d of %d replicas available.", name, avail, want))
  else
    set_state(st, "DeploymentInProgress", "DeploymentInProgress", string.format(
      "Deployment %s has %d of %d replicas available.", name, avail, want))
    ctl:at(t0 + limit / ctl_.speed(), "inference", k)
  end
  local before = (obj.status or {}).state
  ctl_.put_status(ctl, r, obj, st)
  if before ~= st.state and st.state == "DeploymentComplete" then
    ctl_.event(ctl, obj, "Normal", "DeploymentComplete", "The model is deployed and serving.", M.COMPONENT)
  end
end

function M.watch(ctl, _, r, obj)
  if r.group == M.GROUP and M.KINDS[r.kind] then
    ctl:enqueue("inference", r.kind .. "|" .. key(obj))
  elseif (r.group == "apps" and r.kind == "Deployment") or (r.group == "" and r.kind == "Service") then
    for kind in pairs(M.KINDS) do
      local o = ctl_.owner(obj, kind)
      if o then ctl:enqueue("inference", kind .. "|" .. obj.metadata.namespace .. "/" .. o.name) end
    end
  end
end

function M.start(ctl)
  for kind, plural in pairs(M.KINDS) do
    local r = ctl:r(M.GROUP, M.VERSION, plural)
    if r then
      for _, o in ipairs(ctl.cl:list(r)) do ctl:enqueue("inference", kind .. "|" .. key(o)) end
    end
  end
end

return M
