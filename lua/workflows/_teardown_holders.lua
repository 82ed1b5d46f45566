-- _teardown_holders: what holds a security group that a teardown
-- wants to delete, as EC2 tells it, so that the teardown deletes in an
-- order AWS accepts and says which resource holds which when it cannot:
--   interfaces(ctx, group_id) -> {{id, owner, what}}: the network
--       interfaces that use the group, with the resource they belong to
--       (an FSx file system, a VPC endpoint, a NAT gateway, a load
--       balancer, the EKS cluster: read from the interface's description)
--   referrers(groups, group_id) -> {group, ...}: the other groups
--       (of the list) whose rules name the group as a source or target
--   order(groups) -> groups: referrers before the groups they refer to
--       (AWS refuses to delete a group another group's rule names)
--   held(ctx, group_id) -> "held by ...": what holds it, for an error
--   subnet_held(ctx, subnet_id) -> the same for a subnet (its interfaces)
--   explain(err, held) -> err with what holds the resource in its message
--       (its code kept: a DependencyViolation is still tried again)
local M = {}

-- owner(description) -> the id of the resource an interface belongs to
local function owner(d)
  d = tostring(d or "")
  return d:match("(fs%-%x+)") or d:match("(vpce%-%x+)") or d:match("(nat%-%x+)") or d:match("^ELB (%S+)") or
    d:match("^Amazon EKS (%S+)") or d:match("(%S+)$")
end

function M.interfaces(ctx, group_id)
  local out = {}
  local r = ctx:call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "group-id",
    Values = { group_id } } } })
  for _, i in ipairs(r.NetworkInterfaces or {}) do
    out[#out + 1] = { id = i.NetworkInterfaceId, owner = owner(i.Description),
      what = tostring(i.Description or i.NetworkInterfaceId) }
  end
  return out
end

local function names(g, id)
  local hit = false
  for _, list in ipairs { g.IpPermissions or {}, g.IpPermissionsEgress or {} } do
    for _, perm in ipairs(list) do
      for _, pair in ipairs(perm.UserIdGroupPairs or {}) do hit = hit or pair.GroupId == id end
    end
  end
  return hit
end

function M.referrers(groups, group_id)
  local out = {}
  for _, g in ipairs(groups) do
    if g.GroupId ~= group_id and names(g, group_id) then out[#out + 1] = g end
  end
  return out
end

function M.order(groups)
  local done, out = {}, {}
  local function visit(g, path)
    if done[g.GroupId] or path[g.GroupId] then return end -- a cycle: AWS refuses that order too; retried
    path[g.GroupId] = true
    for _, r in ipairs(M.referrers(groups, g.GroupId)) do visit(r, path) end
    path[g.GroupId] = nil
    done[g.GroupId] = true
    out[#out + 1] = g
  end
  for _, g in ipairs(groups) do visit(g, {}) end
  return out
end

-- held(ctx, id) -> "held by FSx file system fs-1 (its network interface
-- eni-1), security group sg-2 (a rule names it)": what EC2 shows holding it
function M.held(ctx, id)
  local parts = {}
  for _, i in ipairs(M.interfaces(ctx, id)) do
    parts[#parts + 1] = i.what .. " (network interface " .. tostring(i.id) .. ")"
  end
  local me = ((ctx:try("ec2", "DescribeSecurityGroups", { GroupIds = { id } }) or {}).SecurityGroups or {})[1]
  local g = me and ctx:try("ec2", "DescribeSecurityGroups", { Filters = { { Name = "vpc-id",
    Values = { me.VpcId } } } })
  for _, r in ipairs(M.referrers((g or {}).SecurityGroups or {}, id)) do
    parts[#parts + 1] = "security group " .. tostring(r.GroupName) .. " (" .. r.GroupId .. ": a rule of it names " ..
      id .. ")"
  end
  if #parts == 0 then return nil end
  return "held by " .. table.concat(parts, ", ")
end

function M.subnet_held(ctx, id)
  local parts = {}
  local r = ctx:call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "subnet-id", Values = { id } } } })
  for _, i in ipairs(r.NetworkInterfaces or {}) do
    parts[#parts + 1] = tostring(i.Description or i.NetworkInterfaceId) .. " (network interface " ..
      tostring(i.NetworkInterfaceId) .. ")"
  end
  if #parts == 0 then return nil end
  return "held by " .. table.concat(parts, ", ")
end

function M.explain(err, held)
  if type(err) ~= "table" or err.code ~= "DependencyViolation" or not held then return err end
  local e = {}
  for k, x in pairs(err) do e[k] = x end
  e.message = tostring(err.message) .. ": " .. held
  return e
end

return M
