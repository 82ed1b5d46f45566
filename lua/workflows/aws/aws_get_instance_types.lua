-- aws_get_instance_types: the HyperPod instance types a region or zone
-- offers, with the hardware a person sizes a cluster by.
local P = require "_params"

-- hardware(ctx, names) -> EC2 type -> DescribeInstanceTypes entry, 100 at a time
local function hardware(ctx, names)
  local out = {}
  for i = 1, #names, 100 do
    local chunk = { table.unpack(names, i, math.min(#names, i + 99)) }
    local r = ctx:call("ec2", "DescribeInstanceTypes", { InstanceTypes = chunk })
    for _, t in ipairs(r.InstanceTypes or {}) do out[t.InstanceType] = t end
  end
  return out
end

local function offered(ctx, zone)
  local params = { LocationType = zone and (zone:match("%-az%d+$") and "availability-zone-id" or
    "availability-zone") or "region" }
  if zone then params.Filters = { { Name = "location", Values = { zone } } } end
  local set = {}
  for _, x in ipairs(hypd.aws.all("ec2", "DescribeInstanceTypeOfferings", params, ctx:aws_opts())) do
    set[x.InstanceType] = true
  end
  return set
end

-- accelerators(t) -> name, count, memory in MiB, kind ("gpu" | "neuron")
local function accelerators(t)
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
  return acc, count, mem, kind
end

return tool {
  name = "aws_get_instance_types",
  summary = "HyperPod instance types offered in a region or zone, with GPUs, GPU memory and EFA",
  description = "Lists the SageMaker HyperPod instance types (ml.*) whose hardware is offered in the region, " ..
    "or in one Availability Zone (name or zone ID), with vCPUs, memory, accelerator count and model, " ..
    "accelerator memory and EFA interfaces. Use gpu_only to see only accelerated types.",
  kind = "read",
  aws = { "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes" },
  params = P.form({},
    { "gpu_only", "zone", "region" },
    {
    region = P.region,
    zone = { type = "string", pattern = "^([a-z]{2}-[a-z]+-\\d[a-z]|[a-z]{3,4}\\d-az\\d+)$",
      pattern_help = "an Availability Zone name like us-west-2a or a zone ID like usw2-az1",
      description = "an Availability Zone name (us-west-2a) or zone ID (usw2-az1)" },
    gpu_only = { type = "boolean", default = false, description = "only types with GPUs or Neuron accelerators" },
  }),
  result = { type = "object", properties = { region = { type = "string" }, zone = { type = "string" },
    instance_types = { type = "array", items = { type = "object", properties = {
      name = { type = "string" }, vcpus = { type = "integer" }, memory_gib = { type = "number" },
      accelerator_count = { type = "integer" }, accelerator = { type = "string" },
      accelerator_memory_gib = { type = "number" }, efa_interfaces = { type = "integer" } } } } } },
  run = function(ctx, p)
    local avail = offered(ctx, p.zone)
    local names = {}
    for _, n in ipairs(hypd.aws.hyperpod_types()) do
      local ec2 = n:sub(4)
      if avail[ec2] then names[#names + 1] = ec2 end
    end
    local hw = hardware(ctx, names)
    local out = {}
    for _, ec2 in ipairs(names) do
      local t = hw[ec2]
      if t then
        local acc, count, mem, kind = accelerators(t)
        if not p.gpu_only or count > 0 then
          local net = t.NetworkInfo or {}
          out[#out + 1] = { name = "ml." .. ec2, vcpus = (t.VCpuInfo or {}).DefaultVCpus,
            memory_gib = ((t.MemoryInfo or {}).SizeInMiB or 0) / 1024, accelerator_count = count,
            accelerator = acc, accelerator_kind = kind, accelerator_memory_gib = mem / 1024,
            efa_interfaces = net.EfaSupported and ((net.EfaInfo or {}).MaximumEfaInterfaces or 1) or 0 }
        end
      end
    end
    return { region = ctx:aws_region(), zone = p.zone, instance_types = out }
  end,
}
