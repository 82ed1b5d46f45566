-- _kept_cost: what a teardown kept costs while it stays (hypd.cost), for
-- the result of cluster_delete and hyperpod_delete. A kept FSx file system
-- is priced by its capacity and deployment (fsx:DescribeFileSystems), a kept
-- HyperPod cluster by its groups (sagemaker:DescribeCluster), a kept EKS
-- cluster or NAT gateway as one; what else is kept costs nothing by the hour
-- that hypd prices. A kept thing whose size cannot be read (its read
-- refused or failing) is listed in unpriced with why. The tool declares
-- pricing:GetProducts and those reads.
local GC = require "_group_cost"

local M = {}

-- things(kept) -> the priced things of a kept list [{type, name, id, why}],
-- and the kept things whose size could not be read (unpriced, with why)
local function things(kept, region)
  local out, missed = {}, {}
  local function read(k, service, op, input)
    local r, err = hypd.aws.try(service, op, input, { region = region })
    if not r then
      missed[#missed + 1] = { type = k.type, name = k.name, action = "keep", why = service .. ":" .. op ..
        " could not be read: " .. tostring(err and (err.code or err.message)) }
    end
    return r
  end
  for _, k in ipairs(kept or {}) do
    if k.type == "fsx:file-system" and k.id then
      local r = read(k, "fsx", "DescribeFileSystems", { FileSystemIds = { k.id } })
      local fs = r and (r.FileSystems or {})[1]
      if fs then out[#out + 1] = GC.fsx(fs, "keep", k.name) end
    elseif k.type == "sagemaker:cluster" then
      local r = read(k, "sagemaker", "DescribeCluster", { ClusterName = k.id or k.name })
      for _, t in ipairs(GC.instances(r and r.InstanceGroups, "keep", k.name)) do out[#out + 1] = t end
    elseif k.type == "eks:cluster" then
      out[#out + 1] = { type = "eks", name = k.name, action = "keep" }
    elseif k.type == "ec2:nat-gateway" then
      out[#out + 1] = { type = "nat", name = k.name, action = "keep" }
    end
  end
  return out, missed
end

-- of(kept, region) -> cost | nil, cost_error: what the kept things cost an hour and a month
function M.of(kept, region)
  local list, missed = things(kept, region)
  local c, why
  if #list == 0 then
    c = { currency = "USD", hourly = 0, monthly = 0, hours_per_month = hypd.cost.HOURS_PER_MONTH,
      items = hypd.json.array(), unpriced = hypd.json.array() }
  else
    c, why = hypd.cost.estimate(list, region)
    if not c then return nil, why end
  end
  for _, m in ipairs(missed) do c.unpriced[#c.unpriced + 1] = m end
  return c
end

return M
