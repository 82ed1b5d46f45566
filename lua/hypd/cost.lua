-- hypd.cost: what things cost an hour and a month, at the AWS on-demand
-- list prices the Price List API gives (pricing:GetProducts; its endpoint
-- is in us-east-1, the product's region is the regionCode filter). The
-- prices are read through the running tool's guardrail, so a tool that
-- prices declares pricing:GetProducts; they are kept per process for
-- M.TTL seconds (prices change rarely).
--
--   cost.estimate(things, region) -> cost | nil, cost_error
--     things: { { type, name, action, quantity, ... } } where type is
--       "instance"   instance_type; quantity = the instance count
--       "eks"        an EKS cluster's control plane
--       "nat"        a NAT gateway (the hourly charge; traffic is not priced)
--       "fsx"        deployment, throughput; quantity = capacity in GB
--     cost = { currency = "USD", hourly, monthly, hours_per_month = 730,
--       items = [{type, name, action, quantity, unit, unit_price, hourly, monthly}],
--       unpriced = [{type, name, action, why}] }
--     What the price of a thing is unknown for (no product in the list) is
--     unpriced, with why; the sums are of the priced items. cost_error (one
--     line) is why no price could be read at all (AccessDenied, no network):
--     a plan or a read then answers without cost, never fails for it.
--   cost.of_plan(rows, region) -> cost | nil, cost_error | nil: the cost of
--     the rows of a plan (hypd.tool.kit) that cost money; nil when none does.
--     What a row creates or keeps is added up; what it deletes is listed
--     with action "delete" and counted apart (saved_hourly, saved_monthly).
local aws = require "hypd.aws"
local core = require "hypd.core"
local json = require "hypd.json"

local M = {}

M.HOURS_PER_MONTH = 730 -- AWS's own monthly figure: 24 x 365 / 12
M.TTL = 6 * 3600
M.ENDPOINT_REGION = "us-east-1"

local cache = {} -- key -> { at, price, unit } | { at, absent = why }

-- the Price List product of each thing: service code and TERM_MATCH filters
local PRODUCTS = {
  instance = function(t) return "AmazonSageMaker",
    { productFamily = "ML Instance", component = "HyperPod", instanceName = t.instance_type } end,
  eks = function() return "AmazonEKS", { productFamily = "Compute", tiertype = "HAStandard" } end,
  nat = function() return "AmazonEC2", { productFamily = "NAT Gateway" } end,
  fsx = function(t)
    local kind = tostring(t.deployment or ""):gsub("^(%a)(%a*)", function(a, b) return a:upper() .. b:lower() end)
    return "AmazonFSx", { fileSystemType = "Lustre", deploymentOption = kind,
      throughputCapacity = t.throughput and tostring(t.throughput) or nil }
  end,
}
-- per unit: how many units of the price one hour of the thing uses
local PER_HOUR = { Hrs = 1, Hours = 1, ["GB-Mo"] = 1 / 730 }

local function key_of(service, filters, region)
  local keys = {}
  for k in pairs(filters) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = { service, region }
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. filters[k] end
  return table.concat(parts, "|")
end

-- on_demand(doc) -> USD per unit, unit of a product document's on-demand term
local function on_demand(doc)
  for _, term in pairs(((doc or {}).terms or {}).OnDemand or {}) do
    for _, dim in pairs(term.priceDimensions or {}) do
      local usd = tonumber((dim.pricePerUnit or {}).USD)
      if usd then return usd, dim.unit end
    end
  end
end

-- price(service, filters, region) -> usd, unit | nil, why (no such product) | raises the AWS error
local function price(service, filters, region)
  local key = key_of(service, filters, region)
  local hit = cache[key]
  if hit and core.now() - hit.at < M.TTL then
    if hit.absent then return nil, hit.absent end
    return hit.price, hit.unit
  end
  local list = json.array { { Type = "TERM_MATCH", Field = "regionCode", Value = region } }
  for k, v in pairs(filters) do list[#list + 1] = { Type = "TERM_MATCH", Field = k, Value = v } end
  local out = aws.call("pricing", "GetProducts", { ServiceCode = service, Filters = list, FormatVersion = "aws_v1",
    MaxResults = 2 }, { region = M.ENDPOINT_REGION })
  local first = (out.PriceList or {})[1]
  local doc = type(first) == "string" and json.decode(first) or first
  local usd, unit = on_demand(doc)
  if not usd or not PER_HOUR[unit] then
    local why = "no on-demand price in the AWS Price List for " .. service .. " " .. region
    cache[key] = { at = core.now(), absent = why }
    return nil, why
  end
  cache[key] = { at = core.now(), price = usd, unit = unit }
  return usd, unit
end

local function round(x, places)
  local m = 10 ^ (places or 4)
  return math.floor(x * m + 0.5) / m
end

local function one_line(err)
  local msg = type(err) == "table" and (err.message or err.code) or tostring(err)
  msg = tostring(msg):gsub("%s+", " ")
  local code = type(err) == "table" and err.code
  return "the prices could not be read (pricing:GetProducts" .. (code and (", " .. code) or "") .. "): " .. msg
end

function M.estimate(things, region)
  region = region or aws.region()
  local out = { currency = "USD", hourly = 0, monthly = 0, hours_per_month = M.HOURS_PER_MONTH,
    items = json.array(), unpriced = json.array(), saved_hourly = 0, saved_monthly = 0 }
  for _, t in ipairs(things) do
    local product = PRODUCTS[t.type]
    local q = t.quantity or 1
    local ok, usd, unit = pcall(function()
      if not product then return nil, "hypd does not price a " .. tostring(t.type) end
      local service, filters = product(t)
      return price(service, filters, region)
    end)
    if not ok then return nil, one_line(usd) end
    if usd then
      local hourly = usd * PER_HOUR[unit] * q
      local item = { type = t.type, name = t.name, action = t.action, quantity = q, unit = unit,
        unit_price = usd, hourly = round(hourly), monthly = round(hourly * M.HOURS_PER_MONTH, 2),
        instance_type = t.instance_type }
      out.items[#out.items + 1] = item
      if t.action == "delete" then
        out.saved_hourly = out.saved_hourly + hourly
      else
        out.hourly = out.hourly + hourly
      end
    else
      out.unpriced[#out.unpriced + 1] = { type = t.type, name = t.name, action = t.action,
        instance_type = t.instance_type, why = unit }
    end
  end
  out.monthly = round(out.hourly * M.HOURS_PER_MONTH, 2)
  out.hourly = round(out.hourly)
  out.saved_monthly = round(out.saved_hourly * M.HOURS_PER_MONTH, 2)
  out.saved_hourly = round(out.saved_hourly)
  return out
end

-- things of plan rows -------------------------------------------------------

local function group_things(into, groups, action, owner)
  for _, g in ipairs(groups or {}) do
    local n = g.InstanceCount or g.TargetCount or g.CurrentCount or 0
    into[#into + 1] = { type = "instance", instance_type = g.InstanceType, quantity = n, action = action,
      name = tostring(g.InstanceGroupName) .. (owner and (" in " .. owner) or "") }
  end
end

local ACTION = { create = "create", change = "change", keep = "keep", delete = "delete" }

-- things(row, source) -> the things a plan row makes, keeps or deletes that cost money
-- (source: the object the row was planned from, when the row itself does not hold it)
local function row_things(into, row, source)
  local action = ACTION[row.action]
  if not action then return end
  local f, s = row.fields or {}, source or {}
  if row.type == "sagemaker:cluster" then
    group_things(into, f.InstanceGroups or s.InstanceGroups, action, row.name)
  elseif row.type == "sagemaker:instance-group" then
    local itype = f.InstanceType or s.InstanceType
    local count = f.InstanceCount or s.TargetCount or s.CurrentCount or 0
    if row.action == "change" and row.changes then
      local c = row.changes.TargetCount or row.changes.InstanceCount
      if c then count = c.to end
    end
    into[#into + 1] = { type = "instance", instance_type = itype, quantity = count, action = action, name = row.name }
  elseif row.type == "eks:cluster" then
    into[#into + 1] = { type = "eks", name = row.name, action = action }
  elseif row.type == "ec2:nat-gateway" then
    into[#into + 1] = { type = "nat", name = row.name, action = action }
  elseif row.type == "fsx:file-system" then
    local lc = s.LustreConfiguration or {}
    into[#into + 1] = { type = "fsx", name = row.name, action = action,
      quantity = f.StorageCapacity or s.StorageCapacity, deployment = f.DeploymentType or lc.DeploymentType,
      throughput = f.PerUnitStorageThroughput or lc.PerUnitStorageThroughput }
  end
end
M.row_things = row_things

function M.of_plan(rows, region, source)
  local things = {}
  for _, row in ipairs(rows or {}) do row_things(things, row, source and source(row)) end
  if #things == 0 then return nil end
  return M.estimate(things, region)
end

-- forget(): the cached prices are read again (tests)
function M.forget() cache = {} end

return M
