-- hypd iam-policy scopes every statement to what hypd makes (issue 24):
-- IAM roles and policies, EKS clusters and buckets by name, EC2, HyperPod
-- and FSx by the tag hypd:cluster-tag, PassRole only to the services that
-- take hypd's roles, AttachRolePolicy only of hypd's and the managed
-- policies it uses; each Resource "*" left has its reason. The sandbox
-- enforces the policy (conditions and resources evaluated): it refuses a
-- CreateRole outside hypd's names, a PassRole to EC2, a change to a VPC
-- without hypd's tag, and allows the same calls on what hypd makes.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")
local _, OPTS = H.sandbox_here()
local aws = require "hypd.aws"
local policy = require "sandbox.policy"
local iam_policy = require "hypd.iam_policy"

local function call(s, o, p) return aws.call(s, o, p or {}, OPTS) end
local function try(s, o, p) return aws.try(s, o, p or {}, OPTS) end
local DOC = assert(iam_policy.document {})
local TRUST = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }
local TAGS = { { Key = "hypd:cluster-tag", Value = "scope" } }

-- policed(fn): fn's calls held to hypd's policy
local function policed(fn)
  assert(policy.set(DOC))
  local ok, err = pcall(fn)
  policy.set(nil)
  if not ok then error(err, 0) end
end

t.test("every action of every built-in tool is scoped; what stays on Resource \"*\" says why", function()
  local sids, open = {}, {}
  for _, st in ipairs(DOC.Statement) do
    sids[#sids + 1] = st.Sid
    if st.Resource == "*" and not st.Condition then open[#open + 1] = st.Sid end
  end
  t.ok(not table.concat(sids, " "):find("Unscoped", 1, true), "no action without a scope rule: " .. table.concat(sids, " "))
  local reasons = iam_policy.unscoped(DOC)
  t.eq(#reasons, #open, "each open statement is listed")
  for _, u in ipairs(reasons) do
    t.ok(#u.why > 20 and not u.why:find("no reason", 1, true), u.sid .. " has a reason: " .. u.why)
    for _, a in ipairs(u.actions) do
      t.ok(a:match(":Describe") or a:match(":List") or a:match(":Get") or a == "pricing:GetProducts",
        "only reads stay on \"*\": " .. a)
    end
  end
  for _, st in ipairs(DOC.Statement) do
    for _, a in ipairs(st.Action) do
      if a:match("^iam:") or a:match("^eks:") or a:match("^s3:") then
        t.ok(st.Resource ~= "*" or not a:match(":Create") and not a:match(":Delete") and not a:match(":Put"),
          a .. " is scoped")
      end
    end
  end
end)

t.test("the CLI prints the policy and, on stderr, each Resource \"*\" with its reason", function()
  local rc, out, err = H.run_hypd({}, "iam-policy")
  t.eq(rc, 0, err)
  local doc = json.decode(out)
  t.eq(#doc.Statement, #DOC.Statement, "the statements of the whole policy")
  t.like(err, 'Resource "%*" for ec2:Describe%*: EC2 has no resource%-level permissions')
  rc, _, err = H.run_hypd({}, "iam-policy", "--resources", "nonsense")
  t.eq(rc ~= 0, true, "a bad ARN fails")
  t.like(err, "resources%[1%]: an ARN")
end)

t.test("CreateRole: only hypd's names", function()
  local _, e
  policed(function()
    _, e = try("iam", "CreateRole", { RoleName = "someone-elses-role", AssumeRolePolicyDocument = TRUST })
  end)
  t.eq(e and e.code, "AccessDenied", "a role outside hypd's names is refused")
  t.like(e and e.message or "", "iam:CreateRole on resource: arn:aws:iam::123456789012:role/someone%-elses%-role")
  local r
  policed(function()
    r, e = try("iam", "CreateRole", { RoleName = "hypd-scope-nodes", AssumeRolePolicyDocument = TRUST, Tags = TAGS })
  end)
  t.ok(r, "hypd-scope-nodes is made: " .. tostring(e and e.message))
end)

t.test("AttachRolePolicy: hypd's and the managed policies it uses, never AdministratorAccess", function()
  local r, e
  policed(function()
    _, e = try("iam", "AttachRolePolicy", { RoleName = "hypd-scope-nodes",
      PolicyArn = "arn:aws:iam::aws:policy/AdministratorAccess" })
  end)
  t.eq(e and e.code, "AccessDenied", "AdministratorAccess is refused")
  policed(function()
    r, e = try("iam", "AttachRolePolicy", { RoleName = "hypd-scope-nodes",
      PolicyArn = "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy" })
  end)
  t.ok(r, "the HyperPod instance policy is attached: " .. tostring(e and e.message))
end)

t.test("PassRole: hypd's roles, only to the services that take them; never to EC2", function()
  local C = require "sandbox.policy_conditions"
  local role = "arn:aws:iam::123456789012:role/hypd-scope-nodes"
  local function passed(to, arn)
    return policy.evaluate(DOC, "iam:PassRole", arn or role, C.context { ["iam:PassedToService"] = to })
  end
  t.eq(passed("sagemaker.amazonaws.com"), "allow", "to SageMaker")
  t.eq(passed("eks.amazonaws.com"), "allow", "to EKS")
  t.eq(passed("ec2.amazonaws.com"), "implicit", "to EC2: refused")
  t.eq(passed("sagemaker.amazonaws.com", "arn:aws:iam::123456789012:role/Admin"), "implicit", "another role: refused")
  -- through a real request: an EKS cluster handed a role that is not hypd's
  call("iam", "CreateRole", { RoleName = "their-eks-role", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = "eks.amazonaws.com" },
      Action = "sts:AssumeRole" } } } })
  local _, e
  policed(function()
    _, e = try("eks", "CreateCluster", { name = "hypd-scope", roleArn = "arn:aws:iam::123456789012:role/their-eks-role",
      resourcesVpcConfig = { subnetIds = { "subnet-0123456789abcdef0" } } })
  end)
  t.eq(e and e.code, "AccessDeniedException")
  t.like(e and e.message or "", "iam:PassRole")
end)

t.test("EC2: a VPC made without hypd's tag is refused; changes to a VPC without it are refused", function()
  local r, e
  policed(function() _, e = try("ec2", "CreateVpc", { CidrBlock = "10.91.0.0/16" }) end)
  t.eq(e and e.code, "UnauthorizedOperation", "an untagged VPC is not made")
  local theirs = call("ec2", "CreateVpc", { CidrBlock = "10.92.0.0/16" }).Vpc.VpcId -- someone else's
  policed(function()
    _, e = try("ec2", "ModifyVpcAttribute", { VpcId = theirs, EnableDnsHostnames = { Value = true } })
  end)
  t.eq(e and e.code, "UnauthorizedOperation", "a VPC without the tag is not changed")
  policed(function() _, e = try("ec2", "DeleteVpc", { VpcId = theirs }) end)
  t.eq(e and e.code, "UnauthorizedOperation", "nor deleted")
  local mine
  policed(function()
    r, e = try("ec2", "CreateVpc", { CidrBlock = "10.93.0.0/16", TagSpecifications = { { ResourceType = "vpc",
      Tags = TAGS } } })
    mine = r and r.Vpc.VpcId
    if mine then r, e = try("ec2", "ModifyVpcAttribute", { VpcId = mine, EnableDnsHostnames = { Value = true } }) end
  end)
  t.ok(mine and r, "hypd's tagged VPC is made and changed: " .. tostring(e and e.message))
end)

t.test("EKS and S3: by name; a resource given with --resources is granted too", function()
  local _, e
  policed(function() _, e = try("s3", "CreateBucket", { Bucket = "someone-elses-bucket" }) end)
  t.eq(e and e.code, "AccessDenied", "a bucket outside hypd's names")
  local r
  policed(function()
    r, e = try("s3", "CreateBucket", { Bucket = "hypd-scope-data-123456789012-us-west-2",
      CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  end)
  t.ok(r, "hypd's bucket: " .. tostring(e and e.message))
  policed(function() _, e = try("eks", "DeleteCluster", { name = "their-cluster" }) end)
  t.eq(e and e.code, "AccessDeniedException", "an EKS cluster outside hypd's names")
  local given = assert(iam_policy.document { resources = { "arn:aws:eks:us-west-2:123456789012:cluster/their-cluster",
    "arn:aws:s3:::their-data" } })
  local last = given.Statement[#given.Statement]
  t.eq(last.Sid, "GivenS3")
  t.eq(last.Resource, { "arn:aws:s3:::their-data", "arn:aws:s3:::their-data/*" }, "the bucket and its objects")
  local eks = given.Statement[#given.Statement - 1]
  t.eq(eks.Sid, "GivenEks")
  t.ok(H.policy_actions({ Statement = { eks } })[1] ~= nil and eks.Resource[2]:find("nodegroup/their-cluster/", 1, true),
    "the cluster and its node groups")
  local none, err = iam_policy.document { resources = { "their-cluster" } }
  t.eq(none, nil)
  t.eq(err.code, "VALIDATION")
  t.like(err.message, "resources%[1%]: an ARN")
end)

t.test("every name the HyperPod features give their roles, policies and buckets is in the policy's scope", function()
  local scopes = require("hypd.playbook").load("_iam_scopes")
  local feat = require("hypd.playbook").load("hyperpod._feat")
  local n = feat.names { tag = "scope", eks = "hypd-scope", account = "123456789012", partition = "aws" }
  local function glob(p) return "^" .. p:gsub("[%-%.]", "%%%0"):gsub("%*", ".*") .. "$" end
  local function within(list, name)
    for _, p in ipairs(list) do if name:match(glob(p)) then return true end end
    return false
  end
  for key, name in pairs(n) do
    local list = key:match("_role$") and scopes.ROLES or key:match("_policy$") and scopes.POLICIES or
      key:match("_bucket$") and scopes.BUCKETS
    if list then t.ok(within(list, name), key .. " " .. name .. " is within the policy's names") end
  end
end)

t.test("docs/security.md names each action left on Resource \"*\" and its reason", function()
  local doc = H.read("docs/security.md") or ""
  for _, u in ipairs(iam_policy.unscoped(DOC)) do
    for _, a in ipairs(u.actions) do t.ok(doc:find("`" .. a .. "`", 1, true), a .. " is in docs/security.md") end
    t.ok(doc:find(u.why, 1, true), u.sid .. "'s reason is in docs/security.md")
  end
end)
