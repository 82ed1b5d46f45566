-- The model's constraints (enum, length, range, pattern) are checked as AWS
-- checks them, before any handler: a generated differential suite. For
-- every AWS operation hypd's tools declare, tests/sdk/constraints_boto3.py
-- sends one invalid value per constrained member (top level or one level
-- down) in an otherwise valid request through boto3, with boto3's own
-- parameter validation off, to a `hypd sandbox` process; each answer must be
-- the service's validation code (ValidationException for JSON and
-- REST-JSON services, ValidationError for the query ones, EC2's
-- InvalidParameterValue, EKS's InvalidParameterException) naming the
-- member, and for the Coral services the constraint in AWS's words; S3's
-- parameters whose refusal is known here, S3's code (the rest of S3 is in
-- sandbox_s3_constraints_test). Then the cases the issues name (absent
-- members listed with broken ones, sensitive values never echoed), and
-- hypd's own client refusing before it sends.
local t = require "hypd.tap"
local json = require "hypd.json"
local aws = require "hypd.aws"
local constraints = require "hypd.aws.constraints"
local protocol = require "hypd.aws.protocol"
local registry = require "hypd.tool.registry"
local loader = require "hypd.tool.loader"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local env, pid = H.sandbox_process(dir)
t.cleanup(function()
  if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)

-- the code each protocol answers a broken constraint with
local CODE = { json = "ValidationException", ["rest-json"] = "ValidationException", query = "ValidationError",
  ec2 = "InvalidParameterValue" }
-- the words of each kind of constraint in AWS's message
local RULE = { enum = "Member must satisfy enum value set: %[", length = "Member must have length less than or equal to",
  range = "Member must have value [gl]%a+ than or equal to",
  pattern = "Member must satisfy regular expression pattern: " }

-- operations(): every "service:Operation" the tools declare that is an
-- operation of hypd's models (wildcards and permission-only actions left out)
local function operations()
  loader.load()
  local seen, out = {}, {}
  for _, def in ipairs(registry.list()) do
    for _, action in ipairs(def.aws or {}) do
      local svc, op = action:match("^([%w-]+):(%w+)$")
      local ok, model = pcall(aws.model, svc or "")
      if svc and ok and model and model.operations[op] and not seen[action] then
        seen[action] = true
        out[#out + 1] = { svc, op }
      end
    end
  end
  table.sort(out, function(a, b) return a[1] .. a[2] < b[1] .. b[2] end)
  return out
end

local function send_all(ops)
  local path = dir .. "/ops.json"
  H.write(path, json.encode(ops))
  local rc, out, err = H.with_env(env, dir, "python3 tests/sdk/constraints_boto3.py " .. H.quote(path))
  assert(rc == 0, "constraints_boto3.py failed: " .. tostring(err))
  return assert(json.decode(out), "constraints_boto3.py printed no JSON: " .. tostring(out):sub(1, 300))
end

local function plain(s) return (s:gsub("%p", "%%%0")) end

-- why(case) -> nil when the sandbox must refuse the case, or why it is not
-- a case of these checks
local CATALOG = { ec2 = { InstanceType = true } }
-- the S3 parameters whose bad value S3 refuses in words known here (by the
-- member as boto3 names it): their code (sandbox_s3_constraints_test has
-- the rest of S3's answers)
local S3_CODE = { StorageClass = "InvalidStorageClass", ServerSideEncryption = "InvalidArgument",
  EncodingType = "InvalidArgument", ["CreateBucketConfiguration.LocationConstraint"] = "InvalidLocationConstraint" }
local function why_not(case)
  if case.protocol == "rest-xml" then
    if case.kind == "enum" and S3_CODE[case.member] then return nil end
    return "S3 answers by parameter in its own words; not known here for this one"
  end
  if case.kind == "pattern" and not constraints.pattern_support(case.pattern) then
    return "pattern not expressible in hypd.regex: " .. case.pattern
  end
  if case.kind == "enum" and CATALOG[case.service] and CATALOG[case.service][case.shape] then
    return "EC2 checks instance types against its catalog"
  end
end

local OPS = operations()
local results = env and send_all(OPS) or { cases = {}, skipped = {} }

t.test("the sandbox started and hypd's tools declare operations to judge", function()
  t.ok(env ~= nil, "hypd sandbox printed its environment")
  t.ok(#OPS >= 60, "operations declared: " .. #OPS)
  t.ok(#results.cases >= 200, "invalid requests sent: " .. #results.cases)
end)

-- one test per operation: every invalid member refused with the code and
-- the member and the constraint named
local by_op, order = {}, {}
for _, case in ipairs(results.cases) do
  local key = case.service .. " " .. case.operation
  if not by_op[key] then by_op[key] = {}; order[#order + 1] = key end
  table.insert(by_op[key], case)
end

local skipped, judged_total = {}, 0
for _, key in ipairs(order) do
  t.test(key .. ": each invalid member is refused before the handler, naming member and constraint", function()
    local bad, judged = {}, 0
    for _, c in ipairs(by_op[key]) do
      local why = why_not(c)
      if why then
        skipped[#skipped + 1] = key .. " " .. c.member .. " (" .. c.kind .. "): " .. why
      else
        judged, judged_total = judged + 1, judged_total + 1
        local msg = c.message or ""
        local want, rule = CODE[c.protocol], true
        local named
        if c.protocol == "rest-xml" then -- S3: one code per parameter, no member named
          want, named = S3_CODE[c.member], true
        elseif c.service == "eks" then -- EKS's own words, naming the member
          want, named = "InvalidParameterException", msg:find(c.coral:match("([%a][%w]*)$"), 1, true)
        elseif c.protocol == "ec2" then
          named = msg:find("parameter " .. c.wire .. " ", 1, true)
        else
          named = msg:find("at '" .. c.coral .. "' failed to satisfy constraint", 1, true)
          rule = msg:find(RULE[c.kind])
        end
        if c.code ~= want or not named or not rule then
          bad[#bad + 1] = string.format("%s = %s (%s): got %s %s", c.member, c.value, c.kind, tostring(c.code),
            msg:sub(1, 240))
        end
      end
    end
    if judged == 0 then t.skip("no case of this operation is checked by the model") end
    t.eq(#bad, 0, key .. ":\n  " .. table.concat(bad, "\n  "))
  end)
end

t.test("what the suite could not judge is counted, not passed", function()
  for _, s in ipairs(results.skipped) do
    skipped[#skipped + 1] = s.service .. " " .. s.operation .. " " .. s.member .. " (" .. s.kind .. "): " .. s.why
  end
  print("# " .. judged_total .. " invalid requests judged, " .. #skipped .. " cases not judged:")
  for _, s in ipairs(skipped) do print("#   " .. s) end
  t.ok(judged_total >= 200 and #skipped < judged_total, judged_total .. " judged, " .. #skipped .. " not judged")
end)

-- a boto3 call with a raw parameter set, its answer as { code, message }
local function boto(service, op, params)
  local path = dir .. "/one.py"
  H.write(path, string.format([[
import json, os, boto3
from botocore.config import Config
from botocore.exceptions import ClientError
c = boto3.client(%q, endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                 config=Config(parameter_validation=False, retries={"max_attempts": 1}))
try:
    getattr(c, %q)(**json.loads(%q))
    print(json.dumps({"code": None}))
except ClientError as e:
    print(json.dumps({"code": e.response["Error"]["Code"], "message": e.response["Error"]["Message"]}))
]], service, op, json.encode(params)))
  local rc, out, err = H.with_env(env, dir, "python3 " .. H.quote(path))
  assert(rc == 0, err)
  return json.decode(out)
end

t.test("SageMaker CreateCluster with NodeRecovery=Sometimes answers the enum, not the lifecycle scripts", function()
  local r = boto("sagemaker", "create_cluster", { ClusterName = "nr-probe", NodeRecovery = "Sometimes",
    InstanceGroups = { { InstanceGroupName = "g", InstanceType = "ml.c5.xlarge", InstanceCount = 1,
      ExecutionRole = "arn:aws:iam::123456789012:role/none",
      LifeCycleConfig = { SourceS3Uri = "s3://no-such-bucket/lc/", OnCreate = "on_create.sh" } } } })
  t.eq(r.code, "ValidationException")
  t.eq(r.message, "1 validation error detected: Value 'Sometimes' at 'nodeRecovery' failed to satisfy constraint: " ..
    "Member must satisfy enum value set: [Automatic, None]")
end)

t.test("AWS reports every broken constraint, joined with '; ', in model order", function()
  local r = boto("sagemaker", "create_cluster", { ClusterName = "-bad-", NodeRecovery = "Sometimes",
    InstanceGroups = { { InstanceGroupName = "g", InstanceType = "ml.c5.xlarge", InstanceCount = -1,
      ExecutionRole = "arn:aws:iam::123456789012:role/none",
      LifeCycleConfig = { SourceS3Uri = "s3://b/lc/", OnCreate = "on_create.sh" } } } })
  t.eq(r.code, "ValidationException")
  t.like(r.message, "^3 validation errors detected: Value '%-bad%-' at 'clusterName' failed to satisfy constraint: " ..
    "Member must satisfy regular expression pattern: ")
  t.like(r.message, "; Value '%-1' at 'instanceGroups%.1%.member%.instanceCount' failed to satisfy constraint: " ..
    "Member must have value greater than or equal to 0; Value 'Sometimes' at 'nodeRecovery'")
end)

t.test("SageMaker lists absent required members with the broken constraints, in member order", function()
  local r = boto("sagemaker", "create_cluster", { NodeRecovery = "Sometimes",
    InstanceGroups = { { InstanceType = "ml.c5.xlarge", InstanceCount = 1,
      ExecutionRole = "arn:aws:iam::123456789012:role/none",
      LifeCycleConfig = { SourceS3Uri = "s3://b/lc/", OnCreate = "on_create.sh" } } } })
  t.eq(r.code, "ValidationException")
  t.eq(r.message, "3 validation errors detected: " ..
    "Value null at 'clusterName' failed to satisfy constraint: Member must not be null; " ..
    "Value null at 'instanceGroups.1.member.instanceGroupName' failed to satisfy constraint: " ..
    "Member must not be null; " ..
    "Value 'Sometimes' at 'nodeRecovery' failed to satisfy constraint: Member must satisfy enum value set: " ..
    "[Automatic, None]")
  -- absent alone: the same words as before
  r = boto("sagemaker", "describe_cluster", {})
  t.eq(r.code, "ValidationException")
  t.eq(r.message, "1 validation error detected: Value null at 'clusterName' failed to satisfy constraint: " ..
    "Member must not be null")
end)

t.test("IAM (query) lists absent members with broken ones and never echoes a password", function()
  local secret = "hunter2-" .. string.rep("s", 121)
  local r = boto("iam", "change_password", { OldPassword = secret })
  t.eq(r.code, "ValidationError")
  t.eq(r.message, "2 validation errors detected: " ..
    "Value at 'oldPassword' failed to satisfy constraint: Member must have length less than or equal to 128; " ..
    "Value null at 'newPassword' failed to satisfy constraint: Member must not be null")
  r = boto("iam", "create_role", { RoleName = string.rep("r", 65) })
  t.eq(r.code, "ValidationError")
  t.like(r.message, "^2 validation errors detected: Value 'r+' at 'roleName' failed to satisfy constraint: " ..
    "Member must have length less than or equal to 64; Value null at 'assumeRolePolicyDocument' failed to " ..
    "satisfy constraint: Member must not be null$")
  -- a member that only shared a secret's constraints is not secret (CertificateBody is a public key)
  r = boto("iam", "upload_signing_certificate", { CertificateBody = "" })
  t.eq(r.message, "1 validation error detected: Value '' at 'certificateBody' failed to satisfy constraint: " ..
    "Member must have length greater than or equal to 1")
end)

t.test("EC2 and EKS keep refusing an absent member first, in their own words", function()
  local r = boto("ec2", "create_subnet", { CidrBlock = "10.0.0.0/24" })
  t.eq(r.code, "MissingParameter")
  t.eq(r.message, "The request must contain the parameter VpcId")
  r = boto("eks", "create_nodegroup", { clusterName = "bad name", nodegroupName = "ng", subnets = { "s" } })
  t.eq(r.code, "ValidationException")
  t.eq(r.message, "1 validation error detected: Value null at 'nodeRole' failed to satisfy constraint: " ..
    "Member must not be null")
end)

t.test("a sensitive member's value stays out of the sandbox's answer and hypd's client error", function()
  local secret = "Sup3r-" .. string.rep("x", 200)
  local r = boto("iam", "create_login_profile", { UserName = "u", Password = secret })
  t.eq(r.code, "ValidationError")
  t.eq(r.message, "1 validation error detected: Value at 'password' failed to satisfy constraint: " ..
    "Member must have length less than or equal to 128")
  local req, err = protocol.build(aws.model("iam"), "CreateLoginProfile", { UserName = "u", Password = secret })
  t.eq(req, nil)
  t.eq(err.code, "VALIDATION")
  t.eq(err.field, "Password")
  t.eq(err.message, "invalid parameter Password: its value (sensitive, not shown) breaks the IAM model's " ..
    "constraint: Member must have length less than or equal to 128")
  t.eq(json.encode(err):find("Sup3r", 1, true), nil, "the secret is nowhere in the error")
  -- a plain member of the same request is still quoted
  req, err = protocol.build(aws.model("iam"), "CreateLoginProfile", { UserName = "has space", Password = "p" })
  t.eq(req, nil)
  t.like(err.message, "^invalid parameter UserName: value 'has space' breaks")
end)

t.test("inside a sensitive list, map or structure nothing is shown; required members are listed on request", function()
  local m = { metadata = { protocol = "json", endpointPrefix = "x" },
    limits = { N = { max = 3 }, P = { max = 3, sensitive = true } },
    shapes = {
      In = { "structure", { { "Name", "string", c = "N" }, { "Pass", "string", c = "P" }, { "Keys", "Keys" },
        { "Creds", "Creds" }, { "Tags", "Tags" } }, required = { "Name", "Creds" } },
      Keys = { "list", { "string", c = "N" }, max = 1, sensitive = true },
      Creds = { "structure", { { "User", "string", c = "N" } }, sensitive = true },
      Tags = { "map", "string", { "string", c = "P" } },
    } }
  local paths = { field = function(p, mm) return p == "" and mm[1] or p .. "." .. mm[1] end,
    item = function(p, i) return p .. "." .. i end }
  local found = constraints.check(m, "In", { Pass = "secret", Keys = { "k1", "k2" }, Tags = { a = "secret" } }, paths)
  t.eq(#found, 3, "without opts.required, absent members are the caller's")
  found = constraints.check(m, "In", { Pass = "secret", Keys = { "key1", "k2" }, Creds = { User = "secret" },
    Tags = { a = "secret" } }, paths, { required = true })
  local msg = constraints.coral(found)
  t.eq(msg, "6 validation errors detected: " ..
    "Value null at 'Name' failed to satisfy constraint: Member must not be null; " ..
    "Value at 'Pass' failed to satisfy constraint: Member must have length less than or equal to 3; " ..
    "Value at 'Keys' failed to satisfy constraint: Member must have length less than or equal to 1; " ..
    "Value at 'Keys' failed to satisfy constraint: Member must satisfy constraint: " ..
    "[Member must have length less than or equal to 3]; " ..
    "Value at 'Creds.User' failed to satisfy constraint: Member must have length less than or equal to 3; " ..
    "Value at 'Tags' failed to satisfy constraint: Map value must satisfy constraint: " ..
    "[Member must have length less than or equal to 3]")
  t.eq(msg:find("secret", 1, true), nil, "no secret echoed")
  for _, f in ipairs(found) do t.eq(f.value, nil, f.path .. " has no value") end
end)

t.test("EC2 CreateVpc with AmazonProvidedIpv6CidrBlock=yes is refused", function()
  -- boto3 writes any value of a boolean as true or false, so the form is
  -- signed with botocore's SigV4 signer and sent as it is
  local path = dir .. "/raw.py"
  H.write(path, [[
import os, urllib.request, urllib.error
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
url = os.environ["AWS_ENDPOINT_URL"] + "/"
body = "Action=CreateVpc&Version=2016-11-15&CidrBlock=10.9.0.0/16&AmazonProvidedIpv6CidrBlock=yes"
req = AWSRequest(method="POST", url=url, data=body,
                 headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
SigV4Auth(Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]), "ec2",
          os.environ.get("AWS_REGION", "us-west-2")).add_auth(req)
r = urllib.request.Request(url, data=body.encode(), headers=dict(req.headers.items()), method="POST")
try:
    print(urllib.request.urlopen(r).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
]])
  local rc, out, err = H.with_env(env, dir, "python3 " .. H.quote(path))
  t.eq(rc, 0, err)
  t.like(out, "^400 ")
  t.like(out, "<Code>InvalidParameterValue</Code>")
  t.like(out, "Value %(yes%) for parameter AmazonProvidedIpv6CidrBlock is invalid")
end)

t.test("EKS answers InvalidParameterException in its own words", function()
  local r = boto("eks", "describe_addon", { clusterName = "bad name", addonName = "vpc-cni" })
  t.eq(r.code, "InvalidParameterException")
  t.eq(r.message, 'The clusterName parameter contains invalid characters. It should conform to the regular expression ' ..
    '"^[0-9A-Za-z][A-Za-z0-9\\-_]*"')
end)

t.test("an invalid EC2 value is InvalidParameterValue with the parameter and the constraint", function()
  local r = boto("ec2", "describe_vpcs", { MaxResults = 1 })
  t.eq(r.code, "InvalidParameterValue")
  t.eq(r.message, "Value (1) for parameter MaxResults is invalid. Member must have value greater than or equal to 5")
end)

t.test("IAM answers ValidationError in AWS's words", function()
  local r = boto("iam", "create_role", { RoleName = string.rep("r", 65), AssumeRolePolicyDocument = "{}" })
  t.eq(r.code, "ValidationError")
  t.like(r.message, "^1 validation error detected: Value 'r+' at 'roleName' failed to satisfy constraint: " ..
    "Member must have length less than or equal to 64$")
end)

t.test("hypd's client refuses a broken constraint before it sends, naming the member and the constraint", function()
  local m = aws.model("sagemaker")
  local req, err = protocol.build(m, "CreateCluster", { ClusterName = "c", NodeRecovery = "Sometimes",
    InstanceGroups = { { InstanceGroupName = "g", InstanceType = "ml.c5.xlarge", InstanceCount = 1,
      ExecutionRole = "arn:aws:iam::123456789012:role/r",
      LifeCycleConfig = { SourceS3Uri = "s3://b/lc/", OnCreate = "on_create.sh" } } } })
  t.eq(req, nil)
  t.eq(err.code, "VALIDATION")
  t.eq(err.field, "NodeRecovery")
  t.like(err.message, "^invalid parameter NodeRecovery: value 'Sometimes' breaks the SageMaker model's " ..
    "constraint: Member must satisfy enum value set: %[Automatic, None%]$")
  -- nested members are named as a playbook writes them
  req, err = protocol.build(m, "CreateCluster", { ClusterName = "c",
    InstanceGroups = { { InstanceGroupName = "g", InstanceType = "ml.c5.xlarge", InstanceCount = 1,
      ExecutionRole = "arn:aws:iam::123456789012:role/r", ThreadsPerCore = 7,
      LifeCycleConfig = { SourceS3Uri = "s3://b/lc/", OnCreate = "on_create.sh" } } } })
  t.eq(req, nil)
  t.eq(err.field, "InstanceGroups[1].ThreadsPerCore")
  t.like(err.message, plain("Member must have value less than or equal to 2"))
  -- through aws.try: nothing reaches the sandbox (no answer, no request id)
  local out, e2 = aws.try("iam", "GetRole", { RoleName = "has space" }, { endpoint_url = "http://127.0.0.1:9" })
  t.eq(out, nil)
  t.eq(e2.code, "VALIDATION")
  t.eq(e2.field, "RoleName")
  t.like(e2.message, "regular expression pattern")
  t.eq(e2.request_id, nil)
end)

t.test("Java patterns: what hypd.regex can express is checked whole, the rest is skipped and counted", function()
  local yes = { "[\\w+=,.@-]+", "\\u002F[\\u0021-\\u007F]*", "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
    "arn:aws[a-z\\-]*:iam::\\d{12}:role/?[a-zA-Z_0-9+=,.@\\-_/]+", "[^\\s]+" }
  for _, p in ipairs(yes) do t.ok(constraints.pattern_support(p), "expressible: " .. p) end
  local no = { "[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*", "^arn:(?=[^:]+:fsx:)", "[\\u0020-\\u00FF]+", "a*+", "[a-z&&[^b]]" }
  for _, p in ipairs(no) do t.eq(constraints.pattern_support(p), false, "skipped: " .. p) end
  -- matched against the whole value, as Java's matches() is
  local m = { metadata = { protocol = "json", endpointPrefix = "x" }, limits = { N = { pattern = "[a-z]+" } },
    shapes = { In = { "structure", { { "Name", "string", c = "N" } } } } }
  local paths = { field = function(p, mm) return p .. mm[1] end, item = function(p, i) return p .. i end }
  t.eq(#constraints.check(m, "In", { Name = "abc" }, paths), 0, "abc matches [a-z]+")
  t.eq(#constraints.check(m, "In", { Name = "abc1" }, paths), 1, "abc1 does not: the pattern is anchored")
  local total, unsupported = 0, 0
  for _, svc in ipairs { "sagemaker", "eks", "ec2", "iam", "sts", "fsx", "cloudformation", "ssm", "logs",
    "servicequotas", "pricing", "elasticloadbalancing", "sagemaker-runtime" } do
    local model = require("hypd.aws.models." .. svc)
    for _, lim in pairs(model.limits) do
      if lim.pattern then total = total + 1 end
    end
    local un = constraints.unsupported_patterns(model)
    unsupported = unsupported + #un
  end
  print(string.format("# %d of %d distinct constraint patterns are skipped (not expressible in hypd.regex)",
    unsupported, total))
  t.ok(total > 300 and unsupported < total / 4, unsupported .. " of " .. total .. " skipped")
end)
