-- sandbox.k8s.controllers._probes: the kubelet's readiness probes, for the
-- containers it can really ask: an httpGet readinessProbe on a port the
-- container's simulated program listens on (sandbox.k8s.programs: http and
-- ports). Such a container starts not ready and turns ready once the
-- program answers the probe's path with 200-399 (after initialDelaySeconds,
-- every periodSeconds), as a kubelet would. A container whose program
-- cannot answer (no program, no http) keeps the sandbox's old rule: ready
-- once it runs, since nothing simulates what it would answer.
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local programs = require "sandbox.k8s.programs"

local M = {}

-- target(pod, c) -> program, port, path when c's readiness can be probed
local function target(pod, c)
  local get = (c.readinessProbe or {}).httpGet
  if not get then return nil end
  local p = programs.find(pod, c)
  if not (p and p.http) then return nil end
  local port = get.port
  if type(port) == "string" and not port:match("^%d+$") then
    for _, cp in ipairs(c.ports or {}) do if cp.name == port then port = cp.containerPort end end
  end
  port = tonumber(port)
  for _, n in ipairs(programs.ports(p, pod, c)) do
    if n == port then return p, port, get.path or "/" end
  end
  -- the probe asks a port nothing listens on: it never succeeds
  return p, port, get.path or "/", true
end

-- probed(pod, c) -> true when c's readiness comes from its probe
function M.probed(pod, c) return target(pod, c) ~= nil end

-- check(ctl, pr, pod) -> the pod (its readiness brought up to date), and the
-- engine time of the next probe when a container is still not ready
function M.check(ctl, pr, pod)
  local st = ctl_.copy(pod.status or {})
  local now = core.now()
  local changed, next_at, all = false, nil, true
  for i, c in ipairs(pod.spec.containers or {}) do
    local s = (st.containerStatuses or {})[i]
    local p, port, path, never = target(pod, c)
    if s and not s.ready and s.state and s.state.running and p then
      local probe = c.readinessProbe or {}
      local ok = false
      if not never then
        local res = p.http(programs.env(ctl, pod, c), { method = "GET", path = path, query = "", headers = {
          ["user-agent"] = "kube-probe/1.34" }, body = "", port = port, peer = pod.status.hostIP })
        ok = res ~= nil and (tonumber(res.status) or 0) >= 200 and (tonumber(res.status) or 0) < 400
      end
      if ok then
        s.ready, changed = true, true
      else
        all = false
        local every = (tonumber(probe.periodSeconds) or 10) / ctl_.speed()
        next_at = math.min(next_at or math.huge, now + every)
      end
    elseif s and not s.ready then
      all = false
    end
  end
  if changed and all then
    st.conditions = ctl_.set_condition(st.conditions, "Ready", "True")
    st.conditions = ctl_.set_condition(st.conditions, "ContainersReady", "True")
  end
  if changed then pod = ctl_.put_status(ctl, pr, pod, st) end
  return pod, next_at
end

return M
