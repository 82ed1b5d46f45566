-- The sandbox evaluates a policy's Condition as IAM does: every operator,
-- IfExists, Null, the ForAnyValue:/ForAllValues: set prefixes, keys ANDed
-- and values ORed, against the request context it builds (the principal,
-- iam:PassedToService on PassRole, the request's tags, the target
-- resource's tags); resources are matched per the Service Authorization
-- Reference (EC2's CreateSubnet on the subnet and its VPC, roles by path and
-- name); trust policies are held to their conditions (OIDC sub and aud,
-- aws:SourceAccount / aws:SourceArn of a service). Case by case, then
-- through hypd's client in this process, then through boto3 against a
-- `hypd sandbox` process.
local t = require "hypd.tap"
local C = require "sandbox.policy_conditions"
local aws = require "hypd.aws"
local http = require "hypd.http"
local json = require "hypd.json"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local CTX = C.context {
  ["aws:username"] = "alice", ["aws:PrincipalArn"] = "arn:aws:iam::123456789012:role/hypd-ops",
  ["aws:TagKeys"] = { "team", "Name" }, ["aws:RequestTag/team"] = "ml", ["aws:RequestTag/owner"] = "alice",
  ["aws:SecureTransport"] = false, ["aws:EpochTime"] = 1700000000, ["aws:CurrentTime"] = "2026-12-03T18:00:00Z",
  ["aws:SourceIp"] = "10.1.2.3", ["s3:max-keys"] = 50, ["aws:PrincipalTag/blob"] = "QmFy",
}

-- { condition, holds?, what it shows }
local CASES = {
  { { StringEquals = { ["aws:username"] = "alice" } }, true, "StringEquals matches" },
  { { StringEquals = { ["aws:username"] = "bob" } }, false, "StringEquals does not match" },
  { { StringEquals = { ["aws:username"] = { "bob", "alice" } } }, true, "a key's values are ORed" },
  { { StringEquals = { ["aws:username"] = "alice", ["aws:RequestTag/team"] = "ml" } }, true, "keys ANDed, both hold" },
  { { StringEquals = { ["aws:username"] = "alice", ["aws:RequestTag/team"] = "ops" } }, false, "keys ANDed, one fails" },
  { { StringEquals = { ["AWS:UserName"] = "alice" } }, true, "condition keys are case-insensitive" },
  { { StringEquals = { ["aws:username"] = "ALICE" } }, false, "StringEquals is case-sensitive" },
  { { StringNotEquals = { ["aws:username"] = "alice" } }, false, "StringNotEquals on the value" },
  { { StringNotEquals = { ["aws:username"] = { "bob", "carol" } } }, true, "StringNotEquals: matches none" },
  { { StringEqualsIgnoreCase = { ["aws:username"] = "ALICE" } }, true, "StringEqualsIgnoreCase" },
  { { StringNotEqualsIgnoreCase = { ["aws:username"] = "ALICE" } }, false, "StringNotEqualsIgnoreCase" },
  { { StringLike = { ["aws:username"] = "al*" } }, true, "StringLike *" },
  { { StringLike = { ["aws:username"] = "a?ice" } }, true, "StringLike ?" },
  { { StringLike = { ["aws:username"] = "b*" } }, false, "StringLike does not match" },
  { { StringNotLike = { ["aws:username"] = "b*" } }, true, "StringNotLike holds" },
  { { StringNotLike = { ["aws:username"] = "al*" } }, false, "StringNotLike fails" },
  { { ArnLike = { ["aws:PrincipalArn"] = "arn:aws:iam::*:role/hypd-*" } }, true, "ArnLike" },
  { { ArnLike = { ["aws:PrincipalArn"] = "arn:aws:iam::*:role/other-*" } }, false, "ArnLike does not match" },
  { { ArnLike = { ["aws:PrincipalArn"] = "arn:aws:iam::*" } }, false, "ArnLike: a wildcard does not span parts" },
  { { ArnEquals = { ["aws:PrincipalArn"] = "arn:aws:iam::123456789012:role/hypd-ops" } }, true, "ArnEquals" },
  { { ArnNotEquals = { ["aws:PrincipalArn"] = "arn:aws:iam::123456789012:role/hypd-ops" } }, false, "ArnNotEquals" },
  { { ArnNotLike = { ["aws:PrincipalArn"] = "arn:aws:iam::*:role/other-*" } }, true, "ArnNotLike" },
  { { Bool = { ["aws:SecureTransport"] = "false" } }, true, "Bool false" },
  { { Bool = { ["aws:SecureTransport"] = "true" } }, false, "Bool true" },
  { { NumericLessThan = { ["s3:max-keys"] = "100" } }, true, "NumericLessThan" },
  { { NumericGreaterThan = { ["s3:max-keys"] = "100" } }, false, "NumericGreaterThan" },
  { { NumericEquals = { ["s3:max-keys"] = "50" } }, true, "NumericEquals" },
  { { NumericNotEquals = { ["s3:max-keys"] = "50" } }, false, "NumericNotEquals" },
  { { NumericLessThanEquals = { ["s3:max-keys"] = "50" } }, true, "NumericLessThanEquals" },
  { { NumericGreaterThanEquals = { ["s3:max-keys"] = "51" } }, false, "NumericGreaterThanEquals" },
  { { NumericEquals = { ["aws:username"] = "50" } }, false, "Numeric on a non-number" },
  { { DateLessThan = { ["aws:CurrentTime"] = "2027-01-01T00:00:00Z" } }, true, "DateLessThan" },
  { { DateGreaterThan = { ["aws:CurrentTime"] = "2027-01-01T00:00:00Z" } }, false, "DateGreaterThan" },
  { { DateGreaterThan = { ["aws:EpochTime"] = "2023-11-14T00:00:00Z" } }, true, "Date on epoch seconds" },
  { { DateLessThan = { ["aws:EpochTime"] = "2023-11-14T00:00:00Z" } }, false, "Date on epoch seconds, not before" },
  { { IpAddress = { ["aws:SourceIp"] = "10.0.0.0/8" } }, true, "IpAddress" },
  { { NotIpAddress = { ["aws:SourceIp"] = "10.0.0.0/8" } }, false, "NotIpAddress" },
  { { BinaryEquals = { ["aws:PrincipalTag/blob"] = "QmFy" } }, true, "BinaryEquals" },
  -- a key missing from the context
  { { StringEquals = { ["aws:missing"] = "x" } }, false, "a missing key fails" },
  { { StringNotEquals = { ["aws:missing"] = "x" } }, true, "a negated operator on a missing key holds" },
  { { ArnNotLike = { ["aws:missing"] = "arn:*" } }, true, "ArnNotLike on a missing key holds" },
  { { StringEqualsIfExists = { ["aws:missing"] = "x" } }, true, "IfExists on a missing key holds" },
  { { StringEqualsIfExists = { ["aws:username"] = "bob" } }, false, "IfExists on a present key compares" },
  { { ArnLikeIfExists = { ["aws:PrincipalArn"] = "arn:aws:iam::*:role/hypd-*" } }, true, "ArnLikeIfExists" },
  { { BoolIfExists = { ["aws:missing"] = "true" } }, true, "BoolIfExists" },
  { { Null = { ["aws:missing"] = "true" } }, true, "Null true: the key is absent" },
  { { Null = { ["aws:username"] = "true" } }, false, "Null true on a present key" },
  { { Null = { ["aws:username"] = "false" } }, true, "Null false: the key is present" },
  { { Null = { ["aws:missing"] = "false" } }, false, "Null false on an absent key" },
  -- set prefixes on the multivalued aws:TagKeys = {team, Name}
  { { ["ForAllValues:StringEquals"] = { ["aws:TagKeys"] = { "team", "Name", "env" } } }, true,
    "ForAllValues: every request value is allowed" },
  { { ["ForAllValues:StringEquals"] = { ["aws:TagKeys"] = { "team" } } }, false, "ForAllValues: Name is not" },
  { { ["ForAllValues:StringEquals"] = { ["aws:missing"] = { "team" } } }, true, "ForAllValues on a missing key" },
  { { ["ForAnyValue:StringEquals"] = { ["aws:TagKeys"] = { "team" } } }, true, "ForAnyValue: one matches" },
  { { ["ForAnyValue:StringEquals"] = { ["aws:TagKeys"] = { "env" } } }, false, "ForAnyValue: none matches" },
  { { ["ForAnyValue:StringEquals"] = { ["aws:missing"] = { "team" } } }, false, "ForAnyValue on a missing key" },
  { { ["ForAllValues:StringLike"] = { ["aws:TagKeys"] = { "t*", "N*" } } }, true, "ForAllValues:StringLike" },
  { { ["ForAnyValue:StringNotEquals"] = { ["aws:TagKeys"] = { "team" } } }, true, "ForAnyValue:StringNotEquals" },
  { { ["ForAllValues:StringNotEquals"] = { ["aws:TagKeys"] = { "env" } } }, true, "ForAllValues:StringNotEquals" },
  { { ["ForAllValues:StringNotEquals"] = { ["aws:TagKeys"] = { "team" } } }, false, "ForAllValues:StringNotEquals" },
  -- several operators AND; unknown operators hold nowhere
  { { StringEquals = { ["aws:username"] = "alice" }, Bool = { ["aws:SecureTransport"] = "true" } }, false,
    "operators are ANDed" },
  { { StringMaybe = { ["aws:username"] = "alice" } }, false, "an unknown operator does not hold" },
  { { ["ForSomeValues:StringEquals"] = { ["aws:TagKeys"] = "team" } }, false, "an unknown set prefix does not hold" },
  { { NullIfExists = { ["aws:missing"] = "true" } }, false, "Null has no IfExists form" },
  -- policy variables
  { { StringEquals = { ["aws:RequestTag/owner"] = "${aws:username}" } }, true, "a policy variable" },
  { { StringEquals = { ["aws:RequestTag/owner"] = "${aws:missing}" } }, false, "a variable the context lacks" },
  { { StringLike = { ["aws:username"] = "${*}" } }, false, "${*} is a literal *" },
}

t.test("each condition operator, prefix and rule, holding and not", function()
  for _, c in ipairs(CASES) do
    t.eq(C.holds(c[1], CTX), c[2], c[3])
  end
end)

-- --- through the sandbox ----------------------------------------------------------

local srv, OPTS = H.sandbox_here()
local BASE = "http://127.0.0.1:" .. srv.port
local USER = "arn:aws:iam::123456789012:user/sandbox"
local ROLE_ARN = "arn:aws:iam::123456789012:role/"
local EC2_ARN = "arn:aws:ec2:us-west-2:123456789012:"

local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end
local function try(service, op, params) return aws.try(service, op, params or {}, OPTS) end

local function set_policy(doc, base)
  local r = assert(http.request { method = "POST", url = (base or BASE) .. "/_sandbox/policy",
    headers = { ["content-type"] = "application/json" }, body = json.encode { policy = doc or json.null } })
  return r.status, r.body
end

local function doc(...) return { Version = "2012-10-17", Statement = { ... } } end
local function allow(actions, resources, condition)
  return { Effect = "Allow", Action = actions, Resource = resources or "*", Condition = condition }
end

local function implicit(action, resource)
  return "User: " .. USER .. " is not authorized to perform: " .. action ..
    (resource and " on resource: " .. resource or "") .. " because no identity-based policy allows the " ..
    action .. " action"
end

local function refused(service, op, params, code)
  local out, err = try(service, op, params)
  t.fails(out, err, code, service .. " " .. op .. " is refused")
  return err or {}
end

local function esc(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

local TRUST = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = { "eks.amazonaws.com", "sagemaker.amazonaws.com" } }, Action = "sts:AssumeRole" } } }

local R = {}

t.test("setup without a policy: roles, two VPCs with subnets, a tagged VPC", function()
  R.role = call("iam", "CreateRole", { RoleName = "hypd-cond-eks", AssumeRolePolicyDocument = TRUST }).Role.Arn
  R.vpcs, R.subnets = {}, {}
  for i = 1, 2 do
    R.vpcs[i] = call("ec2", "CreateVpc", { CidrBlock = "10.4" .. i .. ".0.0/16" }).Vpc.VpcId
    R.subnets[i] = {}
    for j, az in ipairs { "us-west-2a", "us-west-2b" } do
      R.subnets[i][j] = call("ec2", "CreateSubnet", { VpcId = R.vpcs[i], CidrBlock = "10.4" .. i .. "." .. j .. ".0/24",
        AvailabilityZone = az }).Subnet.SubnetId
    end
  end
  t.eq(#R.subnets[2], 2)
end)

t.test("resource scoping: CreateRole on role/hypd-* allowed, role/other refused; CreateSubnet needs its VPC too", function()
  t.eq(set_policy(doc(allow("iam:CreateRole", "arn:aws:iam::*:role/hypd-*"))), 200)
  t.eq(call("iam", "CreateRole", { RoleName = "hypd-scoped", AssumeRolePolicyDocument = TRUST }).Role.Arn,
    ROLE_ARN .. "hypd-scoped")
  local err = refused("iam", "CreateRole", { RoleName = "other", AssumeRolePolicyDocument = TRUST }, "AccessDenied")
  t.eq(err.message, implicit("iam:CreateRole", ROLE_ARN .. "other"))
  -- the path is part of the ARN: /svc/hypd-x is not role/hypd-*
  err = refused("iam", "CreateRole", { RoleName = "hypd-x", Path = "/svc/", AssumeRolePolicyDocument = TRUST },
    "AccessDenied")
  t.eq(err.message, implicit("iam:CreateRole", ROLE_ARN .. "svc/hypd-x"))
  -- EC2's CreateSubnet is authorized on the new subnet and on the VPC it goes in
  t.eq(set_policy(doc(allow("ec2:CreateSubnet", { EC2_ARN .. "subnet/*", EC2_ARN .. "vpc/" .. R.vpcs[1] }))), 200)
  t.like(call("ec2", "CreateSubnet", { VpcId = R.vpcs[1], CidrBlock = "10.41.9.0/24" }).Subnet.SubnetId, "^subnet%-")
  err = refused("ec2", "CreateSubnet", { VpcId = R.vpcs[2], CidrBlock = "10.42.9.0/24" }, "UnauthorizedOperation")
  t.like(err.message, esc(implicit("ec2:CreateSubnet", EC2_ARN .. "vpc/" .. R.vpcs[2])))
end)

t.test("resource scoping: DisassociateRouteTable is authorized on the association's route table and subnet", function()
  set_policy(nil)
  local rtb = call("ec2", "CreateRouteTable", { VpcId = R.vpcs[1] }).RouteTable.RouteTableId
  local assoc = call("ec2", "AssociateRouteTable", { RouteTableId = rtb, SubnetId = R.subnets[1][1] }).AssociationId
  t.eq(set_policy(doc(allow("ec2:DisassociateRouteTable", EC2_ARN .. "route-table/rtb-other"))), 200)
  local err = refused("ec2", "DisassociateRouteTable", { AssociationId = assoc }, "UnauthorizedOperation")
  t.like(err.message, esc(implicit("ec2:DisassociateRouteTable", EC2_ARN .. "route-table/" .. rtb)))
  t.eq(set_policy(doc(allow("ec2:DisassociateRouteTable", { EC2_ARN .. "route-table/" .. rtb,
    EC2_ARN .. "subnet/" .. R.subnets[1][1] }))), 200)
  t.ok(call("ec2", "DisassociateRouteTable", { AssociationId = assoc }), "allowed on both")
end)

t.test("a Condition IAM would reject as malformed is refused when the policy is set", function()
  local status, body = set_policy(doc(allow("iam:ListRoles", "*", "aws:username")))
  t.eq(status, 400)
  t.like(body, "Condition must be an object")
  status, body = set_policy(doc(allow("iam:ListRoles", "*", { StringEquals = "alice" })))
  t.eq(status, 400)
  t.like(body, "Condition StringEquals must be an object of condition keys")
  -- and IAM itself refuses such a document
  set_policy(nil)
  local _, err = try("iam", "CreatePolicy", { PolicyName = "bad-condition", PolicyDocument = json.encode(
    doc(allow("iam:ListRoles", "*", { StringEquals = "alice" }))) })
  t.eq({ err and err.code, err and err.message }, { "MalformedPolicyDocument", "Syntax errors in policy." })
end)

t.test("policy variables: Resource role/${aws:username}-* names the caller's own roles", function()
  set_policy(nil)
  call("iam", "CreateRole", { RoleName = "sandbox-own", AssumeRolePolicyDocument = TRUST })
  t.eq(set_policy(doc(allow("iam:GetRole", "arn:aws:iam::*:role/${aws:username}-*"))), 200)
  t.eq(call("iam", "GetRole", { RoleName = "sandbox-own" }).Role.RoleName, "sandbox-own")
  refused("iam", "GetRole", { RoleName = "hypd-cond-eks" }, "AccessDenied")
end)

t.test("iam:PassedToService: PassRole to eks allowed, the same role to sagemaker refused", function()
  local to_eks = allow("iam:PassRole", R.role, { StringEquals = { ["iam:PassedToService"] = "eks.amazonaws.com" } })
  t.eq(set_policy(doc(allow { "eks:CreateCluster", "sagemaker:CreateCluster" }, to_eks)), 200)
  local out = call("eks", "CreateCluster", { name = "hypd-pass", roleArn = R.role,
    resourcesVpcConfig = { subnetIds = R.subnets[1] } })
  t.eq(out.cluster.name, "hypd-pass")
  local err = refused("sagemaker", "CreateCluster", { ClusterName = "hp-pass", InstanceGroups = {
    { InstanceGroupName = "a", InstanceType = "ml.m5.xlarge", InstanceCount = 1, ExecutionRole = R.role,
      LifeCycleConfig = { SourceS3Uri = "s3://b/lcc/", OnCreate = "on_create.sh" } } } }, "AccessDeniedException")
  t.eq(err.message, implicit("iam:PassRole", R.role))
  -- a policy that passes roles to ec2 only refuses eks
  t.eq(set_policy(doc(allow "eks:CreateCluster", allow("iam:PassRole", "*",
    { StringEquals = { ["iam:PassedToService"] = "ec2.amazonaws.com" } }))), 200)
  err = refused("eks", "CreateCluster", { name = "hypd-pass2", roleArn = R.role,
    resourcesVpcConfig = { subnetIds = R.subnets[1] } }, "AccessDeniedException")
  t.eq(err.message, implicit("iam:PassRole", R.role))
end)

local function tags(t_) local l = {} for k, v in pairs(t_) do l[#l + 1] = { Key = k, Value = v } end return l end

t.test("aws:RequestTag and aws:TagKeys on EC2 CreateVpc: tagged as required, or refused", function()
  t.eq(set_policy(doc(allow("ec2:CreateVpc", "*", { StringEquals = { ["aws:RequestTag/team"] = "ml" },
    ["ForAllValues:StringEquals"] = { ["aws:TagKeys"] = { "team", "Name" } } }))), 200)
  local ok = call("ec2", "CreateVpc", { CidrBlock = "10.43.0.0/16",
    TagSpecifications = { { ResourceType = "vpc", Tags = tags { team = "ml", Name = "x" } } } })
  t.like(ok.Vpc.VpcId, "^vpc%-")
  R.tagged = ok.Vpc.VpcId
  refused("ec2", "CreateVpc", { CidrBlock = "10.44.0.0/16" }, "UnauthorizedOperation")
  refused("ec2", "CreateVpc", { CidrBlock = "10.44.0.0/16",
    TagSpecifications = { { ResourceType = "vpc", Tags = tags { team = "ops" } } } }, "UnauthorizedOperation")
  refused("ec2", "CreateVpc", { CidrBlock = "10.44.0.0/16",
    TagSpecifications = { { ResourceType = "vpc", Tags = tags { team = "ml", cost = "x" } } } }, "UnauthorizedOperation")
end)

t.test("aws:RequestTag on S3 PutObject: the object's x-amz-tagging, and aws:ResourceTag on the bucket", function()
  set_policy(nil)
  call("s3", "CreateBucket", { Bucket = "cond-data", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutBucketTagging", { Bucket = "cond-data", Tagging = { TagSet = tags { team = "ml" } } })
  t.eq(set_policy(doc(allow("s3:PutObject", "arn:aws:s3:::cond-data/*",
    { StringEquals = { ["aws:RequestTag/class"] = "scratch space" } }),
    allow("s3:ListBucket", "*", { StringEquals = { ["aws:ResourceTag/team"] = "ml" } }))), 200)
  t.ok(call("s3", "PutObject", { Bucket = "cond-data", Key = "a", Body = "x", Tagging = "class=scratch%20space" }),
    "tagged as the policy requires")
  local err = refused("s3", "PutObject", { Bucket = "cond-data", Key = "b", Body = "x", Tagging = "class=keep" },
    "AccessDenied")
  t.eq(err.message, implicit("s3:PutObject", '"arn:aws:s3:::cond-data/b"'))
  t.ok(call("s3", "ListObjectsV2", { Bucket = "cond-data" }).Contents, "the bucket tagged team=ml is listed")
  set_policy(nil)
  call("s3", "PutBucketTagging", { Bucket = "cond-data", Tagging = { TagSet = tags { team = "ops" } } })
  t.eq(set_policy(doc(allow("s3:ListBucket", "*", { StringEquals = { ["aws:ResourceTag/team"] = "ml" } }))), 200)
  refused("s3", "ListObjectsV2", { Bucket = "cond-data" }, "AccessDenied")
end)

t.test("aws:ResourceTag on EC2 DeleteVpc: the tagged VPC may go, an untagged one not; a Deny on a tag wins", function()
  t.eq(set_policy(doc(allow("ec2:DeleteVpc", "*", { StringEquals = { ["aws:ResourceTag/team"] = "ml" } }))), 200)
  local err = refused("ec2", "DeleteVpc", { VpcId = R.vpcs[2] }, "UnauthorizedOperation")
  t.like(err.message, esc(implicit("ec2:DeleteVpc", EC2_ARN .. "vpc/" .. R.vpcs[2])))
  t.ok(call("ec2", "DeleteVpc", { VpcId = R.tagged }), "the VPC tagged team=ml is deleted")
  -- ec2:ResourceTag is the same key in EC2's own prefix
  set_policy(nil)
  call("ec2", "CreateTags", { Resources = { R.subnets[2][2] }, Tags = tags { protected = "yes" } })
  t.eq(set_policy(doc(allow "ec2:DeleteSubnet", { Effect = "Deny", Action = "ec2:Delete*", Resource = "*",
    Condition = { StringEquals = { ["ec2:ResourceTag/protected"] = "yes" } } })), 200)
  err = refused("ec2", "DeleteSubnet", { SubnetId = R.subnets[2][2] }, "UnauthorizedOperation")
  t.like(err.message, "with an explicit deny")
  t.ok(call("ec2", "DeleteSubnet", { SubnetId = R.subnets[2][1] }), "an untagged subnet is deleted")
end)

t.test("aws:PrincipalArn, aws:username and aws:SecureTransport describe the caller and the plain-HTTP sandbox", function()
  t.eq(set_policy(doc(allow("iam:ListRoles", "*", { StringEquals = { ["aws:username"] = "sandbox" },
    ArnEquals = { ["aws:PrincipalArn"] = USER }, Bool = { ["aws:SecureTransport"] = "false" } }))), 200)
  t.ok(call("iam", "ListRoles", {}).Roles)
  t.eq(set_policy(doc(allow("iam:ListRoles", "*", { Bool = { ["aws:SecureTransport"] = "true" } }))), 200)
  refused("iam", "ListRoles", {}, "AccessDenied")
  set_policy(nil)
end)

-- --- trust policies -----------------------------------------------------------------

local function b64url(s) return (sys.b64encode(s):gsub("+", "-"):gsub("/", "_"):gsub("=", "")) end
local function jwt(claims)
  return b64url(json.encode { alg = "RS256", kid = "k" }) .. "." .. b64url(json.encode(claims)) .. ".c2ln"
end

t.test("an OIDC trust policy: the service account it names is let in, another is refused", function()
  set_policy(nil) -- trust, not the caller's policy, is what this test is about
  local host = "oidc.eks.us-west-2.amazonaws.com/id/COND0123456789"
  local provider = call("iam", "CreateOpenIDConnectProvider", { Url = "https://" .. host,
    ClientIDList = { "sts.amazonaws.com" }, ThumbprintList = { string.rep("a", 40) } }).OpenIDConnectProviderArn
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Federated = provider }, Action = "sts:AssumeRoleWithWebIdentity",
    Condition = { StringEquals = { [host .. ":sub"] = "system:serviceaccount:kube-system:s3-csi",
      [host .. ":aud"] = "sts.amazonaws.com" } } } } }
  local arn = call("iam", "CreateRole", { RoleName = "hypd-irsa", AssumeRolePolicyDocument = trust }).Role.Arn
  local function assume(sub, aud)
    return try("sts", "AssumeRoleWithWebIdentity", { RoleArn = arn, RoleSessionName = "irsa",
      WebIdentityToken = jwt { iss = "https://" .. host, sub = sub, aud = aud or "sts.amazonaws.com",
        exp = os.time() + 3600 } })
  end
  local ok, err = assume("system:serviceaccount:kube-system:s3-csi")
  t.ok(ok and ok.Credentials, "the named service account assumes the role: " .. tostring(err))
  local no, nerr = assume("system:serviceaccount:default:other")
  t.fails(no, nerr, "AccessDenied", "another service account is refused")
  t.eq(nerr and nerr.message, "Not authorized to perform sts:AssumeRoleWithWebIdentity")
  -- StringLike over a namespace, as hypd writes for a wildcard subject
  call("iam", "UpdateAssumeRolePolicy", { RoleName = "hypd-irsa", PolicyDocument = json.encode { Version = "2012-10-17",
    Statement = { { Effect = "Allow", Principal = { Federated = provider }, Action = "sts:AssumeRoleWithWebIdentity",
      Condition = { StringLike = { [host .. ":sub"] = "system:serviceaccount:jobs:*",
        [host .. ":aud"] = "sts.amazonaws.com" } } } } } })
  t.ok((assume("system:serviceaccount:jobs:trainer")), "any service account of namespace jobs")
  no, nerr = assume("system:serviceaccount:kube-system:s3-csi")
  t.fails(no, nerr, "AccessDenied", "outside the namespace")
  -- every operator of the trust is held, not only the String ones: another provider's ARN refuses
  local function provider_trust(provider_arn)
    return json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
      Principal = { Federated = provider }, Action = "sts:AssumeRoleWithWebIdentity",
      Condition = { StringEquals = { [host .. ":aud"] = "sts.amazonaws.com" },
        ArnEquals = { ["aws:FederatedProvider"] = provider_arn } } } } }
  end
  call("iam", "UpdateAssumeRolePolicy", { RoleName = "hypd-irsa", PolicyDocument = provider_trust(provider) })
  t.ok((assume("system:serviceaccount:jobs:trainer")), "ArnEquals on the token's provider holds")
  call("iam", "UpdateAssumeRolePolicy", { RoleName = "hypd-irsa",
    PolicyDocument = provider_trust("arn:aws:iam::123456789012:oidc-provider/elsewhere") })
  no, nerr = assume("system:serviceaccount:jobs:trainer")
  t.fails(no, nerr, "AccessDenied", "ArnEquals on another provider refuses")
end)

t.test("a service's trust with aws:SourceAccount / aws:SourceArn: EKS and SageMaker are held to them", function()
  set_policy(nil) -- trust, not the caller's policy, is what this test is about
  local function trust(service, cond)
    return json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = service },
      Action = "sts:AssumeRole", Condition = cond } } }
  end
  local eks_role = call("iam", "CreateRole", { RoleName = "hypd-src-eks", AssumeRolePolicyDocument =
    trust("eks.amazonaws.com", { ArnLike = { ["aws:SourceArn"] = "arn:aws:eks:*:123456789012:cluster/hypd-*" },
      StringEquals = { ["aws:SourceAccount"] = "123456789012" } }) }).Role.Arn
  local vpc = { subnetIds = R.subnets[1] }
  t.eq(call("eks", "CreateCluster", { name = "hypd-src", roleArn = eks_role, resourcesVpcConfig = vpc }).cluster.name,
    "hypd-src")
  local no, err = try("eks", "CreateCluster", { name = "other-src", roleArn = eks_role, resourcesVpcConfig = vpc })
  t.fails(no, err, "InvalidParameterException", "a cluster outside the role's SourceArn cannot use it")
  t.like(err and err.message or "", "is not assumable by EKS")
  local sm_role = call("iam", "CreateRole", { RoleName = "hypd-src-sm", AssumeRolePolicyDocument =
    trust("sagemaker.amazonaws.com", { StringEquals = { ["aws:SourceAccount"] = "999999999999" } }) }).Role.Arn
  local _, serr = try("sagemaker", "CreateCluster", { ClusterName = "hp-src", InstanceGroups = {
    { InstanceGroupName = "a", InstanceType = "ml.m5.xlarge", InstanceCount = 1, ExecutionRole = sm_role,
      LifeCycleConfig = { SourceS3Uri = "s3://b/lcc/", OnCreate = "on_create.sh" } } } })
  t.like(serr and serr.message or "", "cannot be assumed by SageMaker", "another account's SourceAccount")
  call("iam", "UpdateAssumeRolePolicy", { RoleName = "hypd-src-sm", PolicyDocument = trust("sagemaker.amazonaws.com",
    { StringEquals = { ["aws:SourceAccount"] = "123456789012" },
      ArnLike = { ["aws:SourceArn"] = "arn:aws:sagemaker:us-west-2:123456789012:cluster/*" } }) })
  _, serr = try("sagemaker", "CreateCluster", { ClusterName = "hp-src", InstanceGroups = {
    { InstanceGroupName = "a", InstanceType = "ml.m5.xlarge", InstanceCount = 1, ExecutionRole = sm_role,
      LifeCycleConfig = { SourceS3Uri = "s3://b/lcc/", OnCreate = "on_create.sh" } } } })
  t.eq(serr and serr.code, "ValidationException")
  t.ok(not (serr and serr.message or ""):find("cannot be assumed", 1, true),
    "past the role check, SageMaker judges the rest")
end)

t.test("the trust policies hypd writes (IRSA, HyperPod add-ons) let in the service accounts they name, no other", function()
  set_policy(nil) -- trust, not the caller's policy, is what this test is about
  local playbook = require "hypd.playbook"
  local irsa, feat = playbook.load("_irsa"), playbook.load("hyperpod._feat_iam")
  local host = "oidc.eks.us-west-2.amazonaws.com/id/HYPD0123456789"
  local provider = call("iam", "CreateOpenIDConnectProvider", { Url = "https://" .. host,
    ClientIDList = { "sts.amazonaws.com", "another-audience" }, ThumbprintList = { string.rep("b", 40) } })
    .OpenIDConnectProviderArn
  local n = 0
  local function role(trust)
    n = n + 1
    return call("iam", "CreateRole", { RoleName = "hypd-trust-" .. n,
      AssumeRolePolicyDocument = type(trust) == "string" and trust or json.encode(trust) }).Role.Arn
  end
  local function assume(arn, sa, aud)
    local out, err = try("sts", "AssumeRoleWithWebIdentity", { RoleArn = arn, RoleSessionName = "hypd",
      WebIdentityToken = jwt { iss = "https://" .. host, sub = "system:serviceaccount:" .. sa,
        aud = aud or "sts.amazonaws.com", exp = os.time() + 3600 } })
    return out ~= nil, err and err.code
  end
  local info = { issuer = "https://" .. host, partition = "aws", account = "123456789012", name = "c" }
  local a = role(irsa.trust(info, "kube-system", "s3-csi-driver-sa"))
  t.eq({ assume(a, "kube-system:s3-csi-driver-sa") }, { true }, "_irsa: the named service account")
  t.eq({ assume(a, "kube-system:other") }, { false, "AccessDenied" }, "_irsa: another service account")
  t.eq({ assume(a, "kube-system:s3-csi-driver-sa", "another-audience") }, { false, "AccessDenied" },
    "_irsa: another audience")
  local env = { oidc_host = host, oidc_arn = provider }
  local b = role(feat.trust_oidc(env, { "kubeflow:*" }))
  t.eq({ assume(b, "kubeflow:training-operator") }, { true }, "_feat_iam: a wildcard subject (StringLike)")
  t.eq({ assume(b, "default:training-operator") }, { false, "AccessDenied" }, "_feat_iam: outside the wildcard")
  local c = role(feat.trust_oidc(env, { "ns1:sa1", "ns2:sa2" }))
  t.eq({ assume(c, "ns1:sa1") }, { true }, "_feat_iam: the first of two subjects")
  t.eq({ assume(c, "ns2:sa2") }, { true }, "_feat_iam: the second")
  t.eq({ assume(c, "ns1:sa2") }, { false, "AccessDenied" }, "_feat_iam: a mix of the two is neither")
end)

-- --- boto3 against a `hypd sandbox` process -----------------------------------------

t.test("boto3: a caller scoped to role/hypd-* and PassRole to eks, against a `hypd sandbox` process", function()
  if H.sh("python3 -c 'import boto3'") ~= 0 then t.skip("no boto3 on this machine") end
  local dir = H.tmpdir()
  local env, pid = H.sandbox_process(dir)
  t.ok(env and env.AWS_ENDPOINT_URL, "the sandbox started")
  local function boto(cases)
    local rc, out, err = H.with_env(env, dir, "timeout 120 python3 tests/tools/sandbox_calls.py " ..
      H.quote(json.encode(cases)))
    t.eq(rc, 0, err)
    local got = {}
    for line in out:gmatch("[^\n]+") do
      local r = json.decode(line)
      if r then got[r.case] = r end
    end
    return got
  end
  -- made before the policy: the VPC and subnets a cluster needs
  local got = boto { { case = "vpc", service = "ec2", method = "create_vpc", params = { CidrBlock = "10.45.0.0/16" } } }
  local vpc = got.vpc.result.Vpc.VpcId
  local cases = {}
  for i, az in ipairs { "us-west-2a", "us-west-2b" } do
    cases[i] = { case = "subnet" .. i, service = "ec2", method = "create_subnet",
      params = { VpcId = vpc, CidrBlock = "10.45." .. i .. ".0/24", AvailabilityZone = az } }
  end
  got = boto(cases)
  local subnets = { got.subnet1.result.Subnet.SubnetId, got.subnet2.result.Subnet.SubnetId }
  t.eq(set_policy(doc(allow("iam:CreateRole", "arn:aws:iam::*:role/hypd-*"),
    allow({ "eks:CreateCluster", "sagemaker:CreateCluster" }, "*"),
    allow("iam:PassRole", "arn:aws:iam::*:role/hypd-*",
      { StringEquals = { ["iam:PassedToService"] = "eks.amazonaws.com" } })), env.AWS_ENDPOINT_URL), 200)
  local role = ROLE_ARN .. "hypd-boto"
  got = boto {
    { case = "hypd role", service = "iam", method = "create_role",
      params = { RoleName = "hypd-boto", AssumeRolePolicyDocument = TRUST } },
    { case = "other role", service = "iam", method = "create_role",
      params = { RoleName = "other", AssumeRolePolicyDocument = TRUST } },
    { case = "eks cluster", service = "eks", method = "create_cluster",
      params = { name = "hypd-boto", roleArn = role, resourcesVpcConfig = { subnetIds = subnets } } },
    { case = "sagemaker cluster", service = "sagemaker", method = "create_cluster",
      params = { ClusterName = "hp-boto", InstanceGroups = { { InstanceGroupName = "a", InstanceType = "ml.m5.xlarge",
        InstanceCount = 1, ExecutionRole = role,
        LifeCycleConfig = { SourceS3Uri = "s3://b/lcc/", OnCreate = "on_create.sh" } } } } },
  }
  os.execute("kill " .. tostring(pid) .. " 2>/dev/null")
  t.eq((got["hypd role"] or {}).ok, true, "CreateRole hypd-boto")
  local o = got["other role"] or {}
  t.eq({ o.status, o.code, o.message }, { 403, "AccessDenied", implicit("iam:CreateRole", ROLE_ARN .. "other") })
  t.eq((got["eks cluster"] or {}).ok, true, "eks CreateCluster passes the role to eks.amazonaws.com")
  local s = got["sagemaker cluster"] or {}
  t.eq({ s.status, s.code, s.message }, { 400, "AccessDeniedException", implicit("iam:PassRole", role) })
  os.execute("rm -rf " .. H.quote(dir))
end)
