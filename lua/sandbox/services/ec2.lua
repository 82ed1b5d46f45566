-- sandbox.services.ec2: the EC2 networking a HyperPod cluster stands on:
-- availability zones and instance types, VPCs, subnets, internet and NAT
-- gateways, elastic IPs, route tables, security groups, VPC endpoints,
-- tags and filters, regions, the instances of EKS managed node groups
-- (described, stopped and started), instances RunInstances launches and
-- their volumes (ec2/launch).
-- Every operation honours DryRun; every
-- Describe* the model pages honours MaxResults and NextToken (ec2/paging).
--
-- Records (ctx.view("ec2") for other services), keyed by their id, each
-- with the API's own member names plus internal "_" fields:
--   vpc      Vpc (+ _default_sg, _main_rtb, _dns_support, _dns_hostnames)
--   subnet   Subnet
--   igw      InternetGateway
--   rtb      RouteTable
--   sg       SecurityGroup without IpPermissions (+ _rules, flat)
--   address  Address (+ _nat when a NAT gateway holds it)
--   natgw    NatGateway
--   vpce     VpcEndpoint (+ _prefix_list)
local M = { scope = "regional", operations = {}, transitions = {} }

local FAMILIES = { "common", "zones", "vpc", "gateways", "routes", "endpoints", "security_groups",
  "interfaces", "regions", "instances", "power", "launch" }
local model = require "hypd.aws.models.ec2"
local paging = require "sandbox.services.ec2.paging"

local function dry_run(fn)
  return function(ctx, input)
    if input.DryRun then
      ctx.error("DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)
    end
    return fn(ctx, input)
  end
end

for _, name in ipairs(FAMILIES) do
  local family = require("sandbox.services.ec2." .. name)
  for op, fn in pairs(family.operations or {}) do
    assert(not M.operations[op], "two EC2 families define " .. op)
    local pag = model.operations[op] and model.operations[op].paginator
    M.operations[op] = dry_run(pag and paging.wrap(op, fn, pag) or fn)
  end
  for t, fn in pairs(family.transitions or {}) do M.transitions[t] = fn end
end

return M
