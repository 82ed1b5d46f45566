-- sandbox.k8s.controllers.quotas: the resource quota controller's status:
-- each ResourceQuota's status.hard is its spec.hard and status.used what
-- its namespace holds of each: pods (not finished), the containers'
-- requests and limits (cpu, memory, nvidia.com/gpu... as requests.X, X and
-- limits.X), and counts of objects (services, configmaps, secrets,
-- persistentvolumeclaims, count/<resource>[.<group>]). Usage is shown, not
-- enforced: a create beyond the quota is not refused.
local ctl_ = require "sandbox.k8s.controllers._ctl"

local M = {}

local COUNTS = { pods = { "", "v1", "pods" }, services = { "", "v1", "services" },
  configmaps = { "", "v1", "configmaps" }, secrets = { "", "v1", "secrets" },
  persistentvolumeclaims = { "", "v1", "persistentvolumeclaims" } }

-- format(key, n) -> a quantity as the API server writes it: cpu in
-- millicores when fractional, memory in the largest binary suffix that divides it
local function format(key, n)
  if key:match("cpu$") then
    if n == math.floor(n) then return tostring(math.tointeger(n)) end
    return tostring(math.tointeger(math.floor(n * 1000 + 0.5))) .. "m"
  end
  n = math.tointeger(math.floor(n + 0.5)) or 0
  for _, s in ipairs { { "Ti", 1024 ^ 4 }, { "Gi", 1024 ^ 3 }, { "Mi", 1024 ^ 2 }, { "Ki", 1024 } } do
    if n ~= 0 and n % math.tointeger(s[2]) == 0 then return (n // math.tointeger(s[2])) .. s[1] end
  end
  return tostring(n)
end

local function used(ctl, ns, key)
  local cl = ctl.cl
  local what = key:match("^count/(.+)$") or key
  local c = COUNTS[what]
  if not c and key:match("^count/") then
    local res, group = what:match("^([^.]+)%.?(.*)$")
    for _, r in ipairs(cl.reg.list) do
      if r.resource == res and r.group == group then c = { r.group, r.version, r.resource } break end
    end
  end
  if c then
    local r = ctl:r(c[1], c[2], c[3])
    local n = 0
    for _, o in ipairs(r and cl:list(r, ns) or {}) do
      if c[3] ~= "pods" or not ctl_.finished(o) then n = n + 1 end
    end
    return tostring(n)
  end
  local kind, name = key:match("^(limits)%.(.+)$")
  if not kind then kind, name = "requests", key:match("^requests%.(.+)$") or key end
  local sum = 0
  for _, p in ipairs(cl:list(ctl:r("", "v1", "pods"), ns)) do
    if not ctl_.finished(p) then
      for _, c2 in ipairs((p.spec or {}).containers or {}) do
        sum = sum + ctl_.quantity(((c2.resources or {})[kind] or {})[name])
      end
    end
  end
  return format(key, sum)
end

ctl_.handlers.quota = function(ctl, k)
  local ns, name = k:match("^([^/]*)/(.*)$")
  local r = ctl:r("", "v1", "resourcequotas")
  local q = ctl.cl:get(r, ns, name)
  if not q then return end
  local st = ctl_.copy(q.status or {})
  st.hard, st.used = {}, {}
  for key, v in pairs((q.spec or {}).hard or {}) do
    st.hard[key] = v
    st.used[key] = used(ctl, ns, key)
  end
  ctl_.put_status(ctl, r, q, st)
end

function M.watch(ctl, _, r, obj)
  if r.group == "" and r.kind == "ResourceQuota" then
    ctl:enqueue("quota", ctl_.key(obj))
  elseif obj.metadata.namespace and r.kind ~= "Event" then
    local qr = ctl:r("", "v1", "resourcequotas")
    for _, q in ipairs(ctl.cl:list(qr, obj.metadata.namespace)) do ctl:enqueue("quota", ctl_.key(q)) end
  end
end

function M.start(ctl)
  for _, q in ipairs(ctl.cl:list(ctl:r("", "v1", "resourcequotas"))) do ctl:enqueue("quota", ctl_.key(q)) end
end

return M
