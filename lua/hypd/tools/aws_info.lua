-- aws_get_availability_zones, aws_get_instance_types: the facts a person
-- needs to place a HyperPod cluster, read from the AWS APIs of the region.
local aws = require "hypd.aws"
local common = require "hypd.tools.common"
local hp_types = require "hypd.aws.hyperpod_types"
local tool = require "hypd.tool"

local REGION = common.REGION

local opts = common.aws_opts

tool.define {
  name = "aws_get_availability_zones",
  summary = "Availability Zones of a region, with their zone IDs",
  description = "Lists the region's Availability Zones with their names (us-west-2a) and zone IDs (usw2-az1). " ..
    "Zone IDs are what capacity reservations and training plans name; zone names differ between accounts.",
  kind = "read",
  params = { region = REGION },
  result = { type = "object", properties = { region = { type = "string" }, zones = { type = "array", items = {
    type = "object", properties = { name = { type = "string" }, zone_id = { type = "string" },
      state = { type = "string" } } } } } },
  run = function(_, p)
    local o = opts(p.region)
    local out = aws.call("ec2", "DescribeAvailabilityZones", { Filters = { { Name = "zone-type",
      Values = { "availability-zone" } } } }, o)
    local zones = {}
    for _, z in ipairs(out.AvailabilityZones or {}) do
      zones[#zones + 1] = { name = z.ZoneName, zone_id = z.ZoneId, state = z.State }
    end
    table.sort(zones, function(a, b) return a.name < b.name end)
    return { region = o.region, zones = zones }
  end,
}

-- hardware(ec2_types) -> name -> DescribeInstanceTypes entry, 100 at a time
local function hardware(names, o)
  local out = {}
  for i = 1, #names, 100 do
    local chunk = { table.unpack(names, i, math.min(#names, i + 99)) }
    local r = aws.call("ec2", "DescribeInstanceTypes", { InstanceTypes = chunk }, o)
    for _, t in ipairs(r.InstanceTypes or {}) do out[t.InstanceType] = t end
  end
  return out
end

local function offered(o, zone)
  local params = { LocationType = zone and (zone:match("%-az%d+$") and "availability-zone-id" or
    "availability-zone") or "region" }
  if zone then params.Filters = { { Name = "location", Values = { zone } } } end
  local set = {}
  for _, x in ipairs(aws.all("ec2", "DescribeInstanceTypeOfferings", params, o)) do
    set[x.InstanceType] = true
  end
  return set
end

tool.define {
  name = "aws_get_instance_types",
  summary = "HyperPod instance types offered in a region or zone, with GPUs, GPU memory and EFA",
  description = "Lists the SageMaker HyperPod instance types (ml.*) whose hardware is offered in the region, " ..
    "or in one Availability Zone (name or zone ID), with vCPUs, memory, accelerator count and model, " ..
    "accelerator memory and EFA interfaces. Use gpu_only to see only accelerated types.",
  kind = "read",
  params = {
    region = REGION,
    zone = { type = "string", pattern = "^([a-z]{2}-[a-z]+-\\d[a-z]|[a-z]{3,4}\\d-az\\d+)$",
      pattern_help = "an Availability Zone name like us-west-2a or a zone ID like usw2-az1",
      description = "an Availability Zone name (us-west-2a) or zone ID (usw2-az1)" },
    gpu_only = { type = "boolean", default = false, description = "only types with GPUs or Neuron accelerators" },
  },
  result = { type = "object", properties = { region = { type = "string" }, zone = { type = "string" },
    instance_types = { type = "array", items = { type = "object", properties = {
      name = { type = "string" }, vcpus = { type = "integer" }, memory_gib = { type = "number" },
      accelerator_count = { type = "integer" }, accelerator = { type = "string" },
      accelerator_memory_gib = { type = "number" }, efa_interfaces = { type = "integer" } } } } } },
  run = function(_, p)
    local o = opts(p.region)
    local avail = offered(o, p.zone)
    local names = {}
    for _, n in ipairs(hp_types) do
      local ec2 = n:sub(4)
      if avail[ec2] then names[#names + 1] = ec2 end
    end
    local hw = hardware(names, o)
    local out = {}
    for _, ec2 in ipairs(names) do
      local t = hw[ec2]
      if t then
        local acc, count, mem, kind = nil, 0, 0, nil
        for _, g in ipairs((t.GpuInfo or {}).Gpus or {}) do
          acc, count, kind = (g.Manufacturer and g.Manufacturer .. " " or "") .. (g.Name or "GPU"),
            count + (g.Count or 0), "gpu"
          mem = mem + (g.Count or 0) * ((g.MemoryInfo or {}).SizeInMiB or 0)
        end
        for _, n in ipairs((t.NeuronInfo or {}).NeuronDevices or {}) do
          acc, count, kind = "AWS " .. (n.Name or "Neuron"), count + (n.Count or 0), "neuron"
          mem = mem + (n.Count or 0) * ((n.MemoryInfo or {}).SizeInMiB or 0)
        end
        if not p.gpu_only or count > 0 then
          local efa = (t.NetworkInfo or {}).EfaSupported and ((t.NetworkInfo.EfaInfo or {}).MaximumEfaInterfaces or 1) or 0
          out[#out + 1] = { name = "ml." .. ec2, vcpus = (t.VCpuInfo or {}).DefaultVCpus,
            memory_gib = ((t.MemoryInfo or {}).SizeInMiB or 0) / 1024, accelerator_count = count,
            accelerator = acc, accelerator_kind = kind, accelerator_memory_gib = mem / 1024, efa_interfaces = efa }
        end
      end
    end
    return { region = o.region, zone = p.zone, instance_types = out }
  end,
}
