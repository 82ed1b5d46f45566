-- _kept_cost: what a teardown kept costs while it stays (hypd.cost), for
-- the result of cluster_delete and hyperpod_delete. A kept FSx file system
-- is priced by its capacity and deployment (fsx:DescribeFileSystems), a kept
-- HyperPod cluster by its groups (sagemaker:DescribeCluster), a kept EKS
-- cluster or NAT gateway as one; what else is kept costs nothing by the hour
-- that hypd prices. The tool declares pricing:GetProducts and those reads.
local M = {}

-- things(kept) -> the priced things of a kept list [{type, name, id, why}]
local function things(kept)
  local out = {}
  for _, k in ipairs(kept or {}) do
    if k.type == "fsx:file-system" and k.id then
      local r = hypd.aws.try("fsx", "DescribeFileSystems", { FileSystemIds = { k.id } })
      local fs = r and (r.FileSystems or {})[1]
      if fs then
        local lc = fs.LustreConfiguration or {}
        out[#out + 1] = { type = "fsx", name = k.name, action = "keep", quantity = fs.StorageCapacity,
          deployment = lc.DeploymentType, throughput = lc.PerUnitStorageThroughput }
      end
    elseif k.type == "sagemaker:cluster" then
      local r = hypd.aws.try("sagemaker", "DescribeCluster", { ClusterName = k.id or k.name })
      for _, g in ipairs(r and r.InstanceGroups or {}) do
        out[#out + 1] = { type = "instance", instance_type = g.InstanceType, quantity = g.CurrentCount or 0,
          action = "keep", name = tostring(g.InstanceGroupName) .. " in " .. tostring(k.name) }
      end
    elseif k.type == "eks:cluster" then
      out[#out + 1] = { type = "eks", name = k.name, action = "keep" }
    elseif k.type == "ec2:nat-gateway" then
      out[#out + 1] = { type = "nat", name = k.name, action = "keep" }
    end
  end
  return out
end

-- of(kept, region) -> cost | nil, cost_error: what the kept things cost an hour and a month
function M.of(kept, region)
  local list = things(kept)
  if #list == 0 then
    return { currency = "USD", hourly = 0, monthly = 0, hours_per_month = hypd.cost.HOURS_PER_MONTH,
      items = hypd.json.array(), unpriced = hypd.json.array() }
  end
  return hypd.cost.estimate(list, region)
end

return M
