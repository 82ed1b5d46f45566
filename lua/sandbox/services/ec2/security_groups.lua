-- sandbox.services.ec2.security_groups: security groups and their rules.
-- A group keeps its rules flat (_rules: one per peer, each with an sgr- id);
-- IpPermissions are rebuilt from them, grouped by protocol and ports as EC2
-- answers.
local cidr = require "sandbox.services.ec2.cidr"
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = { operations = {} }
local ops = M.operations

local PROTOCOLS = { tcp = "tcp", udp = "udp", icmp = "icmp", icmpv6 = "icmpv6", ["-1"] = "-1", ["6"] = "tcp",
  ["17"] = "udp", ["1"] = "icmp", ["58"] = "icmpv6" }

local function new_group(ctx, vpc, name, description, tags)
  local id = ctx.id("sg")
  return {
    _id = id, GroupId = id, GroupName = name, Description = description, VpcId = vpc.VpcId, OwnerId = ctx.account,
    SecurityGroupArn = ctx:arn("security-group/" .. id, "ec2"), Tags = tags or json.array(),
    _rules = json.array { { id = ctx.id("sgr"), egress = true, proto = "-1", cidr = "0.0.0.0/0" } },
  }
end

-- create_default(ctx, vpc) -> the id of the VPC's new "default" group
function M.create_default(ctx, vpc)
  local g = new_group(ctx, vpc, "default", "default VPC security group")
  g._rules[#g._rules + 1] = { id = ctx.id("sgr"), egress = false, proto = "-1", group = g.GroupId }
  ctx.state:put("sg", g.GroupId, g)
  return g.GroupId
end

-- eks_cluster_group(ctx, vpc_id, cluster, seed) -> the id of the group EKS
-- makes for a new cluster (its "cluster security group"): named
-- eks-cluster-sg-<cluster>-<10 digits>, tagged as EKS tags it, all traffic
-- in from itself and out anywhere. ctx is the EKS service's; the group is
-- EC2's, and EKS deletes it when the cluster's interfaces are released
-- (delete_eks_cluster_group).
local EKS_SG_DESCRIPTION = "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes," ..
  " as well as any managed workloads."
function M.eks_cluster_group(ctx, vpc_id, cluster, seed)
  local digits = tostring(tonumber(sys.digest("sha256", cluster .. "/" .. seed, "hex"):sub(1, 8), 16) % 9000000000
    + 1000000000)
  local name = "eks-cluster-sg-" .. cluster .. "-" .. digits
  local g = new_group(ctx, { VpcId = vpc_id }, name, EKS_SG_DESCRIPTION, json.array {
    { Key = "Name", Value = name }, { Key = "aws:eks:cluster-name", Value = cluster },
    { Key = "kubernetes.io/cluster/" .. cluster, Value = "owned" } })
  g._rules[#g._rules + 1] = { id = ctx.id("sgr"), egress = false, proto = "-1", group = g.GroupId }
  g._eks_cluster = cluster
  ctx:view("ec2"):put("sg", g.GroupId, g)
  return g.GroupId
end

function M.delete_eks_cluster_group(ctx, id)
  local v = ctx:view("ec2")
  local g = id and v:get("sg", id)
  if g and g._eks_cluster then v:delete("sg", id) end
end

local function same(a, b)
  return a.egress == b.egress and a.proto == b.proto and a.from == b.from and a.to == b.to and a.cidr == b.cidr
    and a.group == b.group and a.prefix_list == b.prefix_list
end

local function describe_rule(r)
  local peer = r.cidr or r.group or r.prefix_list
  local proto = r.proto == "-1" and "ALL" or r.proto:upper()
  if r.from then
    return string.format('peer: %s, %s, from port: %d, to port: %d, ALLOW', peer, proto, r.from, r.to)
  end
  return string.format("peer: %s, %s, ALLOW", peer, proto)
end

-- rules_of(ctx, group, input, egress) -> flat rules named by IpPermissions
-- (or the legacy CidrIp/IpProtocol/FromPort/ToPort members)
local function rules_of(ctx, input, egress)
  local perms = input.IpPermissions
  if (not perms or #perms == 0) and input.IpProtocol then
    perms = { { IpProtocol = input.IpProtocol, FromPort = input.FromPort, ToPort = input.ToPort,
                IpRanges = input.CidrIp and { { CidrIp = input.CidrIp } } or nil } }
  end
  if not perms or #perms == 0 then
    ctx.error("MissingParameter", "The request must contain the parameter ipPermissions")
  end
  local out = {}
  for _, p in ipairs(perms) do
    local proto = PROTOCOLS[tostring(p.IpProtocol or ""):lower()]
    if not proto then
      ctx.error("InvalidParameterValue", string.format("Invalid value '%s' for IP protocol. Unknown protocol.",
        tostring(p.IpProtocol)))
    end
    local from, to = p.FromPort, p.ToPort
    if proto == "-1" then
      from, to = nil, nil
    elseif proto == "tcp" or proto == "udp" then
      if from == nil or to == nil then
        ctx.error("InvalidParameterValue", "Invalid value 'Must specify both from and to ports with TCP/UDP.' for portRange.")
      end
      if from < 0 or to > 65535 or from > to then
        ctx.error("InvalidParameterValue", string.format("Invalid TCP/UDP port range: %d-%d", from, to))
      end
    end
    local peers = 0
    for _, r in ipairs(p.IpRanges or {}) do
      if not cidr.parse(r.CidrIp) then
        ctx.error("InvalidParameterValue", "CIDR block " .. tostring(r.CidrIp) .. " is malformed")
      end
      out[#out + 1] = { egress = egress, proto = proto, from = from, to = to, cidr = r.CidrIp, description = r.Description }
      peers = peers + 1
    end
    for _, pair in ipairs(p.UserIdGroupPairs or {}) do
      local gid = pair.GroupId
      if not gid and pair.GroupName then
        for _, g in ipairs(ctx.state:list("sg")) do
          if g.GroupName == pair.GroupName and g.VpcId == input._vpc then gid = g.GroupId end
        end
        if not gid then common.not_found(ctx, "sg", pair.GroupName) end
      end
      common.need(ctx, "sg", gid)
      out[#out + 1] = { egress = egress, proto = proto, from = from, to = to, group = gid, description = pair.Description }
      peers = peers + 1
    end
    for _, pl in ipairs(p.PrefixListIds or {}) do
      out[#out + 1] = { egress = egress, proto = proto, from = from, to = to, prefix_list = pl.PrefixListId,
                        description = pl.Description }
      peers = peers + 1
    end
    if peers == 0 then
      ctx.error("MissingParameter", "The request must contain one of the parameters ipRanges, groups or prefixListIds")
    end
  end
  return out
end

-- permissions(ctx, group, egress) -> IpPermissions grouped by protocol and ports
local function permissions(ctx, g, egress)
  local out, index = json.array(), {}
  for _, r in ipairs(g._rules) do
    if r.egress == egress then
      local key = string.format("%s|%s|%s", r.proto, tostring(r.from), tostring(r.to))
      local p = index[key]
      if not p then
        p = { IpProtocol = r.proto, FromPort = r.from, ToPort = r.to, IpRanges = json.array(),
              Ipv6Ranges = json.array(), PrefixListIds = json.array(), UserIdGroupPairs = json.array() }
        index[key] = p
        out[#out + 1] = p
      end
      if r.cidr then
        p.IpRanges[#p.IpRanges + 1] = { CidrIp = r.cidr, Description = r.description }
      elseif r.group then
        p.UserIdGroupPairs[#p.UserIdGroupPairs + 1] = { GroupId = r.group, UserId = ctx.account,
                                                        Description = r.description }
      else
        p.PrefixListIds[#p.PrefixListIds + 1] = { PrefixListId = r.prefix_list, Description = r.description }
      end
    end
  end
  return out
end

local function rule_output(ctx, g, r)
  return {
    SecurityGroupRuleId = r.id, GroupId = g.GroupId, GroupOwnerId = ctx.account, IsEgress = r.egress,
    IpProtocol = r.proto, FromPort = r.from or -1, ToPort = r.to or -1, CidrIpv4 = r.cidr,
    PrefixListId = r.prefix_list, Description = r.description, Tags = json.array(),
    ReferencedGroupInfo = r.group and { GroupId = r.group, UserId = ctx.account } or nil,
    SecurityGroupRuleArn = ctx:arn("security-group-rule/" .. r.id),
  }
end

local function render(ctx)
  return function(g)
    local out = common.public(g)
    out.IpPermissions = permissions(ctx, g, false)
    out.IpPermissionsEgress = permissions(ctx, g, true)
    return out
  end
end

function ops.CreateSecurityGroup(ctx, input)
  local name = common.required(ctx, input, "GroupName", "groupName")
  local description = common.required(ctx, input, "Description", "groupDescription")
  if not input.VpcId then ctx.error("VPCIdNotSpecified", "No default VPC for this user") end
  local vpc = common.need(ctx, "vpc", input.VpcId)
  if #name > 255 then ctx.error("InvalidParameterValue", "Value for parameter groupName is too long.") end
  if name:lower():sub(1, 3) == "sg-" then ctx.error("InvalidParameterValue", "Group names may not be in the format sg-*.") end
  for _, g in ipairs(ctx.state:list("sg")) do
    if g.VpcId == vpc.VpcId and g.GroupName == name then
      ctx.error("InvalidGroup.Duplicate", string.format("The security group '%s' already exists for VPC '%s'", name,
        vpc.VpcId))
    end
  end
  local g = new_group(ctx, vpc, name, description, common.spec_tags(ctx, input, "security-group"))
  ctx.state:put("sg", g.GroupId, g)
  ctx.target = g.GroupId
  return { GroupId = g.GroupId, SecurityGroupArn = g.SecurityGroupArn, Tags = #g.Tags > 0 and g.Tags or nil }
end

local function find_group(ctx, input)
  if input.GroupId then return common.need(ctx, "sg", input.GroupId) end
  if input.GroupName then
    for _, g in ipairs(ctx.state:list("sg")) do
      if g.GroupName == input.GroupName then return g end
    end
    common.not_found(ctx, "sg", input.GroupName)
  end
  ctx.error("MissingParameter", "The request must contain the parameter groupId")
end

local function authorize(egress)
  return function(ctx, input)
    local g = find_group(ctx, input)
    input._vpc = g.VpcId
    local added = rules_of(ctx, input, egress)
    for i, r in ipairs(added) do
      for j = 1, i - 1 do
        if same(added[j], r) then
          ctx.error("InvalidPermission.Duplicate", 'the specified rule "' .. describe_rule(r) .. '" already exists')
        end
      end
      for _, old in ipairs(g._rules) do
        if same(old, r) then
          ctx.error("InvalidPermission.Duplicate", 'the specified rule "' .. describe_rule(r) .. '" already exists')
        end
      end
    end
    local out = json.array()
    for _, r in ipairs(added) do
      r.id = ctx.id("sgr")
      g._rules[#g._rules + 1] = r
      out[#out + 1] = rule_output(ctx, g, r)
    end
    ctx.state:put("sg", g.GroupId, g)
    ctx.target = g.GroupId
    return { Return = true, SecurityGroupRules = out }
  end
end

local function revoke(egress)
  return function(ctx, input)
    local g = find_group(ctx, input)
    input._vpc = g.VpcId
    local remove, unknown = {}, json.array()
    if input.SecurityGroupRuleIds and #input.SecurityGroupRuleIds > 0 then
      for _, rid in ipairs(input.SecurityGroupRuleIds) do
        local hit
        for _, r in ipairs(g._rules) do if r.id == rid and r.egress == egress then hit = r end end
        if not hit then
          ctx.error("InvalidSecurityGroupRuleId.NotFound", "The security group rule ID '" .. rid .. "' does not exist")
        end
        remove[#remove + 1] = hit
      end
    else
      for _, want in ipairs(rules_of(ctx, input, egress)) do
        local hit
        for _, r in ipairs(g._rules) do if same(r, want) then hit = r end end
        if hit then
          remove[#remove + 1] = hit
        else
          unknown[#unknown + 1] = { IpProtocol = want.proto, FromPort = want.from, ToPort = want.to,
            IpRanges = json.array { want.cidr and { CidrIp = want.cidr } or nil },
            UserIdGroupPairs = json.array { want.group and { GroupId = want.group } or nil } }
        end
      end
      if #remove == 0 then
        ctx.error("InvalidPermission.NotFound", "The specified rule does not exist in this security group.")
      end
    end
    local keep, revoked = json.array(), json.array()
    for _, r in ipairs(g._rules) do
      local drop = false
      for _, x in ipairs(remove) do drop = drop or x.id == r.id end
      if drop then
        revoked[#revoked + 1] = { SecurityGroupRuleId = r.id, GroupId = g.GroupId, IsEgress = r.egress,
          IpProtocol = r.proto, FromPort = r.from or -1, ToPort = r.to or -1, CidrIpv4 = r.cidr,
          PrefixListId = r.prefix_list, ReferencedGroupId = r.group, Description = r.description }
      else
        keep[#keep + 1] = r
      end
    end
    g._rules = keep
    ctx.state:put("sg", g.GroupId, g)
    ctx.target = g.GroupId
    return { Return = true, UnknownIpPermissions = #unknown > 0 and unknown or nil, RevokedSecurityGroupRules = revoked }
  end
end

ops.AuthorizeSecurityGroupIngress = authorize(false)
ops.AuthorizeSecurityGroupEgress = authorize(true)
ops.RevokeSecurityGroupIngress = revoke(false)
ops.RevokeSecurityGroupEgress = revoke(true)

local function rule_values(egress, get)
  return function(g)
    local out = {}
    for _, r in ipairs(g._rules) do
      if r.egress == egress then
        local v = get(r)
        if v ~= nil then out[#out + 1] = tostring(v) end
      end
    end
    return out
  end
end

local SG_FIELDS = {
  ["group-name"] = function(g) return g.GroupName end,
  ["group-id"] = function(g) return g.GroupId end,
  ["vpc-id"] = function(g) return g.VpcId end,
  description = function(g) return g.Description end,
  ["owner-id"] = function(g) return g.OwnerId end,
  ["ip-permission.cidr"] = rule_values(false, function(r) return r.cidr end),
  ["ip-permission.from-port"] = rule_values(false, function(r) return r.from end),
  ["ip-permission.to-port"] = rule_values(false, function(r) return r.to end),
  ["ip-permission.protocol"] = rule_values(false, function(r) return r.proto end),
  ["ip-permission.group-id"] = rule_values(false, function(r) return r.group end),
  ["egress.ip-permission.cidr"] = rule_values(true, function(r) return r.cidr end),
  ["egress.ip-permission.protocol"] = rule_values(true, function(r) return r.proto end),
}

function ops.DescribeSecurityGroups(ctx, input)
  local ids = input.GroupIds
  if input.GroupNames and #input.GroupNames > 0 then
    ids = json.array()
    for _, name in ipairs(input.GroupNames) do
      local found
      for _, g in ipairs(ctx.state:list("sg")) do if g.GroupName == name then found = g.GroupId end end
      if not found then common.not_found(ctx, "sg", name) end
      ids[#ids + 1] = found
    end
  end
  return { SecurityGroups = common.describe(ctx, "sg", ids, input.Filters, SG_FIELDS, render(ctx)) }
end

local RULE_FIELDS = {
  ["group-id"] = function(x) return x.GroupId end,
  ["security-group-rule-id"] = function(x) return x.SecurityGroupRuleId end,
  ["is-egress"] = function(x) return x.IsEgress end,
}

function ops.DescribeSecurityGroupRules(ctx, input)
  local out, wanted = json.array(), {}
  for _, id in ipairs(input.SecurityGroupRuleIds or {}) do wanted[id] = false end
  local any = next(wanted) ~= nil
  for _, g in ipairs(ctx.state:list("sg")) do
    for _, r in ipairs(g._rules) do
      if not any or wanted[r.id] ~= nil then
        wanted[r.id] = true
        local item = rule_output(ctx, g, r)
        if common.matches(ctx, item, input.Filters, RULE_FIELDS) then out[#out + 1] = item end
      end
    end
  end
  for id, seen in pairs(wanted) do
    if not seen then
      ctx.error("InvalidSecurityGroupRuleId.NotFound", "The security group rule ID '" .. id .. "' does not exist")
    end
  end
  return { SecurityGroupRules = out }
end

function ops.DeleteSecurityGroup(ctx, input)
  local g = find_group(ctx, input)
  if g.GroupName == "default" then
    ctx.error("CannotDelete", string.format('the specified group: "%s" name: "default" cannot be deleted by a user',
      g.GroupId))
  end
  for _, other in ipairs(ctx.state:list("sg")) do
    if other.GroupId ~= g.GroupId then
      for _, r in ipairs(other._rules) do
        if r.group == g.GroupId then
          ctx.error("DependencyViolation", "resource " .. g.GroupId .. " has a dependent object")
        end
      end
    end
  end
  for _, e in ipairs(ctx.state:list("vpce")) do
    for _, sg in ipairs(e.Groups or {}) do
      if sg.GroupId == g.GroupId then ctx.error("DependencyViolation", "resource " .. g.GroupId .. " has a dependent object") end
    end
  end
  if require("sandbox.services.ec2.managed_enis").holding(ctx, "group", g.GroupId) then -- EKS's, HyperPod's
    ctx.error("DependencyViolation", "resource " .. g.GroupId .. " has a dependent object")
  end
  if require("sandbox.services.fsx.network").uses_group(ctx, g.GroupId) then -- its interfaces
    ctx.error("DependencyViolation", "resource " .. g.GroupId .. " has a dependent object")
  end
  ctx.state:delete("sg", g.GroupId)
  ctx.target = g.GroupId
  return { Return = true, GroupId = g.GroupId }
end

return M
