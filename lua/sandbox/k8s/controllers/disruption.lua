-- sandbox.k8s.controllers.disruption: the disruption controller's part
-- the sandbox needs: each PodDisruptionBudget's status (expectedPods,
-- currentHealthy, desiredHealthy, disruptionsAllowed and the
-- DisruptionAllowed condition) follows the pods its selector matches. The
-- eviction subresource (sandbox.k8s.api) judges by the same M.budget.
local ctl_ = require "sandbox.k8s.controllers._ctl"
local select = require "sandbox.k8s.select"

local M = {}

local function healthy(p)
  if p.metadata.deletionTimestamp then return false end
  return ctl_.pod_ready(p)
end
M.healthy = healthy

local function count(v, of)
  local pct = type(v) == "string" and tonumber(v:match("^(%d+)%%$"))
  if pct then return math.ceil(pct * of / 100) end
  return math.tointeger(tonumber(v) or 0) or 0
end

-- budget(cl, pdb) -> {expected, healthy, desired, allowed}: minAvailable
-- or maxUnavailable (a count or a percent of the matching pods, rounded up)
function M.budget(cl, pdb)
  local spec = pdb.spec or {}
  local pr = cl.reg:find("", "v1", "pods")
  local expected, ok = 0, 0
  if spec.selector then
    for _, p in ipairs(cl:list(pr, pdb.metadata.namespace)) do
      if select.match_selector(spec.selector, p.metadata.labels) and not ctl_.finished(p) then
        expected = expected + 1
        if healthy(p) then ok = ok + 1 end
      end
    end
  end
  local desired = spec.minAvailable ~= nil and count(spec.minAvailable, expected)
    or math.max(0, expected - count(spec.maxUnavailable or 0, expected))
  return { expected = expected, healthy = ok, desired = desired, allowed = math.max(0, ok - desired) }
end

ctl_.handlers.pdb = function(ctl, k)
  local ns, name = k:match("^([^/]*)/(.*)$")
  local r = ctl:r("policy", "v1", "poddisruptionbudgets")
  local pdb = ctl.cl:get(r, ns, name)
  if not pdb then return end
  local b = M.budget(ctl.cl, pdb)
  local st = ctl_.copy(pdb.status or {})
  st.expectedPods, st.currentHealthy, st.desiredHealthy, st.disruptionsAllowed = b.expected, b.healthy, b.desired,
    b.allowed
  st.observedGeneration = pdb.metadata.generation
  st.conditions = ctl_.set_condition(st.conditions, "DisruptionAllowed", b.allowed > 0 and "True" or "False",
    b.allowed > 0 and "SufficientPods" or "InsufficientPods", "")
  ctl_.put_status(ctl, r, pdb, st)
end

function M.watch(ctl, _, r, obj)
  if r.group == "policy" and r.kind == "PodDisruptionBudget" then
    ctl:enqueue("pdb", ctl_.key(obj))
  elseif r.group == "" and r.kind == "Pod" then
    local pr = ctl:r("policy", "v1", "poddisruptionbudgets")
    for _, pdb in ipairs(pr and ctl.cl:list(pr, obj.metadata.namespace) or {}) do
      ctl:enqueue("pdb", ctl_.key(pdb))
    end
  end
end

function M.start(ctl)
  local pr = ctl:r("policy", "v1", "poddisruptionbudgets")
  for _, p in ipairs(pr and ctl.cl:list(pr) or {}) do ctl:enqueue("pdb", ctl_.key(p)) end
end

return M
