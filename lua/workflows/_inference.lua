-- _inference: what every inference tool shares. The contract
-- labels, finding an inference deployment of any kind by them, its pods
-- and Services, and the view inference_get gives. Kinds, by the label
-- hypd.io/inference-kind on the top object and its pod template:
--   container  Deployment <name> (inference_deploy_container), Service <name>
--   pool       Deployment <name> of warm workers, pods business=unassigned
--              until assigned (business=<model>, Service <model>)
--   router     Deployment (inference_deploy_router)
--   managed    InferenceEndpointConfig <name> (its controller's Deployment
--              and Service carry the CR's hypd labels on their pods)
--   jumpstart  JumpStartModel <name>, likewise
--
--   local I = require "_inference"  (or "inference._inference" in its area)
--   I.find(conn, name, ns [, no_pods]) -> d | nil, where d = {kind, name, namespace,
--     object (the top object: Deployment or CR), deployment (the Deployment
--     that runs the pods, or nil while a controller has not made it yet),
--     pods (list), service (the Service to call: selecting the pods,
--     <name> preferred; nil for a pool), services (every one selecting them)}
--   I.get(ctx, p) -> e, conn, d: the EKS cluster (hp.eks), its connection,
--     and the deployment p.name in p.namespace; NOT_FOUND naming "name"
--     (with p.models, a pool's model name finds the pool: I.find_model)
--   I.find_model(conn, model, ns) -> the pool serving model, d.model set and
--     d.service its Service <model> (what a call to the model goes to)
--   I.list(conn, ns | nil) -> {d...}: hypd's (ns nil: every namespace), without pods
--   I.pods(conn, d), I.services(conn, ns, pods [, prefer]), I.labels(name, kind [, extra])
--   I.port(d) -> the serving port (container port named http); I.replicas(d)
--     -> desired, ready; I.summary(d) -> inference_list's row
--   I.view(conn, d, opts) -> the status inference_get answers
--   I.NAME_PARAM, I.NS_PARAM: the name and namespace parameters; I.target(p, what)
-- For a call to a deployment (contract 3): d.service (a pool's model:
-- find_model(...).service) and its port, through the API service proxy.
local M = {}

M.MANAGED_BY = "app.kubernetes.io/managed-by"
M.NAME = "hypd.io/inference"
M.KIND = "hypd.io/inference-kind"
M.ENGINE = "hypd.io/engine"
M.MODEL = "hypd.io/model"
M.BUSINESS = "business"
M.UNASSIGNED = "unassigned"
M.POOL_TYPE = "deployment-type"
M.DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
M.KINDS = { "container", "pool", "managed", "jumpstart", "router" }

-- the custom resources of the managed kinds (inference operator), in the
-- order they are looked for (the operator's CRDs have served
-- JumpStartModel as v1alpha1 and as v1; both have spec.replicas)
M.CRS = {
  { kind = "InferenceEndpointConfig", api = "inference.sagemaker.aws.amazon.com/v1", label = "managed" },
  { kind = "JumpStartModel", api = "inference.sagemaker.aws.amazon.com/v1", label = "jumpstart" },
  { kind = "JumpStartModel", api = "inference.sagemaker.aws.amazon.com/v1alpha1", label = "jumpstart" },
}

M.DNS = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
M.NAME_PARAM = { type = "string", required = true, pattern = "^[a-z]([-a-z0-9]*[a-z0-9])?$", max_length = 53,
  pattern_help = "a Kubernetes name usable for a Service: lowercase letters, digits and '-', starting with a " ..
    "letter and ending with a letter or digit", description = "the inference deployment's name" }
M.NS_PARAM = { type = "string", default = "default", pattern = M.DNS, max_length = 63,
  pattern_help = "a Kubernetes namespace name", description = "the namespace (default: default)" }

local function missing(err)
  return type(err) == "table" and (err.code == "NotFound" or err.status == 404)
end

-- tryget(conn, api, kind, name, ns) -> obj | nil (nil too when the kind is not served)
local function tryget(conn, api, kind, name, ns)
  local o, err = conn:get(api, kind, name, { namespace = ns })
  if o then return o end
  if missing(err) then return nil end
  error(err, 0)
end

-- trylist(conn, api, kind, opts) -> items ({} when the kind is not served)
local function trylist(conn, api, kind, opts)
  local items, err = conn:list(api, kind, opts)
  if items then return items end
  if missing(err) then return {} end
  error(err, 0)
end

-- labels(name, kind [, extra]) -> the contract labels of an inference object
function M.labels(name, kind, extra)
  local l = { [M.MANAGED_BY] = "hypd", [M.NAME] = name, [M.KIND] = kind }
  for k, v in pairs(extra or {}) do l[k] = v end
  return l
end

local function lbl(o) return ((o or {}).metadata or {}).labels or {} end
local function tpl_labels(dep) return (((dep.spec or {}).template or {}).metadata or {}).labels or {} end

-- owned_by_cr(o) -> the ownerReference to a managed kind's CR, or nil
local function owned_by_cr(o)
  for _, r in ipairs(((o or {}).metadata or {}).ownerReferences or {}) do
    for _, c in ipairs(M.CRS) do if r.kind == c.kind then return r end end
  end
end

-- subset(sel, labels) -> true when every key of sel has its value in labels
function M.subset(sel, labels)
  if type(sel) ~= "table" or next(sel) == nil then return false end
  for k, v in pairs(sel) do if (labels or {})[k] ~= v then return false end end
  return true
end

-- services(conn, ns, pods [, prefer]) -> the Services whose selector
-- matches one of the pods (a label subset), the one named prefer first
function M.services(conn, ns, pods, prefer)
  local out = {}
  for _, s in ipairs(conn:list("v1", "Service", { namespace = ns }) or {}) do
    local sel = (s.spec or {}).selector
    for _, p in ipairs(pods) do
      if M.subset(sel, lbl(p)) then out[#out + 1] = s; break end
    end
  end
  table.sort(out, function(a, b)
    if a.metadata.name == prefer then return b.metadata.name ~= prefer end
    if b.metadata.name == prefer then return false end
    return a.metadata.name < b.metadata.name
  end)
  return out
end

-- pods(conn, d) -> the deployment's pods: labelled hypd.io/inference=<name>
-- (the contract), else those its Deployment's selector picks
function M.pods(conn, d)
  local items = conn:list("v1", "Pod", { namespace = d.namespace, labels = { [M.NAME] = d.name } }) or {}
  if #items == 0 and d.deployment then
    local sel = ((d.deployment.spec or {}).selector or {}).matchLabels
    if sel and next(sel) then items = conn:list("v1", "Pod", { namespace = d.namespace, labels = sel }) or {} end
  end
  table.sort(items, function(a, b) return a.metadata.name < b.metadata.name end)
  return items
end

-- the Deployment a CR's controller made (owned by it, or labelled for it)
local function cr_deployment(conn, cr, ns)
  local name, uid = cr.metadata.name, cr.metadata.uid
  local byname
  for _, dep in ipairs(conn:list("apps/v1", "Deployment", { namespace = ns }) or {}) do
    for _, r in ipairs(dep.metadata.ownerReferences or {}) do
      if r.uid == uid then return dep end
    end
    if lbl(dep)[M.NAME] == name or tpl_labels(dep)[M.NAME] == name then byname = byname or dep end
  end
  return byname
end

local function complete(conn, d, with_pods)
  if not with_pods then return d end
  d.pods = M.pods(conn, d)
  if d.kind ~= "pool" then
    d.services = M.services(conn, d.namespace, d.pods, d.name)
    d.service = d.services[1]
  else
    d.services = {}
    for _, s in ipairs(conn:list("v1", "Service", { namespace = d.namespace, labels = { [M.NAME] = d.name } }) or {}) do
      d.services[#d.services + 1] = s
    end
  end
  return d
end

-- find(conn, name, ns [, no_pods]) -> d | nil (see the header)
function M.find(conn, name, ns, no_pods)
  for _, c in ipairs(M.CRS) do
    local cr = tryget(conn, c.api, c.kind, name, ns)
    if cr then
      cr.kind, cr.apiVersion = cr.kind or c.kind, cr.apiVersion or c.api
      return complete(conn, { kind = lbl(cr)[M.KIND] or c.label, name = name, namespace = ns, object = cr,
        deployment = cr_deployment(conn, cr, ns) }, not no_pods)
    end
  end
  local dep = tryget(conn, "apps/v1", "Deployment", name, ns)
  if dep and not owned_by_cr(dep) and (lbl(dep)[M.KIND] or tpl_labels(dep)[M.KIND]) then
    dep.kind, dep.apiVersion = "Deployment", "apps/v1"
    return complete(conn, { kind = lbl(dep)[M.KIND] or tpl_labels(dep)[M.KIND], name = name, namespace = ns,
      object = dep, deployment = dep }, not no_pods)
  end
  -- a router or other kind whose Deployment has another name than the deployment's
  for _, o in ipairs(conn:list("apps/v1", "Deployment", { namespace = ns, labels = { [M.NAME] = name } }) or {}) do
    if lbl(o)[M.KIND] and not owned_by_cr(o) then
      o.kind, o.apiVersion = "Deployment", "apps/v1"
      return complete(conn, { kind = lbl(o)[M.KIND], name = name, namespace = ns, object = o, deployment = o },
        not no_pods)
    end
  end
end

-- find_model(conn, model, ns) -> d | nil: the pool serving model (a
-- pool's model Service <model>, labelled hypd.io/model), with d.model =
-- model, d.service = that Service and d.pods the pool's pods
function M.find_model(conn, model, ns)
  local s = tryget(conn, "v1", "Service", model, ns)
  local l = lbl(s)
  if not s or l[M.MODEL] ~= model or l[M.KIND] ~= "pool" or not l[M.NAME] then return nil end
  local d = M.find(conn, l[M.NAME], ns)
  if not d or d.kind ~= "pool" then return nil end
  d.model, d.service = model, s
  return d
end

-- get(ctx, p) -> e, conn, d: the deployment p.name in p.namespace of the
-- call's cluster (or, when p.name is a model of a pool, that pool with
-- d.model); NOT_FOUND naming "name" when there is none
function M.get(ctx, p, no_pods)
  local e = require("_hyperpod").eks(ctx, p)
  local conn = ctx:k8s(e.name)
  local d = M.find(conn, p.name, p.namespace, no_pods) or (p.models and M.find_model(conn, p.name, p.namespace))
  if not d then
    hypd.errors.refuse("name", "exists", string.format("no inference deployment %s/%s on cluster %s (inference_list " ..
      "lists them)", p.namespace, p.name, e.name),
      { code = "NOT_FOUND", field_message = "name: no inference deployment " .. p.name })
  end
  return e, conn, d
end

-- list(conn, ns) -> every inference deployment hypd made (ns nil: all
-- namespaces), found by hypd.io/inference-kind; without pods
function M.list(conn, ns)
  local out, seen = {}, {}
  local opts = { namespace = ns or "default", all_namespaces = ns == nil,
    labels = M.KIND .. "," .. M.MANAGED_BY .. "=hypd" }
  for _, c in ipairs(M.CRS) do
    for _, cr in ipairs(trylist(conn, c.api, c.kind, opts)) do
      cr.kind, cr.apiVersion = cr.kind or c.kind, cr.apiVersion or c.api
      local k = cr.metadata.namespace .. "/" .. cr.metadata.name
      if not seen[k] then
        seen[k] = true
        out[#out + 1] = { kind = lbl(cr)[M.KIND] or c.label, name = cr.metadata.name,
          namespace = cr.metadata.namespace, object = cr, deployment = cr_deployment(conn, cr, cr.metadata.namespace) }
      end
    end
  end
  for _, dep in ipairs(conn:list("apps/v1", "Deployment", opts) or {}) do
    local name = lbl(dep)[M.NAME] or dep.metadata.name
    local k = dep.metadata.namespace .. "/" .. name
    if not owned_by_cr(dep) and not seen[k] then
      seen[k] = true
      dep.kind, dep.apiVersion = "Deployment", "apps/v1"
      out[#out + 1] = { kind = lbl(dep)[M.KIND], name = name, namespace = dep.metadata.namespace, object = dep,
        deployment = dep }
    end
  end
  table.sort(out, function(a, b) return a.namespace .. "/" .. a.name < b.namespace .. "/" .. b.name end)
  return out
end

-- replicas(d) -> desired, ready (the Deployment's, else the CR's spec.replicas)
function M.replicas(d)
  local dep = d.deployment
  local desired = dep and (dep.spec or {}).replicas
  if d.object ~= dep then desired = ((d.object or {}).spec or {}).replicas or desired end
  local ready = dep and ((dep.status or {}).readyReplicas or 0) or 0
  return math.tointeger(desired) or (dep and 1) or 0, math.tointeger(ready) or 0
end

-- container(d) -> the first container of the deployment's pods
local function container(d)
  local dep = d.deployment
  return dep and ((((dep.spec or {}).template or {}).spec or {}).containers or {})[1] or nil
end

-- port(d) -> the serving port (the container port named http, else the first)
function M.port(d)
  local c = container(d)
  local first
  for _, cp in ipairs((c or {}).ports or {}) do
    if cp.name == "http" then return cp.containerPort end
    first = first or cp.containerPort
  end
  return first
end

-- summary(d) -> the short row inference_list gives
function M.summary(d)
  local desired, ready = M.replicas(d)
  local c = container(d)
  return { name = d.name, namespace = d.namespace, kind = d.kind, object = d.object.kind .. "/" ..
    d.object.metadata.name, engine = lbl(d.object)[M.ENGINE], image = c and c.image, port = M.port(d),
    replicas = desired, ready = ready, created = d.object.metadata.creationTimestamp }
end

local function ready(pod)
  for _, c in ipairs((pod.status or {}).conditions or {}) do
    if c.type == "Ready" then return c.status == "True" end
  end
  return false
end
M.ready = ready

-- unschedulable(pod) -> the scheduler's message when it could not place the pod
function M.unschedulable(pod)
  for _, c in ipairs((pod.status or {}).conditions or {}) do
    if c.type == "PodScheduled" and c.status == "False" then return c.message or c.reason end
  end
end

-- trouble(pod) -> "pod: reason: message" | nil: why a pod is not ready as
-- Kubernetes says it (a container waiting or ended with a reason, a
-- condition that is False with a message), for a wait's progress note
function M.trouble(pod)
  local ps = pod.status or {}
  for _, cs in ipairs(ps.containerStatuses or {}) do
    local w = (cs.state or {}).waiting or (cs.state or {}).terminated
    if w and w.reason and w.reason ~= "ContainerCreating" and w.reason ~= "Completed" then
      return pod.metadata.name .. ": " .. w.reason .. (w.message and (": " .. w.message) or "")
    end
  end
  for _, c in ipairs(ps.conditions or {}) do
    if c.status == "False" and c.message and c.message ~= "" then
      return pod.metadata.name .. ": " .. tostring(c.reason or c.type) .. ": " .. c.message
    end
  end
end

-- service_view(s) -> {name, type, port, cluster_ip, external, selector}
function M.service_view(s)
  if not s then return nil end
  local sp = s.spec or {}
  local port = (sp.ports or {})[1] or {}
  local ing = (((s.status or {}).loadBalancer or {}).ingress or {})[1] or {}
  return { name = s.metadata.name, type = sp.type or "ClusterIP", port = port.port, port_name = port.name,
    target_port = port.targetPort, cluster_ip = sp.clusterIP, external = ing.hostname or ing.ip,
    selector = sp.selector, model = lbl(s)[M.MODEL] }
end

local function endpoints(conn, ns, svc)
  local ep = conn:get("v1", "Endpoints", svc, { namespace = ns })
  local out = hypd.json.array()
  for _, sub in ipairs((ep or {}).subsets or {}) do
    for _, a in ipairs(sub.addresses or {}) do out[#out + 1] = (a.targetRef or {}).name or a.ip end
  end
  table.sort(out)
  return out
end
M.endpoints = endpoints

-- view(conn, d, opts) -> the status inference_get answers: replicas ready
-- of desired, pods (node, phase, ready, assignment, why Pending), the
-- Service and its port (a pool: its models with their Services), recent
-- events (the scheduler's FailedScheduling among them) and the last log
-- lines of each pod. opts: tail (lines per pod), events (how many)
function M.view(conn, d, opts)
  opts = opts or {}
  local desired, nready = M.replicas(d)
  local c = container(d)
  local v = { name = d.name, namespace = d.namespace, kind = d.kind, object = d.object.kind .. "/" .. d.name,
    engine = lbl(d.object)[M.ENGINE], image = c and c.image, port = M.port(d),
    replicas = { desired = desired, ready = nready }, deployment = d.deployment and d.deployment.metadata.name,
    conditions = (d.object.status or {}).conditions or hypd.json.array() }
  v.pods = hypd.json.array()
  local names, pending = {}, nil
  local unassigned = 0
  for _, pod in ipairs(d.pods or {}) do
    local ps = pod.status or {}
    local restarts, waiting = 0, nil
    for _, cs in ipairs(ps.containerStatuses or {}) do
      restarts = restarts + (tonumber(cs.restartCount) or 0)
      local w = (cs.state or {}).waiting or (cs.state or {}).terminated
      if w and w.reason and not waiting then waiting = w.reason .. (w.message and (": " .. w.message) or "") end
    end
    local row = { name = pod.metadata.name, node = pod.spec.nodeName, phase = ps.phase or "Pending",
      ready = ready(pod), restarts = restarts, ip = ps.podIP, container_state = waiting }
    if d.kind == "pool" then
      row.assigned = lbl(pod)[M.BUSINESS]
      if row.assigned == M.UNASSIGNED then unassigned = unassigned + 1 end
    end
    local why = M.unschedulable(pod)
    if why then row.pending_reason = why; pending = pending or why end
    if pod.metadata.deletionTimestamp then row.terminating = true end
    if (opts.tail or 0) > 0 and pod.spec.nodeName then
      local text = conn:logs(pod.metadata.name, { namespace = d.namespace, tail = opts.tail })
      if text then
        local lines = hypd.json.array()
        for line in tostring(text):gmatch("[^\n]+") do lines[#lines + 1] = line end
        row.logs = lines
      end
    end
    names[pod.metadata.name] = true
    v.pods[#v.pods + 1] = row
  end
  v.pending_reason = pending
  if d.model then
    v.model = d.model
    v.service = M.service_view(d.service)
    v.service.endpoints = endpoints(conn, d.namespace, d.model)
  end
  if d.kind == "pool" then
    v.unassigned = unassigned
    v.models = hypd.json.array()
    for _, s in ipairs(d.services or {}) do
      local sv = M.service_view(s)
      sv.endpoints = endpoints(conn, d.namespace, s.metadata.name)
      v.models[#v.models + 1] = sv
    end
  else
    v.service = M.service_view(d.service)
    if v.service then v.service.endpoints = endpoints(conn, d.namespace, d.service.metadata.name) end
  end
  -- events of the top object, its Deployment and ReplicaSets, and its pods
  local mine = { [d.object.kind .. "/" .. d.name] = true }
  if d.deployment then mine["Deployment/" .. d.deployment.metadata.name] = true end
  local events = hypd.json.array()
  for _, ev in ipairs(conn:list("v1", "Event", { namespace = d.namespace }) or {}) do
    local io = ev.involvedObject or {}
    local ok = mine[tostring(io.kind) .. "/" .. tostring(io.name)] or (io.kind == "Pod" and names[io.name])
    if not ok and io.kind == "ReplicaSet" and d.deployment then
      ok = tostring(io.name):sub(1, #d.deployment.metadata.name + 1) == d.deployment.metadata.name .. "-"
    end
    if ok then
      events[#events + 1] = { type = ev.type, reason = ev.reason, message = ev.message,
        object = io.kind .. "/" .. tostring(io.name), count = ev.count,
        time = ev.lastTimestamp or ev.eventTime or (ev.metadata or {}).creationTimestamp }
    end
  end
  table.sort(events, function(a, b) return tostring(a.time) < tostring(b.time) end)
  while #events > (opts.events or 20) do table.remove(events, 1) end
  v.events = events
  v.autoscaling = M.autoscaling(conn, d)
  return v
end

-- autoscaling(conn, d) -> the KEDA ScaledObjects scaling d's Deployment:
-- [{name, min, max, triggers = [{type, query, threshold}], ready, active,
-- message}], or nil when there are none (or KEDA is not installed)
function M.autoscaling(conn, d)
  local target = d.deployment and d.deployment.metadata.name or d.name
  local out = hypd.json.array()
  for _, so in ipairs(trylist(conn, "keda.sh/v1alpha1", "ScaledObject", { namespace = d.namespace })) do
    local spec = so.spec or {}
    if (spec.scaleTargetRef or {}).name == target then
      local row = { name = so.metadata.name, min = spec.minReplicaCount, max = spec.maxReplicaCount,
        triggers = hypd.json.array() }
      for _, tr in ipairs(spec.triggers or {}) do
        local m = tr.metadata or {}
        row.triggers[#row.triggers + 1] = { type = tr.type, query = m.query, threshold = m.threshold }
      end
      for _, c in ipairs((so.status or {}).conditions or {}) do
        if c.type == "Ready" then row.ready = c.status == "True"; row.message = c.message end
        if c.type == "Active" then row.active = c.status == "True" end
      end
      out[#out + 1] = row
    end
  end
  if #out > 0 then return out end
end

-- signature(v) -> what inference_get's wait watches for a change
function M.signature(v)
  local parts = { tostring(v.replicas.desired), tostring(v.replicas.ready) }
  for _, p in ipairs(v.pods) do
    parts[#parts + 1] = p.name .. ":" .. tostring(p.phase) .. ":" .. tostring(p.ready) .. ":" ..
      tostring(p.assigned) .. ":" .. tostring(p.pending_reason)
  end
  return table.concat(parts, ",")
end

-- target(p, what) -> "inference/<region>/<cluster>/<what>": what one operation works on
function M.target(p, what)
  local region, cluster = require("_params").where(p)
  return "inference/" .. region .. "/" .. cluster .. "/" .. what
end

return M
