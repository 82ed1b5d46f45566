-- hypd.clusters: the active cluster, the default of every tool that takes
-- an optional cluster (cluster_switch changes it; the first cluster
-- cluster_create_eks makes becomes it).
--   clusters.active() -> {name, region, arn} | nil
--   clusters.set_active{name, region, arn} -> the previous one | nil; told
--     to clusters.on_change(resource, data) (hypd.tool.operations installs
--     it: a resource.changed event to subscribers, /ws and MCP)
--   clusters.record{name, region, ...} -> the record: what hypd knows of an
--     EKS cluster it made or imported (tag, arn, vpc_id, hyperpod = {name,
--     arn}, imported, ...), merged into what it had
--   clusters.get(name [, region]) -> the record | nil
--   clusters.list() -> every record
--   clusters.forget(name, region): a deleted cluster
--   clusters.target(p) -> {name, region, active} | nil, err: the cluster a
--     call works on (ctx:cluster() is what tools use)
local errors = require "hypd.errors"
local store = require "hypd.store"

local M = {}

M.KEY = "hypd/active_cluster"
M.PREFIX = "hypd/clusters/" -- records, by region/name
M.on_change = nil -- fn(resource, data): the active cluster changed

function M.active() return store.get(M.KEY) end

function M.set_active(c)
  assert(type(c) == "table" and type(c.name) == "string", "set_active{name, region, arn}")
  local prev = M.active()
  assert(store.put(M.KEY, { name = c.name, region = c.region, arn = c.arn }))
  if M.on_change then
    M.on_change("active_cluster", { name = c.name, region = c.region, previous = prev and prev.name or nil })
  end
  return prev
end

local function key(name, region) return M.PREFIX .. tostring(region or "?") .. "/" .. name end

function M.record(c)
  assert(type(c) == "table" and type(c.name) == "string" and type(c.region) == "string", "record{name, region}")
  local rec = store.get(key(c.name, c.region)) or {}
  for k, v in pairs(c) do rec[k] = v end
  assert(store.put(key(c.name, c.region), rec))
  return rec
end

function M.get(name, region)
  if region then return store.get(key(name, region)) end
  for _, rec in pairs(store.list(M.PREFIX) or {}) do
    if rec.name == name then return rec end
  end
end

function M.list()
  local out = {}
  for _, rec in pairs(store.list(M.PREFIX) or {}) do out[#out + 1] = rec end
  table.sort(out, function(a, b) return (a.region .. a.name) < (b.region .. b.name) end)
  return out
end

-- NONE: why a call that names no cluster has none when none is active
M.NONE = "no cluster given and none is active: pass cluster, or call cluster_switch"

-- target(p) -> {name, region, active} | nil, err: the EKS cluster a call
-- with the parameters p works on: p.cluster (in p.region), else the active
-- cluster (in p.region, else its own; active = true); region is nil when
-- neither says. err: NOT_FOUND naming the field cluster (M.NONE)
function M.target(p)
  local act = M.active()
  local name = p.cluster or (act and act.name)
  if not name then
    return errors.fail("NOT_FOUND", M.NONE,
      { fields = { { field = "cluster", rule = "required", message = "cluster: no active cluster" } } })
  end
  return { name = name, region = p.region or (not p.cluster and act.region) or nil, active = not p.cluster }
end

function M.forget(name, region)
  store.delete(key(name, region))
  local act = M.active()
  if act and act.name == name and act.region == region then store.delete(M.KEY) end
end

return M
