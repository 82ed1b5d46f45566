-- sandbox.k8s.controllers.endpoints: the Endpoints and EndpointSlice
-- controllers. For every Service with a selector, an Endpoints object of
-- the same name lists the selected pods that have an IP (ready ones under
-- addresses, the others under notReadyAddresses) and one discovery.k8s.io/v1
-- EndpointSlice, <service>-<hash>, lists them with their conditions. The
-- ports are the Service's, a named targetPort resolved against each pod's
-- container ports. A Service without a selector is left alone (its
-- Endpoints are the user's); a deleted Service's are deleted. A pod whose
-- labels change leaves the Endpoints of the Services that no longer select
-- it and joins those that now do.
local ctl_ = require "sandbox.k8s.controllers._ctl"
local select = require "sandbox.k8s.select"

local M = {}

local key = ctl_.key
local MANAGED = "endpointslice-controller.k8s.io"

-- target(port, pod) -> the number a Service port reaches on the pod, or nil
local function target(port, pod)
  local tp = port.targetPort or port.port
  if math.type(tp) == "integer" then return tp end
  if tostring(tp):match("^%d+$") then return tonumber(tp) end
  for _, c in ipairs((pod.spec or {}).containers or {}) do
    for _, cp in ipairs(c.ports or {}) do
      if cp.name == tp and (cp.protocol or "TCP") == (port.protocol or "TCP") then return cp.containerPort end
    end
  end
end

ctl_.handlers.endpoints = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local sr, er, esr, pr = ctl:r("", "v1", "services"), ctl:r("", "v1", "endpoints"),
    ctl:r("discovery.k8s.io", "v1", "endpointslices"), ctl:r("", "v1", "pods")
  local svc = cl:get(sr, ns, name)
  local slices = {}
  for _, s in ipairs(cl:list(esr, ns)) do
    local l = s.metadata.labels or {}
    if l["kubernetes.io/service-name"] == name and l["endpointslice.kubernetes.io/managed-by"] == MANAGED then
      slices[#slices + 1] = s
    end
  end
  if not svc or not (svc.spec or {}).selector or next(svc.spec.selector) == nil then
    if not svc and cl:get(er, ns, name) then cl:delete(er, ns, name) end
    for _, s in ipairs(slices) do cl:delete(esr, ns, s.metadata.name) end
    return
  end
  local sel = { matchLabels = svc.spec.selector }
  local ready_addrs, unready_addrs, eps = {}, {}, {}
  local ports_of -- the EndpointPorts, from the first pod that resolves them
  for _, p in ipairs(cl:list(pr, ns)) do
    local ip = (p.status or {}).podIP
    if ip and not ctl_.finished(p) and select.match_selector(sel, p.metadata.labels) then
      local ready = ctl_.pod_ready(p) and not p.metadata.deletionTimestamp
      local addr = { ip = ip, nodeName = p.spec.nodeName,
        targetRef = { kind = "Pod", namespace = ns, name = p.metadata.name, uid = p.metadata.uid } }
      local list = ready and ready_addrs or unready_addrs
      list[#list + 1] = addr
      eps[#eps + 1] = { addresses = { ip }, nodeName = p.spec.nodeName, targetRef = ctl_.copy(addr.targetRef),
        conditions = { ready = ready, serving = ctl_.pod_ready(p), terminating = p.metadata.deletionTimestamp ~= nil } }
      if not ports_of then
        local ps, ok = {}, true
        for _, sp in ipairs(svc.spec.ports or {}) do
          local n = target(sp, p)
          if not n then ok = false break end
          ps[#ps + 1] = { name = sp.name, port = n, protocol = sp.protocol or "TCP", appProtocol = sp.appProtocol }
        end
        if ok then ports_of = ps end
      end
    end
  end
  local subsets = {}
  if #ready_addrs + #unready_addrs > 0 then
    subsets[1] = { addresses = #ready_addrs > 0 and ready_addrs or nil,
      notReadyAddresses = #unready_addrs > 0 and unready_addrs or nil, ports = ports_of }
  end
  local labels = ctl_.copy(svc.metadata.labels or {})
  labels["endpoints.kubernetes.io/managed-by"] = "endpoint-controller"
  local ep = cl:get(er, ns, name)
  if ep then
    local c = ctl_.copy(ep)
    c.metadata.labels, c.subsets = labels, #subsets > 0 and subsets or nil
    if not ctl_.equal(c, ep) then cl:update(er, c) end
  else
    cl:create(er, { metadata = { name = name, namespace = ns, labels = labels },
      subsets = #subsets > 0 and subsets or nil })
  end
  local slabels = ctl_.copy(svc.metadata.labels or {})
  slabels["kubernetes.io/service-name"] = name
  slabels["endpointslice.kubernetes.io/managed-by"] = MANAGED
  -- a slice's port names are pointers the controller always sets ("" for
  -- an unnamed port; kubectl describe service dereferences them)
  local sports = {}
  for i, pt in ipairs(ports_of or {}) do
    sports[i] = ctl_.copy(pt)
    sports[i].name = pt.name or ""
  end
  local body = { addressType = "IPv4", endpoints = eps, ports = sports }
  local s = slices[1]
  for i = 2, #slices do cl:delete(esr, ns, slices[i].metadata.name) end
  if s then
    local c = ctl_.copy(s)
    c.metadata.labels, c.endpoints, c.ports, c.addressType = slabels, body.endpoints, body.ports, "IPv4"
    if not ctl_.equal(c, s) then cl:update(esr, c) end
  else
    cl:create(esr, { metadata = { name = name .. "-" .. ctl_.hash(svc.metadata.uid, 5),
      namespace = ns, generateName = name .. "-", labels = slabels, ownerReferences = { ctl_.owner_ref(svc) } },
      addressType = "IPv4", endpoints = body.endpoints, ports = body.ports })
  end
end

-- lists(ep, pod) -> true when Endpoints ep has an address of that pod
local function lists(ep, pod)
  for _, sub in ipairs((ep or {}).subsets or {}) do
    for _, l in ipairs { sub.addresses or {}, sub.notReadyAddresses or {} } do
      for _, a in ipairs(l) do
        if (a.targetRef or {}).name == pod then return true end
      end
    end
  end
  return false
end

function M.watch(ctl, _, r, obj)
  if r.group == "" and r.kind == "Service" then
    ctl:enqueue("endpoints", key(obj))
  elseif r.group == "" and r.kind == "Pod" then
    -- the Services that select the pod now, and those whose Endpoints
    -- still list it (its labels changed, so it is theirs no more)
    local ns, name = obj.metadata.namespace, obj.metadata.name
    local sr, er = ctl:r("", "v1", "services"), ctl:r("", "v1", "endpoints")
    for _, s in ipairs(ctl.cl:list(sr, ns)) do
      local sel = (s.spec or {}).selector
      if sel and next(sel) and (select.match_selector({ matchLabels = sel }, obj.metadata.labels) or
          lists(ctl.cl:get(er, ns, s.metadata.name), name)) then
        ctl:enqueue("endpoints", key(s))
      end
    end
  end
end

function M.start(ctl)
  for _, s in ipairs(ctl.cl:list(ctl:r("", "v1", "services"))) do ctl:enqueue("endpoints", key(s)) end
end

return M
