-- The simulated Elastic Load Balancing v2 API (regional), read side: the
-- Network Load Balancers the AWS Load Balancer Controller of a simulated
-- EKS cluster made for its LoadBalancer Services
-- (sandbox.k8s.controllers.loadbalancers keeps the records), as
-- DescribeLoadBalancers and DescribeTags show them. Nothing here makes a
-- load balancer: the operations that would are not simulated and answer
-- as an unknown action would.
--
-- Records: "loadbalancer" (id the ARN): { LoadBalancerArn, DNSName,
-- CanonicalHostedZoneId, CreatedTime, LoadBalancerName, Scheme, VpcId,
-- State, Type, AvailabilityZones, IpAddressType, Tags = [{Key, Value}],
-- cluster (the EKS cluster whose controller made it; not shown) }.
local json = require "hypd.json"

local M = { scope = "regional", operations = {}, transitions = {} }
local ops = M.operations

-- the Route 53 zone of NLBs by region (what DescribeLoadBalancers names)
local ZONES = { ["us-east-1"] = "Z26RNL4JYFTOTI", ["us-east-2"] = "ZLMOA37VPKANP", ["us-west-1"] = "Z24FKFUX50B4VW",
  ["us-west-2"] = "Z18D5FSROUN65G", ["eu-west-1"] = "Z2IFOLAFXWLO4F", ["eu-central-1"] = "Z3F0SRJ5LGBH90",
  ["ap-northeast-1"] = "Z31USIVHYNEOWT", ["ap-southeast-1"] = "ZKVM4W9LS7TM", ["ap-southeast-2"] = "ZCT6FZBF4DROD" }
function M.zone(region) return ZONES[region] or ZONES["us-west-2"] end

local function view(lb)
  local out = {}
  for k, v in pairs(lb) do if k ~= "Tags" and k ~= "cluster" then out[k] = v end end
  return out
end

function ops.DescribeLoadBalancers(ctx, input)
  local all = ctx.state:list("loadbalancer")
  local want, by_name = nil, nil
  if input.LoadBalancerArns and #input.LoadBalancerArns > 0 then
    want = {}
    for _, a in ipairs(input.LoadBalancerArns) do want[a] = true end
  end
  if input.Names and #input.Names > 0 then
    by_name = {}
    for _, n in ipairs(input.Names) do by_name[n] = true end
  end
  if want and by_name then
    ctx.error("ValidationError", "Load balancer names and load balancer ARNs cannot be specified at the same time")
  end
  local out, found = json.array(), {}
  for _, lb in ipairs(all) do
    if (not want or want[lb.LoadBalancerArn]) and (not by_name or by_name[lb.LoadBalancerName]) then
      out[#out + 1] = view(lb)
      found[lb.LoadBalancerArn], found[lb.LoadBalancerName] = true, true
    end
  end
  for _, set in ipairs { want or {}, by_name or {} } do
    for k in pairs(set) do
      if not found[k] then ctx.error("LoadBalancerNotFound", "One or more load balancers not found", 400) end
    end
  end
  local start = tonumber(input.Marker or "") or 0
  local size = input.PageSize or 400
  if size < 1 or size > 400 then
    ctx.error("ValidationError", "1 validation error detected: Value '" .. tostring(size) .. "' at 'pageSize' " ..
      "failed to satisfy constraint: Member must have value between 1 and 400")
  end
  local page = json.array()
  for i = start + 1, math.min(#out, start + size) do page[#page + 1] = out[i] end
  return { LoadBalancers = page, NextMarker = start + size < #out and tostring(start + size) or nil }
end

function ops.DescribeTags(ctx, input)
  local out = json.array()
  for _, arn in ipairs(input.ResourceArns or {}) do
    local lb = ctx.state:get("loadbalancer", arn)
    if not lb then ctx.error("LoadBalancerNotFound", "Load balancer '" .. arn .. "' not found", 400) end
    out[#out + 1] = { ResourceArn = arn, Tags = lb.Tags or json.array() }
  end
  return { TagDescriptions = out }
end

return M
