-- aws_get_availability_zones: where a HyperPod cluster can be placed.
local P = require "_params"

return tool {
  name = "aws_get_availability_zones",
  summary = "Availability Zones of a region, with their zone IDs",
  description = "Lists the region's Availability Zones with their names (us-west-2a) and zone IDs (usw2-az1). " ..
    "Zone IDs are what capacity reservations and training plans name; zone names differ between accounts.",
  kind = "read",
  aws = { "ec2:DescribeAvailabilityZones" },
  params = P.form({}, { "region" }, { region = P.region }),
  result = { type = "object", properties = { region = { type = "string" }, zones = { type = "array", items = {
    type = "object", properties = { name = { type = "string" }, zone_id = { type = "string" },
      state = { type = "string" } } } } } },
  run = function(ctx)
    local out = ctx:call("ec2", "DescribeAvailabilityZones", { Filters = { { Name = "zone-type",
      Values = { "availability-zone" } } } })
    local zones = {}
    for _, z in ipairs(out.AvailabilityZones or {}) do
      zones[#zones + 1] = { name = z.ZoneName, zone_id = z.ZoneId, state = z.State }
    end
    table.sort(zones, function(a, b) return a.name < b.name end)
    return { region = ctx:aws_region(), zones = zones }
  end,
}
