-- _group_cost: the priced things (hypd.cost) a running or kept cluster is
-- made of, for the tools that answer what it costs: HyperPod instance groups
-- (their current count), an FSx for Lustre file system (its capacity and
-- deployment). Each tool declares pricing:GetProducts and the reads behind
-- what it prices.
--   instances(groups, action [, owner]) -> things of DescribeCluster's InstanceGroups
--   fsx(fs, action [, name]) -> the thing of a DescribeFileSystems entry
--   priced(groups, region [, read]) -> cost | nil, cost_error: each group
--     of a list priced, set on it as cost = {hourly, monthly, unit_price,
--     currency} or cost_unknown = why, and the total of them. read(g) ->
--     instance_type, count | nil, why (a group hypd does not price); the
--     default reads g.instance_type and g.current_count.
local M = {}

function M.instances(groups, action, owner)
  local out = {}
  for _, g in ipairs(groups or {}) do
    out[#out + 1] = { type = "instance", instance_type = g.InstanceType, quantity = g.CurrentCount or 0,
      action = action, name = tostring(g.InstanceGroupName) .. (owner and (" in " .. tostring(owner)) or "") }
  end
  return out
end

function M.fsx(fs, action, name)
  local lc = fs.LustreConfiguration or {}
  return { type = "fsx", name = name or fs.FileSystemId, action = action, quantity = fs.StorageCapacity,
    deployment = lc.DeploymentType, throughput = lc.PerUnitStorageThroughput }
end

local function default_read(g) return g.instance_type, g.current_count or 0 end

function M.priced(groups, region, read)
  read = read or default_read
  local things, known, unknown = {}, {}, {}
  for _, g in ipairs(groups) do
    local itype, n = read(g)
    if itype then
      things[#things + 1] = { type = "instance", instance_type = itype, quantity = n or 0, name = g.name,
        action = "running" }
      known[#known + 1] = g
    else
      unknown[#unknown + 1] = { g = g, why = n }
    end
  end
  local c, why = hypd.cost.estimate(things, region)
  if not c then return nil, why end
  local by = {}
  for _, it in ipairs(c.items) do by[it.name] = it end
  for _, u in ipairs(c.unpriced) do by[u.name] = u end
  for _, g in ipairs(known) do
    local it = by[g.name]
    if it and it.hourly then g.cost = { hourly = it.hourly, monthly = it.monthly, unit_price = it.unit_price,
      currency = "USD" }
    elseif it then g.cost_unknown = it.why end
  end
  for _, u in ipairs(unknown) do
    u.g.cost_unknown = u.why
    c.unpriced[#c.unpriced + 1] = { type = "instance", name = u.g.name, action = "running", why = u.why }
  end
  return c
end

return M
