-- hypd.clusters: the active cluster, the default of every tool that takes
-- an optional cluster (cluster_switch changes it; the first cluster
-- cluster_create_eks makes becomes it).
--   clusters.active() -> {name, region, arn} | nil
--   clusters.set_active{name, region, arn} -> the previous one | nil; a
--     resource.changed event tells subscribers (/ws, MCP)
local store = require "hypd.store"

local M = {}

M.KEY = "hypd/active_cluster"

function M.active() return store.get(M.KEY) end

function M.set_active(c)
  assert(type(c) == "table" and type(c.name) == "string", "set_active{name, region, arn}")
  local prev = M.active()
  assert(store.put(M.KEY, { name = c.name, region = c.region, arn = c.arn }))
  require("hypd.op").changed("active_cluster", { name = c.name, region = c.region,
    previous = prev and prev.name or nil })
  return prev
end

return M
