-- sandbox.k8s.controllers.loadbalancers: what gives a LoadBalancer Service
-- its address on EKS. Two controllers, as on a real cluster:
--   - the cloud provider's service controller (in-tree), for a Service with
--     no loadBalancerClass and no `aws-load-balancer-type: external`: a
--     Classic Load Balancer (or an NLB with `aws-load-balancer-type: nlb`),
--     hostname a<uid>-<n>.<region>.elb.amazonaws.com, events
--     EnsuringLoadBalancer / EnsuredLoadBalancer;
--   - the AWS Load Balancer Controller, for `aws-load-balancer-type:
--     external` or loadBalancerClass service.k8s.aws/nlb: only when its
--     Deployment (kube-system, aws-load-balancer-controller) has a ready
--     replica; an NLB k8s-<ns>-<name>-<hash>.elb.<region>.amazonaws.com,
--     event SuccessfullyReconciled. Without it such a Service stays
--     <pending>, as it does on EKS.
-- The address comes PROVISION seconds (simulated) after the Service; a
-- Service that stops being a LoadBalancer loses it. No ELB API is simulated,
-- but the load balancer's network interfaces are (ec2 state k8s_lb, listed
-- by sandbox.services.ec2.managed_enis): in the cluster's subnets with its
-- security groups, removed when the controller sees the Service go. When
-- the EKS cluster is deleted with the Service still there, nobody removes
-- them: the load balancer stays and holds the VPC, as on AWS.
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local state = require "sandbox.state"

local M = {}
M.PROVISION = 5
local TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
local LBC_CLASS = "service.k8s.aws/nlb"

-- owner(svc) -> "lbc" (the AWS Load Balancer Controller), "cloud" (in-tree)
-- or nil (another class: nobody here)
local function owner(svc)
  local ann = svc.metadata.annotations or {}
  local class = svc.spec.loadBalancerClass
  if class == LBC_CLASS or ann[TYPE] == "external" or ann[TYPE] == "nlb-ip" then return "lbc" end
  if class == nil then return "cloud" end
end

local function lbc_ready(ctl)
  local d = ctl.cl:get(ctl:r("apps", "v1", "deployments"), "kube-system", "aws-load-balancer-controller")
  return d and ((d.status or {}).readyReplicas or 0) > 0
end

local function trunc(s, n) return (s:gsub("[^%w]", ""):sub(1, n)) end

-- hex(s, n) -> n hex digits derived from s (FNV-1a), stable for one Service
local function hex(s, n)
  local h = -3750763034362895579
  for i = 1, #s do h = (h ~ s:byte(i)) * 1099511628211 end
  local out = string.format("%016x", h)
  while #out < n do h = (h ~ #out) * 1099511628211; out = out .. string.format("%016x", h) end
  return out:sub(1, n)
end

-- hostname(ctl, svc, who) -> the DNS name AWS gives the load balancer
local function hostname(ctl, svc, who)
  local region = ctl.region or "us-west-2"
  local uid = svc.metadata.uid:gsub("-", "")
  if who == "lbc" then
    return string.format("k8s-%s-%s-%s-%s.elb.%s.amazonaws.com", trunc(svc.metadata.namespace, 8),
      trunc(svc.metadata.name, 8), hex(uid, 10), hex(uid .. "dns", 16), region)
  end
  if ((svc.metadata.annotations or {})[TYPE]) == "nlb" then
    return string.format("a%s-%s.elb.%s.amazonaws.com", uid:sub(1, 32), hex(uid, 16), region)
  end
  return string.format("a%s-%d.%s.elb.amazonaws.com", uid:sub(1, 32), tonumber(hex(uid, 7), 16) + 1000000000, region)
end

-- the load balancer's interfaces, as EC2 records them (nil host: gone)
local function record(ctl, k, host)
  local eks = ctl.eks
  if not eks or not eks.name then return end
  local v = state.view(ctl.region, "ec2")
  local id = eks.name .. "/" .. k
  if host then
    v:put("k8s_lb", id, { name = host:match("^([^.]+)"), cluster = eks.name, vpc = eks.resourcesVpcConfig or {} })
  elseif v:get("k8s_lb", id) then
    v:delete("k8s_lb", id)
  end
end

ctl_.handlers.loadbalancer = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local sr = ctl:r("", "v1", "services")
  local svc = cl:get(sr, ns, name)
  local mem = ctl:memo("loadbalancers")
  if not svc then mem[k] = nil record(ctl, k, nil) return end
  local st = svc.status or {}
  local has = ((st.loadBalancer or {}).ingress or {})[1] ~= nil
  local who = svc.spec.type == "LoadBalancer" and owner(svc) or nil
  if who == "lbc" and not lbc_ready(ctl) then who = nil end
  if not who then
    mem[k] = nil
    record(ctl, k, nil)
    if has and svc.spec.type ~= "LoadBalancer" then
      ctl_.put_status(ctl, sr, svc, { loadBalancer = {} })
    end
    return
  end
  if has then return end
  local m = mem[k]
  if not m or m.uid ~= svc.metadata.uid then
    m = { uid = svc.metadata.uid, at = core.now() + M.PROVISION / ctl_.speed() }
    mem[k] = m
    if who == "cloud" then
      ctl_.event(ctl, svc, "Normal", "EnsuringLoadBalancer", "Ensuring load balancer", "service-controller")
    end
    return ctl:at(m.at, "loadbalancer", k)
  end
  if core.now() < m.at then return ctl:at(m.at, "loadbalancer", k) end
  local host = hostname(ctl, svc, who)
  local cur = ctl_.put_status(ctl, sr, svc, { loadBalancer = { ingress = { { hostname = host } } } })
  record(ctl, k, host)
  if who == "cloud" then
    ctl_.event(ctl, cur, "Normal", "EnsuredLoadBalancer", "Ensured load balancer", "service-controller")
  else
    ctl_.event(ctl, cur, "Normal", "SuccessfullyReconciled", "Successfully reconciled", "service")
  end
end

function M.watch(ctl, _, r, obj)
  if r.group == "" and r.kind == "Service" then
    ctl:enqueue("loadbalancer", ctl_.key(obj))
  elseif r.group == "apps" and r.kind == "Deployment" and obj.metadata.name == "aws-load-balancer-controller" then
    for _, s in ipairs(ctl.cl:list(ctl:r("", "v1", "services"))) do
      if (s.spec or {}).type == "LoadBalancer" then ctl:enqueue("loadbalancer", ctl_.key(s)) end
    end
  end
end

function M.start(ctl)
  for _, s in ipairs(ctl.cl:list(ctl:r("", "v1", "services"))) do
    if (s.spec or {}).type == "LoadBalancer" then ctl:enqueue("loadbalancer", ctl_.key(s)) end
  end
end

return M
