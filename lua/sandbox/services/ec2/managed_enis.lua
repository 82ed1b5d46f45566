-- sandbox.services.ec2.managed_enis: the network interfaces other services
-- put into a VPC, as EC2 lists them (requester-managed, in-use) and as they
-- hold their subnets and security groups:
--   * an EKS cluster's control-plane interfaces ("Amazon EKS <name>"): two,
--     in its first subnets, with its security groups and the cluster security group EKS made, from CreateCluster
--     until RELEASE seconds (simulated) after the cluster is gone: EKS
--     releases them after the cluster, so a group or subnet deleted the
--     moment DeleteCluster finishes is still refused for a while, as on AWS;
--   * a LoadBalancer Service's load balancer ("ELB <name>", two in the
--     cluster's subnets with its groups), recorded by the sandbox's service
--     controller (k8s/controllers/loadbalancers) and left behind when the
--     EKS cluster goes before the Service;
--   * a HyperPod cluster's interfaces ("SageMaker HyperPod cluster <name>"),
--     one per subnet of its VpcConfig with its groups, while it exists.
--   list(ctx) -> {{id, subnet, ip, description, groups = {{GroupId, GroupName}}}}
--   eks_addresses(region, c) -> the IPs of EKS cluster c's interfaces
--   released(ctx, cluster): an EKS cluster is gone; its interfaces linger
--   forget(ctx, key): they are released (the EKS transition enis_released)
local cidr = require "sandbox.services.ec2.cidr"
local json = require "hypd.json"
local state = require "sandbox.state"
local sys = require "hypd.sys"

local M = {}
M.RELEASE = 120

local function eni_id(seed)
  return "eni-" .. sys.digest("sha256", seed, "hex"):sub(1, 17)
end

local function groups(ec2, ids)
  local out = json.array()
  for i, id in ipairs(ids or {}) do
    local g = ec2:get("sg", id)
    out[i] = { GroupId = id, GroupName = g and g.GroupName or id }
  end
  return out
end

-- address(ec2, subnet, id) -> the interface's private IP: a host of its
-- subnet picked by its id (past the 4 addresses AWS reserves at the start)
local function address(ec2, subnet, id)
  local s = ec2:get("subnet", subnet)
  local b = s and cidr.parse(s.CidrBlock)
  if not b then return nil end
  return cidr.host(b, 4 + tonumber(sys.digest("sha256", id, "hex"):sub(1, 8), 16) % (cidr.size(b) - 5))
end

-- an EKS control-plane interface holds the cluster's groups and the
-- cluster security group EKS made
local function eks_groups(vpc)
  local ids = {}
  for _, id in ipairs(vpc.securityGroupIds or {}) do ids[#ids + 1] = id end
  if vpc.clusterSecurityGroupId then ids[#ids + 1] = vpc.clusterSecurityGroupId end
  return ids
end

local function eks_enis(ec2, out, name, vpc, tag)
  local subnets = vpc.subnetIds or {}
  for i = 1, math.min(2, #subnets) do
    local id = eni_id("eks/" .. name .. "/" .. (tag or "") .. "/" .. i)
    out[#out + 1] = { id = id, subnet = subnets[i], ip = address(ec2, subnets[i], id),
      description = "Amazon EKS " .. name, groups = groups(ec2, eks_groups(vpc)), kind = "interface" }
  end
end

-- eks_addresses(region, c) -> the private IPs of the EKS cluster c's
-- control-plane interfaces (the kubernetes Service's endpoints)
function M.eks_addresses(region, c)
  local out, ips = {}, {}
  eks_enis(state.view(region, "ec2"), out, c.name, c.resourcesVpcConfig or {}, c.createdAt)
  for i, e in ipairs(out) do ips[i] = e.ip end
  return ips
end

function M.list(ctx)
  local out, ec2 = {}, ctx:view("ec2")
  for _, c in ipairs(ctx:view("eks"):list("cluster")) do
    eks_enis(ec2, out, c.name, c.resourcesVpcConfig or {}, c.createdAt)
  end
  for _, r in ipairs(ctx:view("ec2"):list("eks_released")) do eks_enis(ec2, out, r.name, r.vpc, r.tag) end
  for _, lb in ipairs(ctx:view("ec2"):list("k8s_lb")) do -- a LoadBalancer Service's (k8s loadbalancers)
    local subnets = lb.vpc.subnetIds or {}
    for i = 1, math.min(2, #subnets) do
      local id = eni_id("elb/" .. lb.name .. "/" .. i)
      out[#out + 1] = { id = id, subnet = subnets[i], ip = address(ec2, subnets[i], id), description = "ELB " .. lb.name,
        groups = groups(ec2, lb.vpc.securityGroupIds), kind = "interface" }
    end
  end
  for _, c in ipairs(ctx:view("sagemaker"):list("cluster")) do
    local v = c.VpcConfig or {}
    for i, s in ipairs(v.Subnets or {}) do
      local id = eni_id("hyperpod/" .. c.ClusterArn .. "/" .. i)
      out[#out + 1] = { id = id, subnet = s, ip = address(ec2, s, id),
        description = "SageMaker HyperPod cluster " .. c.ClusterName, groups = groups(ec2, v.SecurityGroupIds),
        kind = "interface" }
    end
  end
  return out
end

-- released(ctx, c): the EKS cluster c (its stored record) is gone; its
-- interfaces stay RELEASE seconds more, until the EKS service's scheduled
-- transition enis_released (ctx: the EKS service's context), so that they
-- go on the sandbox's own timeline as its other transitions do
function M.released(ctx, c)
  local key = c.name .. "/" .. tostring(c.createdAt)
  ctx:view("ec2"):put("eks_released", key, { name = c.name, tag = c.createdAt, vpc = c.resourcesVpcConfig or {} })
  ctx:later(M.RELEASE, "enis_released", { key = key })
end

function M.forget(ctx, key)
  local r = ctx:view("ec2"):get("eks_released", key)
  ctx:view("ec2"):delete("eks_released", key)
  if r then -- EKS deletes the cluster security group it made with them
    require("sandbox.services.ec2.security_groups").delete_eks_cluster_group(ctx, r.vpc.clusterSecurityGroupId)
  end
end

-- holding(ctx, field, id) -> the description of an interface whose subnet
-- (field "subnet") or group (field "group") is id
function M.holding(ctx, field, id)
  for _, e in ipairs(M.list(ctx)) do
    if field == "subnet" and e.subnet == id then return e.description .. " (" .. e.id .. ")" end
    if field == "group" then
      for _, g in ipairs(e.groups) do if g.GroupId == id then return e.description .. " (" .. e.id .. ")" end end
    end
  end
end

return M
