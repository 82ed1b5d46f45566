-- inference/_serving: where a deployed model answers (contract 3 of issue
-- 14, shared with inference_get): the Service in the namespace whose
-- selector matches the labels of the deployment's pods (a label subset),
-- preferring one named like the deployment, reached through the API
-- server's service proxy /api/v1/namespaces/{ns}/services/{svc}:{port}/proxy/...
--
--   deployment(conn, ns, name) -> the Deployment (by name, else the one
--     labelled hypd.io/inference=<name>) | nil
--   service(conn, ns, dep, name) -> svc, port (the port named http, else the
--     first) | nil
--   endpoints(conn, ns, svc) -> {ready = {{ip, pod}}, not_ready = {...}}
--   state(conn, ns, dep) -> "1/2 replicas ready; pod x: Pending (Unschedulable: ...)"
--   named_service(conn, ns, name) -> svc, port: Service name when it selects pods
--     (a model pool's Service <model>); as_deployment(svc) -> a stand-in for state
--   http_port(svc) -> its port named http, else its first
--   call(conn, ns, svc, port, method, path, body) -> status, decoded body | nil, err
--   NAME, NS: the parameter specs of a Kubernetes name and namespace
--   ensure_all(ctx, conn, objects [, opts]) -> [{kind, name, namespace, action, uid}]
local M = {}
M.INFERENCE = "hypd.io/inference"

M.NAME = { type = "string", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
  pattern_help = "a Kubernetes name" }

M.NS = require("_params").with(M.NAME, { default = "default", pattern_help = "a Kubernetes namespace name",
  description = "the namespace" })

-- ensure_all(ctx, conn, objects [, opts]): each object made or brought in
-- line by server-side apply (_k8s_objects ensure, with opts: family,
-- field), in order
function M.ensure_all(ctx, conn, objects, opts)
  local K = require "_k8s_objects"
  local out = {}
  for _, o in ipairs(objects) do
    local obj, action = K.ensure(ctx, conn, o, opts)
    out[#out + 1] = { kind = o.kind, name = o.metadata.name, namespace = o.metadata.namespace, action = action,
      uid = obj and obj.uid }
  end
  return out
end

local function json_object() return hypd.json.object() end

local function missing(err) return type(err) == "table" and (err.code == "NotFound" or err.status == 404) end

function M.deployment(conn, ns, name)
  local d, err = conn:get("apps/v1", "Deployment", name, { namespace = ns })
  if d then return d end
  if not missing(err) then error(err, 0) end
  local items = conn:list("apps/v1", "Deployment", { namespace = ns, labels = { [M.INFERENCE] = name } }) or {}
  table.sort(items, function(a, b) return a.metadata.name < b.metadata.name end)
  return items[1]
end

local function subset(sel, labels)
  if type(sel) ~= "table" or next(sel) == nil then return false end
  for k, v in pairs(sel) do
    if (labels or {})[k] ~= v then return false end
  end
  return true
end

function M.service(conn, ns, dep, name)
  local labels = ((dep.spec or {}).template or {}).metadata and dep.spec.template.metadata.labels or {}
  local best
  local items = conn:list("v1", "Service", { namespace = ns }) or {}
  table.sort(items, function(a, b) return a.metadata.name < b.metadata.name end)
  for _, s in ipairs(items) do
    if subset((s.spec or {}).selector, labels) then
      if s.metadata.name == name or s.metadata.name == dep.metadata.name then best = s break end
      best = best or s
    end
  end
  if not best then return nil end
  return best, M.http_port(best)
end

-- http_port(svc) -> the number of its port named http, else of its first
function M.http_port(svc)
  local ports = (svc.spec or {}).ports or {}
  local port = ports[1]
  for _, p in ipairs(ports) do if p.name == "http" then port = p break end end
  return port and port.port
end

-- named_service(conn, ns, name) -> svc, port: the Service name when it
-- selects pods (a model pool's Service <model>) | nil
function M.named_service(conn, ns, name)
  local s, err = conn:get("v1", "Service", name, { namespace = ns })
  if not s then
    if missing(err) then return nil end
    error(err, 0)
  end
  if type((s.spec or {}).selector) ~= "table" or next(s.spec.selector) == nil then return nil end
  return s, M.http_port(s)
end

-- as_deployment(svc) -> what M.state and M.pods read, for the pods a Service selects
function M.as_deployment(svc)
  return { metadata = { name = svc.metadata.name }, spec = { selector = { matchLabels = svc.spec.selector } },
    status = json_object(), service = true }
end

function M.endpoints(conn, ns, svc)
  local out = { ready = {}, not_ready = {} }
  local ep, err = conn:get("v1", "Endpoints", svc, { namespace = ns })
  if not ep then
    if missing(err) then return out end
    error(err, 0)
  end
  for _, ss in ipairs(ep.subsets or {}) do
    for _, a in ipairs(ss.addresses or {}) do
      out.ready[#out.ready + 1] = { ip = a.ip, pod = a.targetRef and a.targetRef.name }
    end
    for _, a in ipairs(ss.notReadyAddresses or {}) do
      out.not_ready[#out.not_ready + 1] = { ip = a.ip, pod = a.targetRef and a.targetRef.name }
    end
  end
  return out
end

-- pods(conn, ns, dep) -> the deployment's pods (its selector's labels)
function M.pods(conn, ns, dep)
  local sel = ((dep.spec or {}).selector or {}).matchLabels
  if not sel then return {} end
  local items = conn:list("v1", "Pod", { namespace = ns, labels = sel }) or {}
  table.sort(items, function(a, b) return a.metadata.name < b.metadata.name end)
  return items
end

function M.state(conn, ns, dep)
  local st = dep.status or {}
  local pods = M.pods(conn, ns, dep)
  local parts = { string.format("%d/%d replicas ready", tonumber(st.readyReplicas) or 0,
    tonumber((dep.spec or {}).replicas) or 1) }
  if dep.service then parts[1] = string.format("%d pod(s) selected by Service %s", #pods, dep.metadata.name) end
  for _, p in ipairs(pods) do
    local ps = p.status or {}
    local why
    for _, c in ipairs(ps.conditions or {}) do
      if c.type == "PodScheduled" and c.status == "False" then why = (c.reason or "") .. ": " .. (c.message or "") end
    end
    for _, cs in ipairs(ps.containerStatuses or {}) do
      local w = cs.state and cs.state.waiting
      if w then why = w.reason .. (w.message and (": " .. w.message) or "") end
    end
    parts[#parts + 1] = "pod " .. p.metadata.name .. ": " .. tostring(ps.phase or "Pending") ..
      (why and (" (" .. why .. ")") or "")
  end
  return table.concat(parts, "; ")
end

-- call(...) -> status, body (decoded JSON, else the text), elapsed seconds | nil, err
function M.call(conn, ns, svc, port, method, path, body, timeout)
  local t0 = hypd.now()
  local resp, err = conn:proxy("Service", svc, path, { namespace = ns, port = port, method = method,
    body = body and hypd.json.encode(body) or nil, timeout = timeout })
  local took = hypd.now() - t0
  if not resp then return nil, err end
  local decoded = hypd.json.decode(resp.body or "")
  if decoded == nil then decoded = resp.body end
  return resp.status, decoded, took
end

return M
