-- The sandbox holds its caller to an IAM identity-based policy when one is
-- set (POST /_sandbox/policy, or sandbox.start{policy | policy_file}):
-- explicit Deny wins, an Allow is needed, Action/NotAction and
-- Resource/NotResource with wildcards, the request's resource ARN where
-- the operation names one, iam:PassRole for the roles CreateCluster hands
-- over; a refusal answers in the service's own words and is audited.
-- Driven by hypd's own client in this process, then by boto3 against a
-- `hypd sandbox` process.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local http = require "hypd.http"
local json = require "hypd.json"
local sandbox = require "sandbox"
local H = dofile("tests/lua/helpers.lua")

local srv, OPTS = H.sandbox_here()
local BASE = "http://127.0.0.1:" .. srv.port
local USER = "arn:aws:iam::123456789012:user/sandbox"
local ROLE_ARN = "arn:aws:iam::123456789012:role/"

local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end
local function try(service, op, params) return aws.try(service, op, params or {}, OPTS) end

-- set_policy(doc | nil [, base]) -> status, body of POST /_sandbox/policy
local function set_policy(doc, base)
  local r = assert(http.request { method = "POST", url = (base or BASE) .. "/_sandbox/policy",
    headers = { ["content-type"] = "application/json" }, body = json.encode { policy = doc or json.null } })
  return r.status, r.body
end

local function allow(actions, resources) return { Effect = "Allow", Action = actions, Resource = resources or "*" } end
local function deny(actions, resources) return { Effect = "Deny", Action = actions, Resource = resources or "*" } end
local function doc(...) return { Version = "2012-10-17", Statement = { ... } } end

-- refused(service, op, params, code, status) -> err (checked: code and status)
local function refused(service, op, params, code, status)
  local out, err = try(service, op, params)
  t.fails(out, err, code, service .. " " .. op)
  t.eq(err.status, status, service .. " " .. op .. " answers HTTP " .. status)
  return err
end

local function esc(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

-- the message IAM gives for an implicit deny (resource may be nil)
local function implicit(action, resource)
  return "User: " .. USER .. " is not authorized to perform: " .. action ..
    (resource and " on resource: " .. resource or "") .. " because no identity-based policy allows the " ..
    action .. " action"
end

local TRUST = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = { "eks.amazonaws.com", "sagemaker.amazonaws.com" } }, Action = "sts:AssumeRole" } } }

-- made before any policy: roles, a VPC with two subnets, a bucket
local R = {}

t.test("without a policy the caller may do anything, and GET /_sandbox/policy shows none", function()
  local r = assert(http.request { url = BASE .. "/_sandbox/policy" })
  t.eq(json.decode(r.body).policy, json.null)
  R.eks_role = call("iam", "CreateRole", { RoleName = "eks-cluster", AssumeRolePolicyDocument = TRUST }).Role.Arn
  R.app_role = call("iam", "CreateRole", { RoleName = "app-reader", AssumeRolePolicyDocument = TRUST }).Role.Arn
  R.svc_role = call("iam", "CreateRole", { RoleName = "worker", Path = "/svc/", AssumeRolePolicyDocument = TRUST })
    .Role.Arn
  t.eq(R.svc_role, ROLE_ARN .. "svc/worker")
  R.vpc = call("ec2", "CreateVpc", { CidrBlock = "10.7.0.0/16" }).Vpc.VpcId
  R.subnets = {}
  for i, az in ipairs { "us-west-2a", "us-west-2b" } do
    R.subnets[i] = call("ec2", "CreateSubnet", { VpcId = R.vpc, CidrBlock = "10.7." .. i .. ".0/24",
      AvailabilityZone = az }).Subnet.SubnetId
  end
  call("s3", "CreateBucket", { Bucket = "policy-data", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = "policy-data", Key = "a/b.txt", Body = "hello" })
end)

-- { statements, action, resource (nil: the request names none), verdict }
local VERDICTS = {
  { { allow "*" }, "ec2:CreateVpc", nil, "allow" },
  { {}, "ec2:CreateVpc", nil, "implicit" },
  { { allow "ec2:Describe*" }, "ec2:CreateVpc", nil, "implicit" },
  { { allow "ec2:describe*" }, "EC2:DescribeVpcs", nil, "allow" },
  { { allow "ec2:Describe?pcs" }, "ec2:DescribeVpcs", nil, "allow" },
  { { allow "ec2:Describe?pcs" }, "ec2:DescribeSubnets", nil, "implicit" },
  { { allow "*", deny "ec2:CreateVpc" }, "ec2:CreateVpc", nil, "deny" },
  { { deny "ec2:CreateVpc", allow "*" }, "ec2:CreateVpc", nil, "deny" },
  { { allow("iam:GetRole", "arn:aws:iam::*:role/app-*") }, "iam:GetRole", "arn:aws:iam::123456789012:role/app-1",
    "allow" },
  { { allow("iam:GetRole", "arn:aws:iam::*:role/app-*") }, "iam:GetRole", nil, "implicit" },
  { { allow("iam:GetRole", "arn:aws:iam::*:role/App-*") }, "iam:GetRole", "arn:aws:iam::123456789012:role/app-1",
    "implicit" }, -- resources match case-sensitively
  { { allow("s3:GetObject", "arn:aws:s3:::data/*") }, "s3:GetObject", "arn:aws:s3:::data/a/b/c.txt", "allow" },
  { { allow("s3:GetObject", "arn:aws:s3:::data/*") }, "s3:GetObject", "arn:aws:s3:::data2/x", "implicit" },
  { { allow("eks:DescribeAddon", "arn:aws:eks:*:123456789012:addon/c1/*") }, "eks:DescribeAddon",
    "arn:aws:eks:us-west-2:123456789012:addon/c1/vpc-cni/ab12", "allow" },
  -- a wildcard stays within its ARN part: * in the region does not cover the account
  { { allow("eks:DescribeCluster", "arn:aws:eks:*:cluster/x") }, "eks:DescribeCluster",
    "arn:aws:eks:us-west-2:123456789012:cluster/x", "implicit" },
  { { allow("eks:DescribeCluster", "arn:aws:eks:us-?est-2:*:cluster/*") }, "eks:DescribeCluster",
    "arn:aws:eks:us-west-2:123456789012:cluster/x", "allow" },
  { { { Effect = "Allow", NotAction = "iam:*", Resource = "*" } }, "iam:GetRole", nil, "implicit" },
  { { { Effect = "Allow", NotAction = "iam:*", Resource = "*" } }, "s3:GetObject", nil, "allow" },
  { { { Effect = "Allow", Action = "*", NotResource = "arn:aws:s3:::secret/*" } }, "s3:GetObject",
    "arn:aws:s3:::secret/k", "implicit" },
  { { { Effect = "Allow", Action = "*", NotResource = "arn:aws:s3:::secret/*" } }, "s3:GetObject",
    "arn:aws:s3:::open/k", "allow" },
  { { { Effect = "Allow", Action = "*", NotResource = "arn:aws:s3:::secret/*" } }, "s3:ListAllMyBuckets", nil,
    "allow" },
  -- a Condition on a key the request context lacks does not hold: the Deny does not apply
  { { { Effect = "Deny", Action = "*", Resource = "*", Condition = { Bool = { ["aws:SecureTransport"] = "false" } } },
    allow "*" }, "ec2:DescribeVpcs", nil, "allow" },
}

t.test("policy evaluation, case by case: explicit deny, allow, implicit deny", function()
  local policy = require "sandbox.policy"
  for i, c in ipairs(VERDICTS) do
    local d = { Version = "2012-10-17", Statement = c[1] }
    if #c[1] > 0 then t.eq(policy.validate(d), true, "case " .. i .. " is a valid policy") end
    t.eq(policy.evaluate(d, c[2], c[3]), c[4], "case " .. i .. ": " .. c[2] .. " on " .. tostring(c[3]))
  end
end)

t.test("a policy document IAM would reject is refused with 400 and changes nothing", function()
  local cases = {
    { { Statement = { { Effect = "Allow", Principal = "*", Action = "*", Resource = "*" } } }, "principal" },
    { { Statement = { { Action = "*", Resource = "*" } } }, "Effect" },
    { { Statement = { { Effect = "Allow", Action = "CreateVpc", Resource = "*" } } }, "service:Action" },
    { { Statement = { { Effect = "Allow", Action = "*" } } }, "Resource and NotResource" },
    { { Statement = { { Effect = "Allow", Action = "*", NotAction = "iam:*", Resource = "*" } } }, "Action and NotAction" },
    { { Statement = {} }, "Statement" },
    { { Version = "2020-01-01", Statement = { allow "*" } }, "Version" },
  }
  for _, c in ipairs(cases) do
    local status, body = set_policy(c[1])
    t.eq(status, 400, c[2])
    t.like(body, c[2])
  end
  local r = assert(http.request { method = "POST", url = BASE .. "/_sandbox/policy", body = "{}" })
  t.eq(r.status, 400)
  t.eq(json.decode(assert(http.request { url = BASE .. "/_sandbox/policy" }).body).policy, json.null)
  t.ok(call("ec2", "DescribeVpcs", {}).Vpcs, "still no policy in force")
end)

t.test("an allowed call works; a missing action is EC2's UnauthorizedOperation with the message AWS writes", function()
  t.eq(set_policy(doc(allow { "ec2:Describe*", "sts:DecodeAuthorizationMessage" })), 200)
  t.ok(#call("ec2", "DescribeVpcs", {}).Vpcs >= 1, "ec2:Describe* allows DescribeVpcs")
  t.ok(call("ec2", "DescribeSubnets", {}).Subnets, "and DescribeSubnets")
  local err = refused("ec2", "CreateVpc", { CidrBlock = "10.8.0.0/16" }, "UnauthorizedOperation", 403)
  local want = "You are not authorized to perform this operation. " ..
    implicit("ec2:CreateVpc", "arn:aws:ec2:us-west-2:123456789012:vpc/*") .. ". Encoded authorization failure message: "
  t.eq(err.message:sub(1, #want), want)
  -- the encoded part reads back through STS, as in AWS
  local blob = err.message:sub(#want + 1)
  local decoded = json.decode(call("sts", "DecodeAuthorizationMessage", { EncodedMessage = blob }).DecodedMessage)
  t.eq({ decoded.allowed, decoded.explicitDeny, decoded.context.action, decoded.context.resource,
    decoded.context.principal.arn }, { false, false, "ec2:CreateVpc", "arn:aws:ec2:us-west-2:123456789012:vpc/*", USER })
  -- an operation on an existing resource names it; a Describe names none
  err = refused("ec2", "DeleteSubnet", { SubnetId = R.subnets[1] }, "UnauthorizedOperation", 403)
  t.like(err.message, esc("ec2:DeleteSubnet on resource: arn:aws:ec2:us-west-2:123456789012:subnet/" .. R.subnets[1] ..
    " because"))
  refused("sts", "DecodeAuthorizationMessage", { EncodedMessage = "bm90LW91cnM=" }, "InvalidAuthorizationMessageException",
    400)
end)

t.test("IAM and STS refuse with AccessDenied, JSON services with AccessDeniedException, S3 with AccessDenied", function()
  t.eq(set_policy(doc(allow "ec2:Describe*")), 200)
  local err = refused("iam", "CreateRole", { RoleName = "new-role", AssumeRolePolicyDocument = TRUST }, "AccessDenied", 403)
  t.eq(err.message, implicit("iam:CreateRole", ROLE_ARN .. "new-role"))
  err = refused("iam", "ListRoles", {}, "AccessDenied", 403)
  t.eq(err.message, implicit("iam:ListRoles"))
  err = refused("sts", "AssumeRole", { RoleArn = R.app_role, RoleSessionName = "s1" }, "AccessDenied", 403)
  t.eq(err.message, implicit("sts:AssumeRole", R.app_role))
  err = refused("sagemaker", "ListClusters", {}, "AccessDeniedException", 400)
  t.eq(err.message, implicit("sagemaker:ListClusters"))
  err = refused("fsx", "DescribeFileSystems", {}, "AccessDeniedException", 400)
  t.eq(err.message, implicit("fsx:DescribeFileSystems"))
  err = refused("eks", "ListClusters", {}, "AccessDeniedException", 403)
  t.eq(err.message, implicit("eks:ListClusters"))
  -- S3: IAM's action names, and the resource in quotes
  err = refused("s3", "ListObjectsV2", { Bucket = "policy-data" }, "AccessDenied", 403)
  t.eq(err.message, implicit("s3:ListBucket", '"arn:aws:s3:::policy-data"'))
  err = refused("s3", "GetObject", { Bucket = "policy-data", Key = "a/b.txt" }, "AccessDenied", 403)
  t.eq(err.message, implicit("s3:GetObject", '"arn:aws:s3:::policy-data/a/b.txt"'))
end)

t.test("sts:GetCallerIdentity needs no permission, even under an explicit Deny", function()
  t.eq(set_policy(doc(deny "*")), 200)
  t.eq(call("sts", "GetCallerIdentity", {}).Arn, USER)
end)

t.test("an explicit Deny overrides an Allow, and says so", function()
  t.eq(set_policy(doc(allow "*", deny { "ec2:CreateVpc", "s3:Get*" })), 200)
  t.ok(call("ec2", "DescribeVpcs", {}).Vpcs, "everything else is allowed")
  local err = refused("ec2", "CreateVpc", { CidrBlock = "10.8.0.0/16" }, "UnauthorizedOperation", 403)
  t.like(err.message, "^You are not authorized to perform this operation%. User: " .. esc(USER) ..
    " is not authorized to perform: ec2:CreateVpc on resource: arn:aws:ec2:us%-west%-2:123456789012:vpc/%* " ..
    "with an explicit deny in an identity%-based policy%. Encoded authorization failure message: %S+$")
  refused("s3", "HeadObject", { Bucket = "policy-data", Key = "a/b.txt" }, nil, 403)
  err = refused("s3", "GetObject", { Bucket = "policy-data", Key = "a/b.txt" }, "AccessDenied", 403)
  t.eq(err.message, "User: " .. USER .. ' is not authorized to perform: s3:GetObject on resource: ' ..
    '"arn:aws:s3:::policy-data/a/b.txt" with an explicit deny in an identity-based policy')
end)

t.test("NotAction allows everything but what it names", function()
  t.eq(set_policy(doc({ Effect = "Allow", NotAction = { "iam:*", "ec2:Delete*" }, Resource = "*" })), 200)
  t.ok(call("ec2", "DescribeVpcs", {}).Vpcs, "ec2 reads are outside NotAction")
  t.ok(call("eks", "ListClusters", {}).clusters, "and so is EKS")
  refused("iam", "GetRole", { RoleName = "app-reader" }, "AccessDenied", 403)
  refused("ec2", "DeleteVpc", { VpcId = R.vpc }, "UnauthorizedOperation", 403)
  -- a Deny with NotAction: everything but ec2 reads is denied, whatever allows it
  t.eq(set_policy(doc(allow "*", { Effect = "Deny", NotAction = "ec2:Describe*", Resource = "*" })), 200)
  t.ok(call("ec2", "DescribeSubnets", {}).Subnets)
  local err = refused("eks", "ListClusters", {}, "AccessDeniedException", 403)
  t.like(err.message, "with an explicit deny")
end)

t.test("wildcard actions: * and ? within a name, matched without regard to case", function()
  t.eq(set_policy(doc(allow { "EC2:describe*", "iam:Get?ole", "sts:*" })), 200)
  t.ok(call("ec2", "DescribeVpcs", {}).Vpcs, "EC2:describe* matches ec2:DescribeVpcs")
  t.eq(call("iam", "GetRole", { RoleName = "app-reader" }).Role.Arn, R.app_role, "iam:Get?ole matches iam:GetRole")
  refused("iam", "GetRolePolicy", { RoleName = "app-reader", PolicyName = "p" }, "AccessDenied", 403)
  refused("ec2", "CreateVpc", { CidrBlock = "10.8.0.0/16" }, "UnauthorizedOperation", 403)
  t.eq(set_policy(doc(allow "*")), 200)
  t.ok(call("iam", "ListRoles", {}).Roles, "Action * allows anything")
end)

t.test("Resource ARNs of IAM roles: wildcards, the role's path, and NotResource", function()
  t.eq(set_policy(doc(allow("iam:GetRole", { ROLE_ARN .. "app-*", "arn:aws:iam::*:role/svc/*" }))), 200)
  t.eq(call("iam", "GetRole", { RoleName = "app-reader" }).Role.Arn, R.app_role)
  t.eq(call("iam", "GetRole", { RoleName = "worker" }).Role.Arn, R.svc_role, "the ARN carries the path /svc/")
  local err = refused("iam", "GetRole", { RoleName = "eks-cluster" }, "AccessDenied", 403)
  t.eq(err.message, implicit("iam:GetRole", R.eks_role))
  -- the resource part is matched on its own: a wildcard does not stand in for the account
  t.eq(set_policy(doc(allow("iam:GetRole", "arn:aws:iam::999999999999:role/*"))), 200)
  refused("iam", "GetRole", { RoleName = "app-reader" }, "AccessDenied", 403)
  t.eq(set_policy(doc({ Effect = "Allow", Action = "iam:GetRole", NotResource = ROLE_ARN .. "eks-*" })), 200)
  t.ok(call("iam", "GetRole", { RoleName = "app-reader" }).Role, "outside NotResource")
  refused("iam", "GetRole", { RoleName = "eks-cluster" }, "AccessDenied", 403)
  -- an action that names no resource is matched only by Resource "*"
  t.eq(set_policy(doc(allow("iam:ListRoles", ROLE_ARN .. "*"))), 200)
  refused("iam", "ListRoles", {}, "AccessDenied", 403)
end)

t.test("iam:PassRole: eks:CreateCluster needs it on the cluster role, then creates the cluster", function()
  local vpc = { subnetIds = R.subnets }
  t.eq(set_policy(doc(allow { "eks:CreateCluster", "eks:DescribeCluster" })), 200)
  local err = refused("eks", "CreateCluster", { name = "guarded", roleArn = R.eks_role, resourcesVpcConfig = vpc },
    "AccessDeniedException", 403)
  t.eq(err.message, implicit("iam:PassRole", R.eks_role))
  local none, nerr = try("eks", "DescribeCluster", { name = "guarded" })
  t.fails(none, nerr, "ResourceNotFoundException", "nothing was created")
  -- PassRole on another role does not do
  t.eq(set_policy(doc(allow { "eks:CreateCluster", "eks:DescribeCluster" }, allow("iam:PassRole", ROLE_ARN .. "app-*"))),
    200)
  refused("eks", "CreateCluster", { name = "guarded", roleArn = R.eks_role, resourcesVpcConfig = vpc },
    "AccessDeniedException", 403)
  t.eq(set_policy(doc(allow { "eks:CreateCluster", "eks:DescribeCluster" }, allow("iam:PassRole", R.eks_role))), 200)
  local out = call("eks", "CreateCluster", { name = "guarded", roleArn = R.eks_role, resourcesVpcConfig = vpc })
  t.eq(out.cluster.arn, "arn:aws:eks:us-west-2:123456789012:cluster/guarded")
end)

t.test("Resource ARNs of EKS clusters: allowed by name pattern, refused with the cluster's ARN otherwise", function()
  t.eq(set_policy(doc(allow("eks:DescribeCluster", "arn:aws:eks:us-west-2:123456789012:cluster/guard*"))), 200)
  t.eq(call("eks", "DescribeCluster", { name = "guarded" }).cluster.name, "guarded")
  -- allowed, then the service itself answers: the cluster does not exist
  local _, err = try("eks", "DescribeCluster", { name = "guard-missing" })
  t.eq(err.code, "ResourceNotFoundException")
  err = refused("eks", "DescribeCluster", { name = "other" }, "AccessDeniedException", 403)
  t.eq(err.message, implicit("eks:DescribeCluster", "arn:aws:eks:us-west-2:123456789012:cluster/other"))
  err = refused("eks", "DeleteCluster", { name = "guarded" }, "AccessDeniedException", 403)
  t.eq(err.message, implicit("eks:DeleteCluster", "arn:aws:eks:us-west-2:123456789012:cluster/guarded"))
end)

t.test("iam:PassRole: sagemaker:CreateCluster needs it on every instance group's execution role", function()
  local params = { ClusterName = "hp-guard", InstanceGroups = {
    { InstanceGroupName = "a", InstanceType = "ml.m5.xlarge", InstanceCount = 1, ExecutionRole = R.app_role,
      LifeCycleConfig = { SourceS3Uri = "s3://policy-data/lcc/", OnCreate = "on_create.sh" } },
    { InstanceGroupName = "b", InstanceType = "ml.m5.xlarge", InstanceCount = 1, ExecutionRole = R.svc_role,
      LifeCycleConfig = { SourceS3Uri = "s3://policy-data/lcc/", OnCreate = "on_create.sh" } } } }
  t.eq(set_policy(doc(allow "sagemaker:CreateCluster", allow("iam:PassRole", R.app_role))), 200)
  local err = refused("sagemaker", "CreateCluster", params, "AccessDeniedException", 400)
  t.eq(err.message, implicit("iam:PassRole", R.svc_role))
  t.eq(set_policy(doc(allow "sagemaker:CreateCluster", allow("iam:PassRole", { R.app_role, R.svc_role }))), 200)
  -- past the policy, SageMaker judges the request itself (no lifecycle scripts uploaded)
  local _, serr = try("sagemaker", "CreateCluster", params)
  t.eq(serr and serr.code, "ValidationException")
  t.like(serr.message, "LifeCycleConfig")
  -- the sagemaker:CreateCluster action itself comes first
  t.eq(set_policy(doc(allow("iam:PassRole", "*"))), 200)
  err = refused("sagemaker", "CreateCluster", params, "AccessDeniedException", 400)
  t.eq(err.message, implicit("sagemaker:CreateCluster", "arn:aws:sagemaker:us-west-2:123456789012:cluster/*"))
end)

t.test("the audit log records each refusal: operation, code, action, resource and principal", function()
  t.eq(set_policy(doc(allow "ec2:Describe*")), 200)
  refused("ec2", "CreateVpc", { CidrBlock = "10.8.0.0/16" }, "UnauthorizedOperation", 403)
  refused("iam", "ListRoles", {}, "AccessDenied", 403)
  local log = json.decode(assert(http.request { url = BASE .. "/_sandbox/audit" }).body)
  local last = {}
  for _, e in ipairs(log) do
    if e.refused then last[e.operation] = e end
  end
  local v = last.CreateVpc
  t.ok(v, "a refused CreateVpc")
  t.eq({ v.service, v.refused, v.action, v.resource, v.principal },
    { "ec2", "UnauthorizedOperation", "ec2:CreateVpc", "arn:aws:ec2:us-west-2:123456789012:vpc/*", USER })
  t.eq({ last.ListRoles.refused, last.ListRoles.resource }, { "AccessDenied", "*" }, "a refused read is audited too")
  for _, e in ipairs(log) do
    if e.operation == "DescribeVpcs" then t.ok(false, "allowed reads stay out of the audit log") end
  end
end)

t.test("the /_sandbox/* routes are not subject to the policy, and removing it restores access", function()
  t.eq(set_policy(doc(deny "*")), 200)
  refused("ec2", "DescribeVpcs", {}, "UnauthorizedOperation", 403)
  t.eq(assert(http.request { url = BASE .. "/_sandbox/health" }).status, 200)
  t.eq(json.decode(assert(http.request { url = BASE .. "/_sandbox/policy" }).body).policy.Statement[1].Effect, "Deny")
  t.eq(set_policy(nil), 200)
  t.eq(json.decode(assert(http.request { url = BASE .. "/_sandbox/policy" }).body).policy, json.null)
  local out = call("ec2", "CreateVpc", { CidrBlock = "10.8.0.0/16" })
  t.like(out.Vpc.VpcId, "^vpc%-")
end)

t.test("sandbox.start takes the policy as a document or a JSON file, and refuses a bad one", function()
  local dir = H.tmpdir()
  local file = H.write(dir .. "/policy.json", json.encode(doc(allow "iam:List*")))
  srv:stop()
  local s2 = assert(sandbox.start { listen = "127.0.0.1:0", policy_file = file,
    credentials = { [os.getenv("AWS_ACCESS_KEY_ID")] = os.getenv("AWS_SECRET_ACCESS_KEY") } })
  local o2 = { endpoint_url = "http://127.0.0.1:" .. s2.port, region = "us-west-2" }
  t.ok(aws.call("iam", "ListRoles", {}, o2).Roles)
  local _, err = aws.try("ec2", "DescribeVpcs", {}, o2)
  t.eq(err.code, "UnauthorizedOperation")
  s2:stop()
  H.write(file, json.encode { Statement = { { Effect = "Maybe", Action = "*", Resource = "*" } } })
  local none, serr = sandbox.start { listen = "127.0.0.1:0", policy_file = file }
  t.fails(none, serr, "VALIDATION")
  none, serr = sandbox.start { listen = "127.0.0.1:0", policy_file = dir .. "/missing.json" }
  t.fails(none, serr, "VALIDATION")
  local s3 = assert(sandbox.start { listen = "127.0.0.1:0", policy = doc(deny "iam:*", allow "*"),
    credentials = { [os.getenv("AWS_ACCESS_KEY_ID")] = os.getenv("AWS_SECRET_ACCESS_KEY") } })
  _, err = aws.try("iam", "ListRoles", {}, { endpoint_url = "http://127.0.0.1:" .. s3.port, region = "us-west-2" })
  t.eq(err.code, "AccessDenied")
  s3:stop()
  os.execute("rm -rf " .. H.quote(dir))
end)

t.test("boto3 against a `hypd sandbox` process reads the same codes and messages", function()
  if H.sh("python3 -c 'import boto3'") ~= 0 then return t.ok(true, "# SKIP no boto3 on this machine") end
  local dir = H.tmpdir()
  local env, pid = H.sandbox_process(dir)
  t.ok(env and env.AWS_ENDPOINT_URL, "the sandbox started")
  t.eq(set_policy(doc(allow { "ec2:Describe*", "sts:DecodeAuthorizationMessage" }), env.AWS_ENDPOINT_URL), 200)
  local rc, out, err = H.with_env(env, dir, "timeout 120 python3 tests/tools/sandbox_policy.py")
  os.execute("kill " .. tostring(pid) .. " 2>/dev/null")
  t.eq(rc, 0, err)
  local got = {}
  for line in out:gmatch("[^\n]+") do
    local r = json.decode(line)
    if r then got[r.case] = r end
  end
  t.eq(got["ec2 DescribeVpcs"].ok, true)
  t.eq(got["sts GetCallerIdentity"].ok, true)
  local v = got["ec2 CreateVpc"]
  t.eq({ v.status, v.code }, { 403, "UnauthorizedOperation" })
  t.like(v.message, "^" .. esc("You are not authorized to perform this operation. " ..
    implicit("ec2:CreateVpc", "arn:aws:ec2:us-west-2:123456789012:vpc/*") ..
    ". Encoded authorization failure message: "))
  t.eq(got["sts DecodeAuthorizationMessage"].decoded.context.action, "ec2:CreateVpc")
  local want = {
    ["iam CreateRole"] = { 403, "AccessDenied", implicit("iam:CreateRole", ROLE_ARN .. "boto-role") },
    ["eks ListClusters"] = { 403, "AccessDeniedException", implicit("eks:ListClusters") },
    ["sagemaker ListClusters"] = { 400, "AccessDeniedException", implicit("sagemaker:ListClusters") },
    ["s3 ListObjectsV2"] = { 403, "AccessDenied", implicit("s3:ListBucket", '"arn:aws:s3:::boto-bucket"') },
  }
  for case, w in pairs(want) do
    local g = got[case] or {}
    t.eq({ g.status, g.code, g.message }, w, case)
  end
  os.execute("rm -rf " .. H.quote(dir))
end)
