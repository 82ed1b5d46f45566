-- sandbox.services.ec2.zones: availability zones (names and zone IDs in a
-- fixed, region-specific mapping) and the instance types HyperPod uses, as
-- EC2 sees them (lua/sandbox/data/instance_types.lua without the "ml.").
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"
local types = require "sandbox.data.instance_types"

local M = {}

-- region -> ordered { {suffix, zone id number} }
local MAPPINGS = {
  ["us-east-1"] = { { "a", 2 }, { "b", 4 }, { "c", 6 }, { "d", 1 }, { "e", 3 }, { "f", 5 } },
  ["us-east-2"] = { { "a", 1 }, { "b", 2 }, { "c", 3 } },
  ["us-west-2"] = { { "a", 2 }, { "b", 1 }, { "c", 3 }, { "d", 4 } },
  ["eu-west-1"] = { { "a", 3 }, { "b", 1 }, { "c", 2 } },
  ["ap-northeast-1"] = { { "a", 4 }, { "c", 1 }, { "d", 2 } },
}
local DIRECTIONS = { north = "n", south = "s", east = "e", west = "w", central = "c", northeast = "ne",
  northwest = "nw", southeast = "se", southwest = "sw" }

-- "eu-central-1" -> "euc1" (the zone-ID prefix)
local function abbrev(region)
  local geo, dir, num = region:match("^(%a+)%-(%a+)%-(%d+)$")
  if not geo then return (region:gsub("[^%w]", "")) end
  return geo .. (DIRECTIONS[dir] or dir:sub(1, 1)) .. num
end

-- list(region) -> array of AvailabilityZone outputs
function M.list(region)
  local map = MAPPINGS[region] or { { "a", 1 }, { "b", 2 }, { "c", 3 } }
  local out = {}
  for i, z in ipairs(map) do
    out[i] = {
      ZoneName = region .. z[1], ZoneId = abbrev(region) .. "-az" .. z[2], State = "available",
      RegionName = region, ZoneType = "availability-zone", OptInStatus = "opt-in-not-required",
      GroupName = region, GroupLongName = region, NetworkBorderGroup = region, Messages = json.array(),
    }
  end
  return out
end

-- find(region, name, id) -> the zone with that name or id, or nil
function M.find(region, name, id)
  for _, z in ipairs(M.list(region)) do
    if (name and z.ZoneName == name) or (id and z.ZoneId == id) then return z end
  end
end

local AZ_FIELDS = {
  ["zone-name"] = function(z) return z.ZoneName end,
  ["zone-id"] = function(z) return z.ZoneId end,
  ["region-name"] = function(z) return z.RegionName end,
  state = function(z) return z.State end,
  ["zone-type"] = function(z) return z.ZoneType end,
  ["group-name"] = function(z) return z.GroupName end,
  ["opt-in-status"] = function(z) return z.OptInStatus end,
  ["network-border-group"] = function(z) return z.NetworkBorderGroup end,
}

local ops = {}
M.operations = ops

function ops.DescribeAvailabilityZones(ctx, input)
  local zones = M.list(ctx.region)
  local function check(names, key, what)
    for _, n in ipairs(names or {}) do
      local ok = false
      for _, z in ipairs(zones) do ok = ok or z[key] == n end
      if not ok then ctx.error("InvalidParameterValue", string.format("Invalid %s: [%s]", what, n)) end
    end
  end
  check(input.ZoneNames, "ZoneName", "availability zone")
  check(input.ZoneIds, "ZoneId", "availability zone ID")
  local out = json.array()
  for _, z in ipairs(zones) do
    local named = (not input.ZoneNames or #input.ZoneNames == 0) and (not input.ZoneIds or #input.ZoneIds == 0)
    for _, n in ipairs(input.ZoneNames or {}) do named = named or n == z.ZoneName end
    for _, n in ipairs(input.ZoneIds or {}) do named = named or n == z.ZoneId end
    if named and common.matches(ctx, z, input.Filters, AZ_FIELDS) then out[#out + 1] = z end
  end
  return { AvailabilityZones = out }
end

-- instance types -----------------------------------------------------------

-- big GPU families offered in 2 zones only (capacity is scarce)
local SCARCE = { p5 = true, p5e = true, p5en = true, ["p6-b200"] = true, ["p6-b300"] = true, p4de = true }

local function family(name) return name:match("^([^.]+)%.") end

local function ec2_types()
  local names = {}
  for k in pairs(types) do names[#names + 1] = k:gsub("^ml%.", "") end
  table.sort(names)
  return names
end

-- zones_for(region, type) -> the zones offering an instance type (deterministic)
function M.zones_for(region, name)
  local zones = M.list(region)
  local fam = family(name)
  if not SCARCE[fam] or #zones <= 2 then return zones end
  local h = 0
  for i = 1, #fam do h = (h * 31 + fam:byte(i)) % 9973 end
  local first = h % #zones + 1
  return { zones[first], zones[first % #zones + 1] }
end

local OFFER_FIELDS = {
  ["instance-type"] = function(o) return o.InstanceType end,
  location = function(o) return o.Location end,
}

function ops.DescribeInstanceTypeOfferings(ctx, input)
  local lt = input.LocationType or "region"
  if lt ~= "region" and lt ~= "availability-zone" and lt ~= "availability-zone-id" then
    ctx.error("InvalidParameterValue", "The value '" .. tostring(lt) .. "' for parameter LocationType is invalid.")
  end
  local out = json.array()
  for _, name in ipairs(ec2_types()) do
    local locations = {}
    if lt == "region" then
      locations = { ctx.region }
    else
      for _, z in ipairs(M.zones_for(ctx.region, name)) do
        locations[#locations + 1] = lt == "availability-zone" and z.ZoneName or z.ZoneId
      end
    end
    for _, loc in ipairs(locations) do
      local o = { InstanceType = name, LocationType = lt, Location = loc }
      if common.matches(ctx, o, input.Filters, OFFER_FIELDS) then out[#out + 1] = o end
    end
  end
  return { InstanceTypeOfferings = out }
end

local NEURON_CORES = { Trainium = { 2, 2 }, Trainium2 = { 8, 3 }, Inferentia2 = { 2, 2 } }

local function info(name)
  local d = types["ml." .. name]
  local vcpus = d.vcpus
  local out = {
    InstanceType = name, CurrentGeneration = true, FreeTierEligible = false,
    SupportedUsageClasses = json.array { "on-demand", "spot" }, SupportedRootDeviceTypes = json.array { "ebs" },
    SupportedVirtualizationTypes = json.array { "hvm" }, BareMetal = false, Hypervisor = "nitro",
    ProcessorInfo = { SupportedArchitectures = json.array { "x86_64" } },
    VCpuInfo = { DefaultVCpus = vcpus, DefaultCores = math.max(1, vcpus // 2),
                 DefaultThreadsPerCore = vcpus > 1 and 2 or 1 },
    MemoryInfo = { SizeInMiB = d.memory_mib },
    InstanceStorageSupported = false,
    NetworkInfo = {
      NetworkPerformance = d.max_network_cards >= 8 and "3200 Gigabit" or (d.efa_supported and "100 Gigabit"
        or "Up to 25 Gigabit"),
      MaximumNetworkInterfaces = math.max(4, d.max_network_cards * 2), MaximumNetworkCards = d.max_network_cards,
      DefaultNetworkCardIndex = 0, Ipv4AddressesPerInterface = 50, Ipv6AddressesPerInterface = 50,
      Ipv6Supported = true, EnaSupport = "required", EfaSupported = d.efa_supported,
      EncryptionInTransitSupported = true,
    },
  }
  if d.efa_supported then out.NetworkInfo.EfaInfo = { MaximumEfaInterfaces = d.max_efa_interfaces } end
  local gpus, neurons, gpu_mem, neuron_mem = json.array(), json.array(), 0, 0
  for _, a in ipairs(d.accelerators or {}) do
    if a.kind == "gpu" then
      gpus[#gpus + 1] = { Name = a.name, Manufacturer = a.manufacturer, Count = a.count,
                          MemoryInfo = { SizeInMiB = a.memory_mib } }
      gpu_mem = gpu_mem + a.count * a.memory_mib
    elseif a.kind == "neuron" then
      local cores = NEURON_CORES[a.name] or { 2, 2 }
      neurons[#neurons + 1] = { Name = a.name, Count = a.count, CoreInfo = { Count = cores[1], Version = cores[2] },
                                MemoryInfo = { SizeInMiB = a.memory_mib } }
      neuron_mem = neuron_mem + a.count * a.memory_mib
    end
  end
  if #gpus > 0 then out.GpuInfo = { Gpus = gpus, TotalGpuMemoryInMiB = gpu_mem } end
  if #neurons > 0 then out.NeuronInfo = { NeuronDevices = neurons, TotalNeuronDeviceMemoryInMiB = neuron_mem } end
  return out
end

local TYPE_FIELDS = {
  ["instance-type"] = function(i) return i.InstanceType end,
  ["current-generation"] = function(i) return i.CurrentGeneration end,
  ["network-info.efa-supported"] = function(i) return i.NetworkInfo.EfaSupported end,
  ["vcpu-info.default-vcpus"] = function(i) return tostring(i.VCpuInfo.DefaultVCpus) end,
  ["memory-info.size-in-mib"] = function(i) return tostring(i.MemoryInfo.SizeInMiB) end,
  ["hypervisor"] = function(i) return i.Hypervisor end,
  ["bare-metal"] = function(i) return i.BareMetal end,
}

function ops.DescribeInstanceTypes(ctx, input)
  local names = input.InstanceTypes or {}
  local missing = {}
  for _, n in ipairs(names) do
    if not types["ml." .. n] then missing[#missing + 1] = n end
  end
  if #missing > 0 then
    ctx.error("InvalidInstanceType", "The following supplied instance types do not exist: [" ..
      table.concat(missing, ", ") .. "]")
  end
  if #names == 0 then names = ec2_types() end
  local out = json.array()
  for _, n in ipairs(names) do
    local i = info(n)
    if common.matches(ctx, i, input.Filters, TYPE_FIELDS) then out[#out + 1] = i end
  end
  return { InstanceTypes = out }
end

return M
