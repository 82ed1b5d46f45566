-- sandbox.k8s.controllers.keda: KEDA's operator for ScaledObjects
-- (keda.sh/v1alpha1) with prometheus triggers, while KEDA runs in the
-- cluster (a Deployment keda-operator, or the HyperPod inference operator's
-- controller, whose add-on runs KEDA). Without it a ScaledObject is left
-- alone, as on a cluster without KEDA.
--
-- Each evaluation asks the trigger's serverAddress (a Service's cluster DNS
-- name, reached through its ready endpoints in the pod network: the
-- sandbox's Prometheus program answers) for the query, then scales the
-- target Deployment as KEDA and its HPA do: active when the value exceeds
-- activationThreshold; AverageValue: ceil(value / threshold), Value:
-- ceil(replicas * value / threshold), within min..maxReplicaCount; up at
-- once, down only to the highest recommendation of the last 300 s (the
-- HPA's scale-down stabilization); to minReplicaCount 0 only cooldownPeriod
-- after the last active check. The ScaledObject's status gets Ready and
-- Active conditions, originalReplicaCount, lastActiveTime and hpaName (no
-- HorizontalPodAutoscaler object is made). A failed query sets Ready False
-- with the error and scales nothing.
--
-- It evaluates when the ScaledObject or its target changes, when a
-- simulated server's metrics change (kind "metrics", which model servers
-- enqueue), a pollingInterval after it scaled, and when a scale-down
-- window or cooldown ends: not on an endless timer (KEDA polls every
-- pollingInterval), so an idle cluster's virtual clock can stop.
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local json = require "hypd.json"

local M = {}
M.STABILIZATION = 300 -- seconds: the HPA's default scale-down window

local key = ctl_.key

local function running(ctl)
  for _, d in ipairs(ctl.cl:list(ctl:r("apps", "v1", "deployments"))) do
    local n = d.metadata.name
    if (n == "keda-operator" or n == "hyperpod-inference-operator-controller-manager")
        and ((d.status or {}).availableReplicas or 0) > 0 then
      return true
    end
  end
  return false
end

local function escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

-- query(ctl, ns, address, q) -> value | nil, error text
local function query(ctl, ns, address, q)
  local cl = ctl.cl
  local host, port = tostring(address):match("^https?://([^/:]+):?(%d*)")
  if not host then return nil, "invalid serverAddress " .. tostring(address) end
  local svc_name, svc_ns = host:match("^([^.]+)%.?([^.]*)")
  svc_ns = svc_ns ~= "" and svc_ns or ns
  port = tonumber(port) or (address:match("^https") and 443 or 80)
  local url = address .. "/api/v1/query?query=" .. escape(q)
  local svc = cl:get(ctl:r("", "v1", "services"), svc_ns, svc_name)
  local fail = string.format('Get "%s": dial tcp: lookup %s: no such host', url, host)
  if not svc then return nil, fail end
  local target
  for _, sp in ipairs(svc.spec.ports or {}) do if sp.port == port then target = sp end end
  local ep = cl:get(ctl:r("", "v1", "endpoints"), svc_ns, svc_name)
  local ss = ep and ep.subsets and ep.subsets[1]
  local addr = ss and ss.addresses and ss.addresses[1]
  if not target or not addr then
    return nil, string.format('Get "%s": dial tcp %s:%d: connect: connection refused', url, svc.spec.clusterIP or host,
      port)
  end
  local tport = port
  for _, p in ipairs(ss.ports or {}) do if (p.name or "") == (target.name or "") then tport = p.port end end
  local r, why = require("sandbox.k8s.proxy").dial_ip(cl, addr.ip, tport, { method = "GET", path = "/api/v1/query",
    query = "query=" .. escape(q), headers = {}, peer = "keda-operator" })
  if not r then return nil, string.format('Get "%s": %s', url, why) end
  local body = json.decode(r.body or "")
  if r.status ~= 200 or type(body) ~= "table" or body.status ~= "success" then
    return nil, string.format("prometheus query api returned error. status: %d response: %s", r.status, r.body or "")
  end
  local result = (body.data or {}).result or {}
  if #result == 0 then return 0 end -- ignoreNullValues (default true): no result is 0
  if #result > 1 then
    return nil, "prometheus query " .. q .. " returned multiple elements"
  end
  return tonumber(result[1].value[2]) or 0
end

local function set(list, ctype, status, reason, message)
  return ctl_.set_condition(list, ctype, status, reason, message)
end

ctl_.handlers.keda = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local sor, dr = ctl:r("keda.sh", "v1alpha1", "scaledobjects"), ctl:r("apps", "v1", "deployments")
  if not sor or not running(ctl) then return end
  local so = cl:get(sor, ns, name)
  if not so then return end
  local spec = so.spec or {}
  local ref = spec.scaleTargetRef or {}
  local mem = ctl:memo("keda")
  local m = mem[k] or { recs = {} }
  mem[k] = m
  local st = ctl_.copy(so.status or {})
  st.hpaName = "keda-hpa-" .. name
  st.scaleTargetKind = "apps/v1.Deployment"
  local dep = (ref.kind or "Deployment") == "Deployment" and cl:get(dr, ns, ref.name or "")
  local min, max = tonumber(spec.minReplicaCount) or 0, tonumber(spec.maxReplicaCount) or 100
  local function finish()
    if not ctl_.equal(st, so.status or {}) then ctl_.put_status(ctl, sor, so, st) end
  end
  if not dep then
    st.conditions = set(st.conditions, "Ready", "False", "ScaledObjectCheckFailed",
      string.format("ScaledObject doesn't have correct scaleTargetRef specification: deployments.apps %q not found",
        tostring(ref.name)))
    return finish()
  end
  st.originalReplicaCount = st.originalReplicaCount or (dep.spec.replicas or 1)
  local trig = (spec.triggers or {})[1] or {}
  local md = trig.metadata or {}
  if trig.type ~= "prometheus" then
    st.conditions = set(st.conditions, "Ready", "False", "ScaledObjectCheckFailed",
      "the sandbox's KEDA evaluates prometheus triggers only (got " .. tostring(trig.type) .. ")")
    return finish()
  end
  local v, err = query(ctl, ns, md.serverAddress, md.query or "")
  if not v then
    st.conditions = set(st.conditions, "Ready", "False", "ScaledObjectCheckFailed", "error getting metric: " .. err)
    return finish()
  end
  local now = core.now()
  local threshold = tonumber(md.threshold) or 1
  local active = v > (tonumber(md.activationThreshold) or 0)
  st.conditions = set(st.conditions, "Ready", "True", "ScaledObjectReady", "ScaledObject is defined correctly and " ..
    "is ready for scaling")
  st.conditions = set(st.conditions, "Active", active and "True" or "False", active and "ScalerActive" or
    "ScalerNotActive", active and "Scaling is performed because triggers are active" or
    "Scaling is not performed because triggers are not active")
  local every = (tonumber(spec.pollingInterval) or 30) / ctl_.speed()
  if active then
    -- stamped when it turns active and then once a polling interval (each
    -- status write is a change this controller hears)
    if not m.active or now - (m.stamped or 0) >= every then st.lastActiveTime, m.stamped = ctl_.stamp(now), now end
    m.last_active = now
  end
  m.active = active
  local cur = dep.spec.replicas or 1
  local want
  if trig.metricType == "Value" then want = math.ceil(math.max(cur, 1) * v / threshold)
  else want = math.ceil(v / threshold) end
  want = math.max(math.min(want, max), math.max(min, 1))
  -- the HPA's scale-down stabilization: the highest recommendation in the window
  local recs = {}
  for _, r in ipairs(m.recs) do if now - r[1] < M.STABILIZATION / ctl_.speed() then recs[#recs + 1] = r end end
  recs[#recs + 1] = { now, want }
  m.recs = recs
  local hi = want
  for _, r in ipairs(recs) do hi = math.max(hi, r[2]) end
  local target = want >= cur and want or math.min(cur, hi)
  local again
  if min == 0 and not active then
    local since = m.last_active or now
    local cool = (tonumber(spec.cooldownPeriod) or 300) / ctl_.speed()
    if cur > 0 and now - since >= cool then target = 0 elseif cur > 0 then again = since + cool end
    if cur == 0 then target = 0 end
  end
  if target ~= cur then
    local c = ctl_.copy(dep)
    c.spec.replicas = target
    cl:update(dr, c)
    ctl_.event(ctl, so, "Normal", "KEDAScaleTargetActivated", string.format("Scaled apps/v1.Deployment %s/%s from %d " ..
      "to %d", ns, dep.metadata.name, cur, target), "keda-operator")
  end
  if #recs > 1 and target > want then again = math.min(again or math.huge, recs[1][1] + M.STABILIZATION / ctl_.speed()) end
  -- after a scale, one more look once the new pods can be scraped; a
  -- steady trigger waits for the next metrics change (no endless timer)
  if target ~= cur then again = math.min(again or math.huge, now + every) end
  if again then ctl:at(again, "keda", k) end
  finish()
end

-- a simulated server's metrics changed: every ScaledObject looks again
ctl_.handlers.metrics = function(ctl)
  local sor = ctl:r("keda.sh", "v1alpha1", "scaledobjects")
  if not sor then return end
  for _, so in ipairs(ctl.cl:list(sor)) do ctl:enqueue("keda", key(so)) end
end

function M.watch(ctl, etype, r, obj)
  if r.group == "keda.sh" and r.kind == "ScaledObject" then
    if etype ~= "DELETED" then ctl:enqueue("keda", key(obj)) else ctl:memo("keda")[key(obj)] = nil end
  elseif r.group == "apps" and r.kind == "Deployment" then
    local sor = ctl:r("keda.sh", "v1alpha1", "scaledobjects")
    local operator = obj.metadata.name == "keda-operator" or
      obj.metadata.name == "hyperpod-inference-operator-controller-manager"
    for _, so in ipairs(sor and ctl.cl:list(sor, not operator and obj.metadata.namespace or nil) or {}) do
      local ref = (so.spec or {}).scaleTargetRef or {}
      if operator or (ref.name == obj.metadata.name and so.metadata.namespace == obj.metadata.namespace) then
        ctl:enqueue("keda", key(so))
      end
    end
  end
end

function M.start(ctl)
  local sor = ctl:r("keda.sh", "v1alpha1", "scaledobjects")
  for _, so in ipairs(sor and ctl.cl:list(sor) or {}) do ctl:enqueue("keda", key(so)) end
end

return M
