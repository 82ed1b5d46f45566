-- sandbox.services.ec2.regions: DescribeRegions. The commercial regions
-- with their opt-in status as a new account sees them: the regions enabled
-- by default answer without AllRegions; the opt-in ones only with
-- AllRegions = true (as not-opted-in). RegionNames names regions (an
-- unknown one is InvalidParameterValue, "Invalid region: [x]"); filters:
-- endpoint, opt-in-status, region-name.
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"

local M = {}

-- name -> true when the region must be opted into
M.REGIONS = {
  ["us-east-1"] = false, ["us-east-2"] = false, ["us-west-1"] = false, ["us-west-2"] = false,
  ["ap-south-1"] = false, ["ap-northeast-1"] = false, ["ap-northeast-2"] = false, ["ap-northeast-3"] = false,
  ["ap-southeast-1"] = false, ["ap-southeast-2"] = false, ["ca-central-1"] = false, ["eu-central-1"] = false,
  ["eu-west-1"] = false, ["eu-west-2"] = false, ["eu-west-3"] = false, ["eu-north-1"] = false,
  ["sa-east-1"] = false,
  ["af-south-1"] = true, ["ap-east-1"] = true, ["ap-south-2"] = true, ["ap-southeast-3"] = true,
  ["ap-southeast-4"] = true, ["ap-southeast-5"] = true, ["ap-southeast-7"] = true, ["ca-west-1"] = true,
  ["eu-central-2"] = true, ["eu-south-1"] = true, ["eu-south-2"] = true, ["il-central-1"] = true,
  ["me-central-1"] = true, ["me-south-1"] = true, ["mx-central-1"] = true,
}

local FIELDS = {
  endpoint = function(r) return r.Endpoint end,
  ["opt-in-status"] = function(r) return r.OptInStatus end,
  ["region-name"] = function(r) return r.RegionName end,
}

local ops = {}
M.operations = ops

function ops.DescribeRegions(ctx, input)
  local names = {}
  for name in pairs(M.REGIONS) do names[#names + 1] = name end
  table.sort(names)
  local wanted
  if input.RegionNames and #input.RegionNames > 0 then
    wanted = {}
    local bad = {}
    for _, n in ipairs(input.RegionNames) do
      if M.REGIONS[n] == nil then bad[#bad + 1] = tostring(n) end
      wanted[n] = true
    end
    if #bad > 0 then ctx.error("InvalidParameterValue", "Invalid region: [" .. table.concat(bad, ", ") .. "]") end
  end
  local out = json.array()
  for _, name in ipairs(names) do
    local opt_in = M.REGIONS[name]
    -- a region named explicitly answers even when not opted in, as EC2 does
    if input.AllRegions or not opt_in or (wanted and wanted[name]) then
      local r = { RegionName = name, Endpoint = "ec2." .. name .. ".amazonaws.com",
        OptInStatus = opt_in and "not-opted-in" or "opt-in-not-required" }
      if (not wanted or wanted[name]) and common.matches(ctx, r, input.Filters, FIELDS) then out[#out + 1] = r end
    end
  end
  return { Regions = out }
end

return M
