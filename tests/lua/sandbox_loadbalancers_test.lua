-- The sandbox gives LoadBalancer Services their addresses as EKS does: the
-- cloud provider's service controller makes a Classic Load Balancer (or an
-- NLB on `aws-load-balancer-type: nlb`) for a plain LoadBalancer Service;
-- a Service for the AWS Load Balancer Controller (`aws-load-balancer-type:
-- external`) stays pending until that controller runs and its IAM role may
-- create load balancers (AccessDenied, event FailedDeployModel, before;
-- and before that, while its role's trust policy does not let its pods in),
-- then gets its NLB;
-- a Service turned into a ClusterIP loses its address.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local _, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local task = require "hypd.task"

local conn
local function settle(fn, n)
  for _ = 1, n or 30 do
    if fn() then return true end
    task.sleep(1)
  end
  return fn()
end

local function service(name, annotations)
  return assert(conn:create { apiVersion = "v1", kind = "Service",
    metadata = { name = name, namespace = "default", annotations = annotations },
    spec = { type = "LoadBalancer", selector = { app = name }, ports = { { name = "http", port = 80, targetPort = 8000 } } } })
end
local function host(name)
  local s = conn:get("v1", "Service", name, { namespace = "default" })
  return ((((s or {}).status or {}).loadBalancer or {}).ingress or {})[1] and s.status.loadBalancer.ingress[1].hostname
end
local function reasons(name)
  local out = {}
  for _, e in ipairs(conn:list("v1", "Event", { namespace = "default" }) or {}) do
    if e.involvedObject.name == name and e.involvedObject.kind == "Service" then out[#out + 1] = e.reason end
  end
  table.sort(out)
  return table.concat(out, ",")
end

t.test("a cluster with nodes", function()
  conn = FH.gpu_cluster(call, "lb-a", "lb-a-hp", 87, 1)
  t.ok(conn, "connected")
end)

t.test("a plain LoadBalancer Service gets a Classic Load Balancer's hostname and the service controller's events", function()
  service("web")
  t.ok(settle(function() return host("web") end), "an address came")
  t.like(host("web"), "^a%x+%-%d+%.us%-west%-2%.elb%.amazonaws%.com$", "a CLB name")
  t.eq(reasons("web"), "EnsuredLoadBalancer,EnsuringLoadBalancer", "the events of the service controller")
end)

t.test("aws-load-balancer-type nlb gets an in-tree NLB's hostname", function()
  service("web-nlb", { ["service.beta.kubernetes.io/aws-load-balancer-type"] = "nlb" })
  t.ok(settle(function() return host("web-nlb") end), "an address came")
  t.like(host("web-nlb"), "^a%x+%-%x+%.elb%.us%-west%-2%.amazonaws%.com$", "an NLB name")
end)

t.test("a Service for the AWS Load Balancer Controller stays pending until the controller runs, then gets its NLB", function()
  service("api", { ["service.beta.kubernetes.io/aws-load-balancer-type"] = "external",
    ["service.beta.kubernetes.io/aws-load-balancer-scheme"] = "internal" })
  settle(function() return host("api") end, 20)
  t.eq(host("api"), nil, "no address without the controller")
  t.eq(reasons("api"), "", "and no event from the in-tree controller")
  assert(conn:create { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = "aws-load-balancer-controller", namespace = "kube-system" },
    spec = { replicas = 1, selector = { matchLabels = { app = "lbc" } },
      template = { metadata = { labels = { app = "lbc" } },
        spec = { containers = { { name = "controller",
          image = "public.ecr.aws/eks/aws-load-balancer-controller:v2.11.0" } } } } } })
  -- running, but as the node's role (no IRSA role on its service account): ELB refuses it
  settle(function() return reasons("api") ~= "" end, 60)
  t.eq(host("api"), nil, "no address while the controller may not create a load balancer")
  t.eq(reasons("api"), "FailedDeployModel", "the controller says why")
  local function message() -- the controller's FailedDeployModel messages, one a line
    local out = {}
    for _, e in ipairs(conn:list("v1", "Event", { namespace = "default" }) or {}) do
      if e.involvedObject.name == "api" and e.reason == "FailedDeployModel" then out[#out + 1] = e.message end
    end
    return table.concat(out, "\n")
  end
  t.like(message() or "", "AccessDenied.*elasticloadbalancing:CreateLoadBalancer")
  -- IRSA: a role whose trust names another service account: the web
  -- identity of kube-system/default is refused by STS
  local json = require "hypd.json"
  local issuer = call("eks", "DescribeCluster", { name = "lb-a" }).cluster.identity.oidc.issuer
  local oidc = issuer:gsub("^https://", "")
  local provider = call("iam", "CreateOpenIDConnectProvider", { Url = issuer, ClientIDList = { "sts.amazonaws.com" },
    ThumbprintList = { string.rep("c", 40) } }).OpenIDConnectProviderArn
  local irsa = call("iam", "CreateRole", { RoleName = "lb-a-irsa", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Federated = provider },
      Action = "sts:AssumeRoleWithWebIdentity", Condition = { StringEquals = {
        [oidc .. ":sub"] = "system:serviceaccount:kube-system:aws-load-balancer-controller",
        [oidc .. ":aud"] = "sts.amazonaws.com" } } } } } }).Role
  if not conn:get("v1", "ServiceAccount", "default", { namespace = "kube-system" }) then
    assert(conn:create { apiVersion = "v1", kind = "ServiceAccount",
      metadata = { name = "default", namespace = "kube-system" } })
  end
  assert(conn:patch("v1", "ServiceAccount", "default", { metadata = { annotations = {
    ["eks.amazonaws.com/role-arn"] = irsa.Arn } } }, { namespace = "kube-system" }))
  task.sleep(120)
  t.eq(host("api"), nil, "a role that does not trust the controller's service account makes no NLB")
  t.like(message() or "", "WebIdentityErr: failed to retrieve credentials\ncaused by: AccessDenied: Not " ..
    "authorized to perform sts:AssumeRoleWithWebIdentity")
  assert(conn:patch("v1", "ServiceAccount", "default", { metadata = { annotations = {
    ["eks.amazonaws.com/role-arn"] = json.null } } }, { namespace = "kube-system" }))
  -- a role whose trust policy does not let EKS Pod Identity in (no
  -- sts:TagSession, and held to another cluster's aws:SourceArn): the
  -- controller gets no credentials
  local untrusting = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "pods.eks.amazonaws.com" }, Action = { "sts:AssumeRole", "sts:TagSession" },
    Condition = { ArnEquals = { ["aws:SourceArn"] = "arn:aws:eks:us-west-2:123456789012:cluster/other" } } } } }
  local role = call("iam", "CreateRole", { RoleName = "lb-a-lbc", AssumeRolePolicyDocument = untrusting }).Role
  -- given through EKS Pod Identity (IRSA's annotation is lb_controller_test's)
  call("eks", "CreatePodIdentityAssociation", { clusterName = "lb-a", namespace = "kube-system",
    serviceAccount = "default", roleArn = role.Arn })
  task.sleep(120)
  t.eq(host("api"), nil, "a role EKS Pod Identity may not assume makes no NLB")
  t.like(message() or "", "EKS Pod Identity cannot assume role " .. role.Arn:gsub("%-", "%%-"))
  -- a role without the permission: the same
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "pods.eks.amazonaws.com" }, Action = { "sts:AssumeRole", "sts:TagSession" },
    Condition = { ArnEquals = { ["aws:SourceArn"] = "arn:aws:eks:us-west-2:123456789012:cluster/lb-a" },
      StringEquals = { ["aws:SourceAccount"] = "123456789012" } } } } }
  call("iam", "UpdateAssumeRolePolicy", { RoleName = "lb-a-lbc", PolicyDocument = trust })
  task.sleep(120)
  t.eq(host("api"), nil, "a role that may not create load balancers makes none")
  t.like(message() or "", "assumed%-role/lb%-a%-lbc/.*not authorized to perform: elasticloadbalancing:CreateLoadBalancer")
  -- with the controller's permission, the next try makes the NLB
  call("iam", "PutRolePolicy", { RoleName = "lb-a-lbc", PolicyName = "elb", PolicyDocument =
    require("hypd.json").encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
      Action = { "elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:Describe*" }, Resource = "*" } } } })
  t.ok(settle(function() return host("api") end, 180), "an address once the controller may make it")
  t.like(host("api"), "^k8s%-default%-api%-%x+%-%x+%.elb%.us%-west%-2%.amazonaws%.com$", "the controller's NLB name")
  t.like(reasons("api"), "^FailedDeployModel,.*SuccessfullyReconciled$", "the controller's events")
end)

t.test("a Service changed to ClusterIP loses its load balancer address", function()
  assert(conn:patch("v1", "Service", "web", { spec = { type = "ClusterIP",
    ports = { { name = "http", port = 80, targetPort = 8000 } } } }, { namespace = "default" }))
  t.ok(settle(function() return host("web") == nil end), "the address went")
end)
