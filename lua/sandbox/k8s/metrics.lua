-- sandbox.k8s.metrics: metrics.k8s.io/v1beta1, the resource metrics API
-- metrics-server serves, so `kubectl top nodes` and `kubectl top pods`
-- work. The API exists only while the cluster's metrics-server add-on is
-- ACTIVE (or UPDATING, DEGRADED): the add-ons controller calls
-- set(cl, on), which adds the two resources to the cluster's registry (and
-- so to discovery) or removes them. NodeMetrics and PodMetrics are never
-- stored: each get or list computes them from the pods, a small usage per
-- container that follows its requests and is the same on every call (a
-- fraction of the request between 20% and 60% for CPU, 30% and 70% for
-- memory, from a hash of the pod and container names), and per node the
-- sum of its running pods plus what the node's system daemons take.
local json = require "hypd.json"
local objects = require "sandbox.k8s.objects"
local sys = require "hypd.sys"
local quantity = require("sandbox.k8s.controllers._ctl").quantity
local select = require "sandbox.k8s.select"

local M = {}

M.GROUP, M.VERSION = "metrics.k8s.io", "v1beta1"
M.WINDOW = "20.031s" -- metrics-server's scrape window, as it reports it
M.SYSTEM = { cpu = 0.12, memory = 640 * 1024 * 1024 } -- a node's own use (kubelet, runtime, OS)

local ROWS = {
  { resource = "nodes", kind = "NodeMetrics", namespaced = false },
  { resource = "pods", kind = "PodMetrics", namespaced = true },
}

-- set(cl, on): the metrics API is served on cl (on) or not
function M.set(cl, on)
  for _, row in ipairs(ROWS) do
    if on and not cl.reg:find(M.GROUP, M.VERSION, row.resource) then
      cl.reg:add { group = M.GROUP, version = M.VERSION, resource = row.resource, kind = row.kind,
        namespaced = row.namespaced, short = {}, singular = "", verbs = { "get", "list" }, status = false,
        metrics = true }
    elseif not on then
      cl.reg:remove(M.GROUP, M.VERSION, row.resource)
    end
  end
end

-- fraction(s, lo, hi) -> a number in [lo, hi) that depends only on s
local function fraction(s, lo, hi)
  local h = tonumber(sys.digest("sha256", s, "hex"):sub(1, 8), 16)
  return lo + (hi - lo) * (h % 10000) / 10000
end

-- container_usage(pod, c) -> cpu (cores), memory (bytes)
local function container_usage(pod, c)
  local req = (c.resources or {}).requests or {}
  local id = pod.metadata.namespace .. "/" .. pod.metadata.name .. "/" .. c.name
  local cpu = quantity(req.cpu)
  cpu = cpu > 0 and cpu * fraction(id .. "/cpu", 0.2, 0.6) or fraction(id .. "/cpu", 0.001, 0.005)
  local mem = quantity(req.memory)
  mem = mem > 0 and mem * fraction(id .. "/memory", 0.3, 0.7) or fraction(id .. "/memory", 8, 40) * 1024 * 1024
  return cpu, mem
end

local function usage(cpu, mem)
  return { cpu = string.format("%dn", math.floor(cpu * 1e9)), memory = string.format("%dKi", math.floor(mem / 1024)) }
end

local function running(pod)
  return (pod.status or {}).phase == "Running" and pod.spec and pod.spec.nodeName
end

local function labels(obj)
  local out = json.object()
  for k, v in pairs(obj.metadata.labels or {}) do out[k] = v end
  return out
end

local function pod_metrics(cl, pod)
  local containers = json.array()
  for _, c in ipairs(pod.spec.containers or {}) do
    containers[#containers + 1] = { name = c.name, usage = usage(container_usage(pod, c)) }
  end
  local now = cl:now()
  return { kind = "PodMetrics", apiVersion = M.GROUP .. "/" .. M.VERSION,
    metadata = { name = pod.metadata.name, namespace = pod.metadata.namespace, creationTimestamp = now,
      labels = labels(pod) },
    timestamp = now, window = M.WINDOW, containers = containers }
end

local function node_metrics(cl, node, pods)
  local cpu, mem = M.SYSTEM.cpu, M.SYSTEM.memory
  for _, pod in ipairs(pods) do
    if running(pod) and pod.spec.nodeName == node.metadata.name then
      for _, c in ipairs(pod.spec.containers or {}) do
        local a, b = container_usage(pod, c)
        cpu, mem = cpu + a, mem + b
      end
    end
  end
  local now = cl:now()
  return { kind = "NodeMetrics", apiVersion = M.GROUP .. "/" .. M.VERSION,
    metadata = { name = node.metadata.name, creationTimestamp = now, labels = labels(node) },
    timestamp = now, window = M.WINDOW, usage = usage(cpu, mem) }
end

local JSON = { ["content-type"] = "application/json" }
local function reply(code, obj) return { status = code, headers = JSON, body = json.encode(obj) } end

-- serve(cl, r, rt, q, verb) -> the response to a get or list of NodeMetrics
-- or PodMetrics (verb "get" | "list"; anything else is 405)
function M.serve(cl, r, rt, q, verb)
  if verb ~= "get" and verb ~= "list" then
    local st = objects.status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    return reply(405, st)
  end
  local podr, noder = cl.reg:find("", "v1", "pods"), cl.reg:find("", "v1", "nodes")
  local make
  if r.resource == "pods" then
    make = function(pod) return running(pod) and pod_metrics(cl, pod) or nil end
  else
    local pods = cl:list(podr)
    make = function(node) return node_metrics(cl, node, pods) end
  end
  local src = r.resource == "pods" and podr or noder
  if verb == "get" then
    local obj = cl:get(src, rt.ns, rt.name)
    local m = obj and make(obj)
    if not m then
      return reply(404, objects.status(404, "NotFound", string.format('%s.metrics.k8s.io "%s" not found', r.resource,
        rt.name), { name = rt.name, group = M.GROUP, kind = r.resource }))
    end
    return reply(200, m)
  end
  local ls, lerr = select.labels(q.labelSelector)
  if not ls then return reply(400, objects.status(400, "BadRequest", "unable to parse requirement: " .. tostring(lerr))) end
  local items = json.array()
  for _, obj in ipairs(cl:list(src, rt.ns)) do
    if select.match_labels(ls, obj.metadata.labels) then
      local m = make(obj)
      if m then items[#items + 1] = m end
    end
  end
  return reply(200, { kind = r.kind .. "List", apiVersion = M.GROUP .. "/" .. M.VERSION, metadata = json.object(),
    items = items })
end

return M
