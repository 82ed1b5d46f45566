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
--     <pending>, as it does on EKS. The controller calls ELB as the IAM
--     role of its service account (IRSA, eks.amazonaws.com/role-arn, or
--     an EKS Pod Identity association): a role that is missing, whose
--     trust policy does not let the service account's pods assume it
--     (sandbox.policy_trust, conditions included), or whose policies
--     (inline and attached) do not
--     allow elasticloadbalancing:CreateLoadBalancer, makes no NLB: the
--     Service stays <pending> with the controller's Warning
--     FailedDeployModel (AccessDenied), as on EKS.
-- The address comes PROVISION seconds (simulated) after the Service; a
-- Service that stops being a LoadBalancer loses it. The controller's NLBs
-- are also what the sandbox's Elastic Load Balancing v2 API shows
-- (services/elasticloadbalancing: DescribeLoadBalancers, DescribeTags),
-- tagged as the controller tags them (elbv2.k8s.aws/cluster,
-- service.k8s.aws/stack, service.k8s.aws/resource); the record goes with
-- the Service's address. The in-tree load balancers are not in it.
-- Every load balancer's network interfaces are simulated too (ec2 state
-- k8s_lb, listed by sandbox.services.ec2.managed_enis): in the cluster's
-- subnets with its security groups, removed when the controller sees the
-- Service go. When the EKS cluster is deleted with the Service still
-- there, nobody removes them: the load balancer stays and holds the VPC,
-- as on AWS.
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local elb = require "sandbox.services.elasticloadbalancing"
local json = require "hypd.json"
local objects = require "sandbox.k8s.objects"
local policies = require "sandbox.services.iam.policies"
local policy = require "sandbox.policy"
local state = require "sandbox.state"
local trust = require "sandbox.policy_trust"

local M = {}
M.PROVISION = 5
M.RETRY = 60 -- seconds before the controller tries a model it could not deploy again
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
  return d and ((d.status or {}).readyReplicas or 0) > 0, d
end

-- untrusted(ctl, role, via, ns, sa) -> nil when the role's trust policy
-- lets the service account's pods assume it, else the error the SDK in the
-- controller's pod logs: through IRSA, sts:AssumeRoleWithWebIdentity from
-- the cluster's OIDC provider with <issuer>:sub
-- system:serviceaccount:<ns>:<sa> and <issuer>:aud sts.amazonaws.com;
-- through EKS Pod Identity, pods.eks.amazonaws.com calling sts:AssumeRole
-- and sts:TagSession for the cluster (aws:SourceAccount, aws:SourceArn)
local function untrusted(ctl, role, via, ns, sa)
  local region = ctl.region or "us-west-2"
  local c = state.view(region, "eks"):get("cluster", ctl.cl.name)
  local doc = trust.doc(role.AssumeRolePolicyDocument)
  if via == "irsa" then
    local issuer = c and c.identity and c.identity.oidc and c.identity.oidc.issuer or ""
    local host = issuer:gsub("^https://", "")
    local provider = state.view("global", "iam"):get("oidc", host)
    local ok = provider and trust.allows(doc, "sts:AssumeRoleWithWebIdentity",
      function(ptype, v) return ptype == "Federated" and v == provider.Arn end,
      { [host .. ":sub"] = "system:serviceaccount:" .. ns .. ":" .. sa, [host .. ":aud"] = "sts.amazonaws.com" })
    if ok then return nil end
    if not provider then
      return "WebIdentityErr: failed to retrieve credentials\ncaused by: InvalidIdentityToken: No OpenIDConnect " ..
        "provider found in your account for " .. issuer
    end
    return "WebIdentityErr: failed to retrieve credentials\ncaused by: AccessDenied: Not authorized to perform " ..
      "sts:AssumeRoleWithWebIdentity"
  end
  local context = { ["aws:SourceAccount"] = (tostring(role.Arn):match("::(%d+):")),
    ["aws:SourceArn"] = c and c.arn }
  local function svc(ptype, v) return ptype == "Service" and v == "pods.eks.amazonaws.com" end
  if trust.allows(doc, "sts:AssumeRole", svc, context) and trust.allows(doc, "sts:TagSession", svc, context) then
    return nil
  end
  return "AccessDeniedException: EKS Pod Identity cannot assume role " .. role.Arn .. ": its trust policy must " ..
    "let pods.eks.amazonaws.com call sts:AssumeRole and sts:TagSession"
end

-- denied(ctl, d) -> nil when the controller's role may make an NLB, else
-- the AccessDenied message it would log
local function denied(ctl, d)
  local sa_name = (((d.spec or {}).template or {}).spec or {}).serviceAccountName or "default"
  local sa = ctl.cl:get(ctl:r("", "v1", "serviceaccounts"), d.metadata.namespace, sa_name)
  local arn = sa and ((sa.metadata or {}).annotations or {})["eks.amazonaws.com/role-arn"]
  local via = arn and "irsa" or nil
  if not arn then -- EKS Pod Identity, when the service account has an association
    for _, a in ipairs(state.view(ctl.region or "us-west-2", "eks"):list("pod_identity")) do
      if a.clusterName == ctl.cl.name and a.namespace == d.metadata.namespace and a.serviceAccount == sa_name then
        arn, via = a.roleArn, "pod-identity"
      end
    end
  end
  local action = "elasticloadbalancing:CreateLoadBalancer"
  if not arn then
    return "AccessDenied: the node's instance role is not authorized to perform: " .. action .. " (service " ..
      "account " .. d.metadata.namespace .. "/" .. sa_name .. " has no eks.amazonaws.com/role-arn and no EKS " ..
      "Pod Identity association)"
  end
  local iam = state.view("global", "iam")
  local role = iam:get("role", tostring(arn):match(":role/(.+)$") or "")
  if not role then
    return "WebIdentityErr: failed to retrieve credentials: role " .. arn .. " does not exist"
  end
  local refused = untrusted(ctl, role, via, d.metadata.namespace, sa_name)
  if refused then return refused end
  local docs = {}
  for _, text in pairs(role.inline or {}) do docs[#docs + 1] = text end
  for _, parn in ipairs(role.attached or {}) do
    local p = policies.lookup({ state = iam }, parn)
    for _, v in ipairs(p and p.versions or {}) do
      if v.VersionId == p.DefaultVersionId then docs[#docs + 1] = v.Document end
    end
  end
  local verdict = "implicit"
  for _, text in ipairs(docs) do
    local doc = json.decode(text) or json.decode((tostring(text):gsub("%%(%x%x)", function(h)
      return string.char(tonumber(h, 16)) end))) or {}
    local v = policy.evaluate(doc, action, "*")
    if v == "deny" then verdict = "deny" break end
    if v == "allow" then verdict = "allow" end
  end
  if verdict == "allow" then return nil end
  local acct = tostring(arn):match("::(%d+):") or "123456789012"
  return string.format("AccessDenied: User: arn:aws:sts::%s:assumed-role/%s/aws-load-balancer-controller is not " ..
    "authorized to perform: %s because no identity-based policy allows the %s action", acct, role.RoleName,
    action, action)
end

local function trunc(s, n) return (s:gsub("[^%w]", ""):sub(1, n)) end

-- hex(s, n) -> n hex digits derived from s (FNV-1a), stable for one Service
local function hex(s, n)
  local h = ctl_.fnv1a64(s)
  local out = string.format("%016x", h)
  while #out < n do h = (h ~ #out) * ctl_.FNV64_PRIME; out = out .. string.format("%016x", h) end
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

-- the NLB records of the controller: put when a Service gets its address,
-- dropped when it loses it (or goes)
local function elbv2(ctl) return state.view(ctl.region or "us-west-2", "elasticloadbalancing") end

local function forget(ctl, key)
  local v = elbv2(ctl)
  for _, lb in ipairs(v:list("loadbalancer")) do
    for _, tag in ipairs(lb.Tags or {}) do
      if tag.Key == "service.k8s.aws/stack" and tag.Value == key and lb.cluster == ctl.cl.name then
        v:delete("loadbalancer", lb.LoadBalancerArn)
      end
    end
  end
end

local function record(ctl, svc, host)
  local eks = ctl.eks or {}
  local part, acct = tostring(eks.arn):match("^arn:([^:]+):eks:[^:]+:(%d+):")
  local region = ctl.region or "us-west-2"
  local name, id = host:match("^(.-)%-(%x+)%.elb%.")
  local ann = svc.metadata.annotations or {}
  local vpc = (eks.resourcesVpcConfig or {}).vpcId
  local zones = json.array()
  for _, s in ipairs((eks.resourcesVpcConfig or {}).subnetIds or {}) do
    local sub = state.view(region, "ec2"):get("subnet", s)
    zones[#zones + 1] = { SubnetId = s, ZoneName = sub and sub.AvailabilityZone or nil }
  end
  local arn = string.format("arn:%s:elasticloadbalancing:%s:%s:loadbalancer/net/%s/%s", part or "aws", region,
    acct or "123456789012", name, id)
  elbv2(ctl):put("loadbalancer", arn, { cluster = ctl.cl.name, LoadBalancerArn = arn, DNSName = host,
    CanonicalHostedZoneId = elb.zone(region), CreatedTime = objects.rfc3339(core.now()), LoadBalancerName = name,
    Scheme = ann["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing" and
      "internet-facing" or "internal", VpcId = vpc, State = { Code = "active" }, Type = "network",
    AvailabilityZones = zones, IpAddressType = "ipv4",
    Tags = { { Key = "elbv2.k8s.aws/cluster", Value = ctl.cl.name },
      { Key = "service.k8s.aws/stack", Value = ctl_.key(svc) },
      { Key = "service.k8s.aws/resource", Value = "LoadBalancer" } } })
end

-- the load balancer's interfaces, as EC2 records them (nil host: gone)
local function interfaces(ctl, k, host)
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
  if not svc then
    mem[k] = nil
    forget(ctl, k)
    interfaces(ctl, k, nil)
    return
  end
  local st = svc.status or {}
  local has = ((st.loadBalancer or {}).ingress or {})[1] ~= nil
  local who = svc.spec.type == "LoadBalancer" and owner(svc) or nil
  if who == "lbc" then
    local ready, d = lbc_ready(ctl)
    local why = ready and denied(ctl, d)
    if why and not has then
      ctl_.event(ctl, svc, "Warning", "FailedDeployModel", "Failed deploy model due to " .. why, "service")
    end
    if why then ctl:at(core.now() + M.RETRY / ctl_.speed(), "loadbalancer", k) end -- the controller retries
    if not ready or why then who = nil end
  end
  if not who then
    mem[k] = nil
    interfaces(ctl, k, nil)
    if has and svc.spec.type ~= "LoadBalancer" then
      ctl_.put_status(ctl, sr, svc, { loadBalancer = {} })
      forget(ctl, k)
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
  if who == "lbc" then record(ctl, svc, host) end
  interfaces(ctl, k, host)
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
