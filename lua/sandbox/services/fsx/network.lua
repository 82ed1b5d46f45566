-- sandbox FSx for Lustre networking: what CreateFileSystem checks of its
-- subnet and security groups, as FSx does before it creates anything:
--   * every security group exists and is in the subnet's VPC;
--   * no group given means the VPC's default group;
--   * the groups let Lustre (LNET) traffic in on TCP port 988 from the
--     file system itself: an inbound rule of one of the groups for TCP 988
--     (or all traffic) whose source is one of the groups or a CIDR block
--     holding the subnet; otherwise InvalidNetworkSettings, in FSx's words.
-- The file system's network interfaces are EC2's requester-managed
-- interfaces (ec2 DescribeNetworkInterfaces lists them with its groups),
-- and a group they use cannot be deleted until the file system is gone.
local json = require "hypd.json"

local M = {}

M.LUSTRE_PORT = 988

local function parse4(c)
  local a, b, c2, d, n = tostring(c):match("^(%d+)%.(%d+)%.(%d+)%.(%d+)/(%d+)$")
  if not a then return nil end
  return ((tonumber(a) * 256 + tonumber(b)) * 256 + tonumber(c2)) * 256 + tonumber(d), tonumber(n)
end

-- holds(outer, inner) -> the CIDR block outer contains inner
local function holds(outer, inner)
  local oa, on = parse4(outer)
  local ia, inn = parse4(inner)
  if not oa or not ia or on > inn then return false end
  local shift = 32 - on
  return (oa >> shift) == (ia >> shift)
end

local function allows_lustre(rule)
  if rule.egress then return false end
  if rule.proto == "-1" then return true end
  return rule.proto == "tcp" and (rule.from or 0) <= M.LUSTRE_PORT and M.LUSTRE_PORT <= (rule.to or 65535)
end

-- groups(ctx, input, subnet) -> the security group ids the file system
-- uses, after FSx's checks (subnet: sandbox.services.eks.deps' subnet view)
function M.groups(ctx, input, subnet)
  local ec2 = ctx:view("ec2")
  local ids = {}
  for _, id in ipairs(input.SecurityGroupIds or {}) do ids[#ids + 1] = id end
  if #ids > 5 then
    ctx.error("BadRequest", "A file system can have at most 5 security groups.")
  end
  if #ids == 0 then
    for _, g in ipairs(ec2:list("sg")) do
      if g.VpcId == subnet.vpc and g.GroupName == "default" then ids[1] = g.GroupId end
    end
  end
  local groups, member = {}, {}
  for _, id in ipairs(ids) do
    local g = ec2:get("sg", id)
    if not g then
      ctx.error("InvalidNetworkSettings", "The security group '" .. id .. "' does not exist", 400,
        { InvalidSecurityGroupId = id })
    end
    if g.VpcId ~= subnet.vpc then
      ctx.error("InvalidNetworkSettings", string.format("The security group '%s' does not belong to the VPC of " ..
        "subnet '%s' (%s)", id, subnet.id, tostring(subnet.vpc)), 400, { InvalidSecurityGroupId = id })
    end
    groups[#groups + 1], member[id] = g, true
  end
  local open = false
  for _, g in ipairs(groups) do
    for _, r in ipairs(g._rules or {}) do
      if allows_lustre(r) and ((r.group and member[r.group]) or (r.cidr and subnet.cidr and holds(r.cidr, subnet.cidr)))
      then
        open = true
      end
    end
  end
  if not open then
    ctx.error("InvalidNetworkSettings", "The file system cannot be created because the default security group " ..
      "in the subnet provided or the provided security groups do not permit Lustre LNET network traffic on port " ..
      M.LUSTRE_PORT .. " for the file system's own network interfaces.", 400)
  end
  return json.array(ids)
end

-- interfaces(ctx) -> {subnet, eni id, groups, description} of every file
-- system that holds network interfaces (all but the deleted ones)
function M.interfaces(ctx)
  local out = {}
  for _, fs in ipairs(ctx:view("fsx"):list("filesystem")) do
    local groups = json.array()
    for i, id in ipairs(fs._groups or {}) do
      local g = ctx:view("ec2"):get("sg", id)
      groups[i] = { GroupId = id, GroupName = g and g.GroupName or id }
    end
    for _, eni in ipairs(fs.NetworkInterfaceIds or {}) do
      out[#out + 1] = { subnet = fs.SubnetIds[1], id = eni, groups = groups, ids = fs._groups or {},
        description = "ENI for Lustre file system " .. fs.FileSystemId }
    end
  end
  return out
end

-- uses_group(ctx, id) -> the id of a file system whose interfaces use group id
function M.uses_group(ctx, id)
  for _, e in ipairs(M.interfaces(ctx)) do
    for _, g in ipairs(e.ids) do
      if g == id then return e.description:match("(fs%-%w+)$") end
    end
  end
end

return M
