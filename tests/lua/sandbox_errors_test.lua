-- A refused request is answered in the protocol its client reads, as AWS
-- answers it: XML for the query services (EC2 <Response><Errors>, IAM and
-- STS <ErrorResponse>) and S3 (<Error>), JSON for SageMaker, FSx and EKS,
-- never text/plain, even when the request is unsigned and names its
-- service only by its target, form, path or content type. Judged by boto3
-- (tests/tools/sandbox_errors.py: the code and message botocore parses)
-- and the aws CLI (what it prints), against `hypd sandbox` on the real
-- clock: no signature, a wrong secret, an unknown key, a date 16 minutes
-- ahead ("not yet current") and behind ("expired"), unknown actions,
-- targets and paths; the AWS SDK for JavaScript v3 (tests/sdk/errors.mjs)
-- for the first three. Then which service a request addresses, directly.
local t = require "hypd.tap"
local json = require "hypd.json"
local route = require "sandbox._route"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local env, pid = {}, nil
local results -- case -> what boto3 got
local ready = false
local absent -- why the first test could not run (nil: it tried)

local function with_env(cmd) return H.with_env(env, dir, cmd) end

local SIG = "The request signature we calculated does not match the signature you provided. Check your AWS Secret " ..
  "Access Key and signing method. Consult the service documentation for details."
local TOKEN = "The security token included in the request is invalid."
local EC2_AUTH = "AWS was not able to validate the provided access credentials"
local MISSING = "Request is missing Authentication Token"
local EC2_MISSING = "The request must contain either a valid (registered) AWS access key ID or X.509 certificate."
local D = "(%d%d%d%d%d%d%d%dT%d%d%d%d%d%dZ)"
local AHEAD5 = "^Signature not yet current: " .. D .. " is still later than " .. D .. " %(" .. D .. " %+ 5 min%.%)$"
local AHEAD15 = AHEAD5:gsub("5 min", "15 min")
local BEHIND = "^Signature expired: " .. D .. " is now earlier than " .. D .. " %(" .. D .. " %- 15 min%.%)$"

-- case -> { status, code, message (a pattern when it starts with ^), error Type }
local EXPECT = {
  ["ec2 unsigned"] = { 401, "MissingAuthenticationToken", EC2_MISSING },
  ["ec2 wrong secret"] = { 401, "AuthFailure", EC2_AUTH },
  ["ec2 unknown key"] = { 401, "AuthFailure", EC2_AUTH },
  ["ec2 16 minutes ahead"] = { 400, "RequestExpired", AHEAD15 },
  ["ec2 16 minutes behind"] = { 400, "RequestExpired", BEHIND },
  ["ec2 14 minutes ahead"] = { 200 },
  ["ec2 unknown action"] = { 400, "InvalidAction", "The action NoSuchAction is not valid for this web service." },
  ["ec2 unknown action unsigned"] = { 401, "MissingAuthenticationToken", EC2_MISSING },
  ["iam unsigned"] = { 403, "MissingAuthenticationToken", MISSING, "Sender" },
  ["iam wrong secret"] = { 403, "SignatureDoesNotMatch", SIG, "Sender" },
  ["iam unknown key"] = { 403, "InvalidClientTokenId", TOKEN, "Sender" },
  ["iam 16 minutes ahead"] = { 403, "SignatureDoesNotMatch", AHEAD5, "Sender" },
  ["iam 16 minutes behind"] = { 403, "SignatureDoesNotMatch", BEHIND, "Sender" },
  ["iam unknown action"] = { 400, "InvalidAction", "Could not find operation NoSuchAction for version 2010-05-08",
    "Sender" },
  ["sts unsigned"] = { 403, "MissingAuthenticationToken", MISSING, "Sender" },
  ["sts wrong secret"] = { 403, "SignatureDoesNotMatch", SIG, "Sender" },
  ["sts unknown key"] = { 403, "InvalidClientTokenId", TOKEN, "Sender" },
  ["sts 16 minutes ahead"] = { 403, "SignatureDoesNotMatch", AHEAD5, "Sender" },
  ["sts 16 minutes behind"] = { 403, "SignatureDoesNotMatch", BEHIND, "Sender" },
  ["sts 4 minutes ahead"] = { 200 },
  ["sts 6 minutes ahead"] = { 403, "SignatureDoesNotMatch", AHEAD5, "Sender" },
  ["sts 14 minutes behind"] = { 200 },
  ["sts unknown action"] = { 400, "InvalidAction", "Could not find operation NoSuchAction for version 2011-06-15",
    "Sender" },
  ["sts unknown action unsigned"] = { 403, "MissingAuthenticationToken", MISSING, "Sender" },
  ["unsigned form with an unknown Version"] = { 403, "MissingAuthenticationToken", MISSING, "Sender" },
  ["s3 unsigned"] = { 403, "AccessDenied", "Access Denied" },
  ["s3 wrong secret"] = { 403, "SignatureDoesNotMatch", "The request signature we calculated does not match the " ..
    "signature you provided. Check your key and signing method." },
  ["s3 unknown key"] = { 403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records." },
  ["s3 16 minutes ahead"] = { 403, "RequestTimeTooSkewed",
    "The difference between the request time and the current time is too large." },
  ["s3 16 minutes behind"] = { 403, "RequestTimeTooSkewed",
    "The difference between the request time and the current time is too large." },
  ["s3 14 minutes ahead"] = { 200 },
  ["s3 unsigned GET of an object"] = { 403, "AccessDenied", "Access Denied" },
  ["unknown path unsigned"] = { 403, "AccessDenied", "Access Denied" },
  ["unsigned POST / with nothing to go by"] = { 403, "AccessDenied", "Access Denied" },
  ["sagemaker unsigned"] = { 403, "MissingAuthenticationTokenException", "Missing Authentication Token" },
  ["sagemaker wrong secret"] = { 403, "InvalidSignatureException", SIG },
  ["sagemaker unknown key"] = { 403, "UnrecognizedClientException", TOKEN },
  ["sagemaker 16 minutes ahead"] = { 403, "InvalidSignatureException", AHEAD5 },
  ["sagemaker 16 minutes behind"] = { 403, "InvalidSignatureException", BEHIND },
  ["sagemaker unknown target"] = { 400, "UnknownOperationException", "unknown operation SageMaker.NoSuchOperation" },
  ["sagemaker unknown target unsigned"] = { 403, "MissingAuthenticationTokenException", "Missing Authentication Token" },
  ["fsx unsigned"] = { 403, "MissingAuthenticationTokenException", "Missing Authentication Token" },
  ["fsx wrong secret"] = { 403, "InvalidSignatureException", SIG },
  ["fsx unknown key"] = { 403, "UnrecognizedClientException", TOKEN },
  ["fsx 16 minutes ahead"] = { 403, "InvalidSignatureException", AHEAD5 },
  ["fsx 16 minutes behind"] = { 403, "InvalidSignatureException", BEHIND },
  ["fsx unknown target"] = { 400, "UnknownOperationException",
    "unknown operation AWSSimbaAPIService_v20180301.NoSuchOperation" },
  ["fsx unknown target unsigned"] = { 403, "MissingAuthenticationTokenException", "Missing Authentication Token" },
  ["eks unsigned"] = { 403, "MissingAuthenticationTokenException", "Missing Authentication Token" },
  ["eks wrong secret"] = { 403, "InvalidSignatureException", SIG },
  ["eks unknown key"] = { 403, "UnrecognizedClientException", TOKEN },
  ["eks 16 minutes ahead"] = { 403, "InvalidSignatureException", AHEAD5 },
  ["eks 16 minutes behind"] = { 403, "InvalidSignatureException", BEHIND },
  ["eks unknown path"] = { 404, "UnknownOperationException", "no operation matches GET /no-such-thing/at-all" },
  ["eks unsigned GET /clusters"] = { 403, "MissingAuthenticationTokenException", "Missing Authentication Token" },
  ["signed for sns, a query form"] = { 400, "InvalidAction", "The hypd sandbox does not simulate the service 'sns'",
    "Sender" },
  ["signed for dynamodb, an awsJson target"] = { 400, "UnknownOperationException",
    "The hypd sandbox does not simulate the service 'dynamodb'" },
}

-- the content type each protocol's errors come in (for the raw cases)
local CTYPE = { ["text/xml;charset=UTF-8"] = true, ["application/xml"] = true, ["application/json"] = true,
  ["application/x-amz-json-1.1"] = true }

t.test("a sandbox on the real clock, and boto3 sends every case", function()
  if H.sh("python3 -c 'import boto3'") ~= 0 then
    absent = "no boto3 on this machine"
    return t.skip(absent)
  end
  env, pid = H.sandbox_process(dir)
  env = env or {}
  t.ok(env.AWS_ENDPOINT_URL, "the sandbox started")
  local rc, out, err = with_env("timeout 120 python3 tests/tools/sandbox_errors.py")
  t.eq(rc, 0, err)
  results = {}
  for line in out:gmatch("[^\n]+") do
    local r = json.decode(line)
    if r then results[r.case] = r end
  end
  ready = true
end)

t.test("boto3 parses every refusal into the code, status and message AWS gives", function()
  if not ready then return t.skip(absent or "the first test failed to start the sandbox or run boto3") end
  local n = 0
  for case, want in pairs(EXPECT) do
    local got = results[case]
    t.ok(got, case .. ": the harness ran it")
    t.eq(got.unparsed, nil, case .. ": botocore could not read the answer")
    t.eq(got.status, want[1], case .. ": status")
    if want[2] then
      t.eq(got.code, want[2], case .. ": code")
      if want[3]:sub(1, 1) == "^" then
        t.like(got.message, want[3], case .. ": message")
      else
        t.eq(got.message, want[3], case .. ": message")
      end
      if want[4] then t.eq(got.type, want[4], case .. ": Type") end
      if got.content_type then t.ok(CTYPE[got.content_type], case .. ": content type " .. got.content_type) end
    end
    n = n + 1
  end
  local extra = {}
  for case in pairs(results) do if not EXPECT[case] then extra[#extra + 1] = case end end
  t.eq(extra, {}, "every case the harness ran is checked")
  t.ok(n >= 50, "compared " .. n .. " cases")
end)

t.test("a date 16 minutes ahead is named as such, 16 minutes behind as expired, with the clock's bounds", function()
  if not ready then return t.skip(absent or "the first test failed to start the sandbox or run boto3") end
  local function secs(s)
    local y, mo, d, h, mi, se = s:match("^(%d%d%d%d)(%d%d)(%d%d)T(%d%d)(%d%d)(%d%d)Z$")
    return os.time { year = y, month = mo, day = d, hour = h, min = mi, sec = se }
  end
  local when, limit, now = results["sts 16 minutes ahead"].message:match(AHEAD5)
  t.eq(secs(limit) - secs(now), 300, "the limit is the clock + 5 minutes")
  t.ok(math.abs(secs(when) - secs(now) - 960) <= 2, "the request was dated 16 minutes ahead")
  when, limit, now = results["sts 16 minutes behind"].message:match(BEHIND)
  t.eq(secs(now) - secs(limit), 900, "the limit is the clock - 15 minutes")
  t.ok(math.abs(secs(now) - secs(when) - 960) <= 2, "the request was dated 16 minutes behind")
end)

-- aws(args) -> status, stderr of the aws CLI against the sandbox
local function aws(args, extra)
  return with_env((extra or "") .. " AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null " ..
    "timeout 60 aws " .. args .. " --cli-read-timeout 10")
end

t.test("the aws CLI prints AWS's refusals, not an invalid-XML or parse error", function()
  if not ready then return t.skip(absent or "the first test failed to start the sandbox or run boto3") end
  if H.sh("command -v aws") ~= 0 then return t.skip("no aws CLI on this machine") end
  local cases = {
    { "ec2 describe-vpcs --no-sign-request", "MissingAuthenticationToken", "DescribeVpcs", EC2_MISSING },
    { "sts get-caller-identity --no-sign-request", "MissingAuthenticationToken", "GetCallerIdentity", MISSING },
    { "iam list-roles --no-sign-request", "MissingAuthenticationToken", "ListRoles", MISSING },
    { "s3api list-buckets --no-sign-request", "AccessDenied", "ListBuckets", "Access Denied" },
    { "sagemaker list-clusters --no-sign-request", "MissingAuthenticationTokenException", "ListClusters",
      "Missing Authentication Token" },
    { "eks list-clusters --no-sign-request", "MissingAuthenticationTokenException", "ListClusters",
      "Missing Authentication Token" },
    { "sts get-caller-identity", "SignatureDoesNotMatch", "GetCallerIdentity", SIG, "AWS_SECRET_ACCESS_KEY=wrong" },
    { "ec2 describe-vpcs", "AuthFailure", "DescribeVpcs", EC2_AUTH, "AWS_SECRET_ACCESS_KEY=wrong" },
    { "sagemaker list-clusters", "UnrecognizedClientException", "ListClusters", TOKEN,
      "AWS_ACCESS_KEY_ID=AKIAUNKNOWNKEY000001" },
  }
  for _, c in ipairs(cases) do
    local rc, out, err = aws(c[1], c[5])
    -- a service error: exit status 255 from aws-cli v1, 254 from v2
    t.ok((rc == 255 or rc == 254) and out == "", c[1] .. ": exit status " .. rc .. ": " .. tostring(err))
    t.eq(err, string.format("\nAn error occurred (%s) when calling the %s operation: %s\n", c[2], c[3], c[4]), c[1])
  end
end)

t.test("the AWS SDK for JavaScript v3 throws the same errors by name, status and message", function()
  if not ready then return t.skip(absent or "the first test failed to start the sandbox or run boto3") end
  if H.sh("(command -v node && command -v npm)") ~= 0 then return t.skip("no node or npm on this machine") end
  -- the clients pinned in tests/node, as the sandbox conformance run installs them
  if not H.read("tests/node/node_modules/@aws-sdk/client-sts/package.json") and
      H.sh("cd tests/node && timeout 120 npm ci --no-audit --no-fund") ~= 0 then
    return t.skip("npm ci could not install the pinned AWS SDK clients")
  end
  local rc, out, err = with_env("timeout 60 node tests/sdk/errors.mjs")
  t.eq(rc, 0, err)
  local n = 0
  for line in out:gmatch("[^\n]+") do
    local got = json.decode(line)
    local want = EXPECT[got.case]
    t.ok(want, got.case .. ": an expected case")
    t.eq(got.unparsed, nil, got.case .. ": the SDK could not read the answer")
    t.eq({ got.status, got.name, got.message }, { want[1], want[2], want[3] }, got.case)
    n = n + 1
  end
  t.eq(n, 21, "seven services, three cases each")
end)

t.cleanup(function()
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)

-- which service an unsigned (or foreign-signed) request addresses
local NAMES = { "sts", "iam", "ec2", "s3", "eks", "sagemaker", "fsx" }
local FORM = "application/x-www-form-urlencoded; charset=utf-8"

t.test("route: the request itself names its service when no signature does", function()
  local cases = {
    { "sagemaker", { headers = { ["x-amz-target"] = "SageMaker.ListClusters",
      ["content-type"] = "application/x-amz-json-1.1" } } },
    { "fsx", { headers = { ["x-amz-target"] = "AWSSimbaAPIService_v20180301.DescribeFileSystems" } } },
    { "sagemaker", { headers = { ["x-amz-target"] = "DynamoDB_20120810.ListTables" } }, "an awsJson service" },
    { "sts", { headers = { host = "sts.us-west-2.amazonaws.com" } } },
    { "sagemaker", { headers = { host = "api.sagemaker.us-west-2.amazonaws.com" } } },
    { "s3", { headers = { host = "my-bucket.s3.us-west-2.amazonaws.com" }, path = "/key" } },
    { "s3", { headers = { host = "my-bucket.localhost:4566" }, path = "/key" } },
    { "iam", { headers = { ["content-type"] = FORM }, body = "Action=ListRoles&Version=2010-05-08" } },
    { "ec2", { headers = {}, query = "Action=DescribeVpcs&Version=2016-11-15" } },
    { "iam", { headers = { ["content-type"] = FORM }, body = "Action=ListRoles" }, "by the action alone" },
    { "sts", { headers = { ["content-type"] = FORM }, body = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15" } },
    { "sts", { headers = { ["content-type"] = FORM }, body = "" }, "a form without an action" },
    { "eks", { method = "GET", path = "/clusters/demo", headers = {} } },
    { "eks", { method = "POST", path = "/nope", headers = { ["content-type"] = "application/json" } } },
    { "s3", { method = "GET", path = "/", headers = {} }, "nothing to go by" },
    { "s3", { method = "PUT", path = "/bucket/key", headers = {} } },
  }
  for _, c in ipairs(cases) do
    local req = c[2]
    req.method, req.path = req.method or "POST", req.path or "/"
    local svc, scoped = route.service(req, NAMES)
    t.eq({ svc, scoped }, { c[1] }, c[3] or json.encode(req))
  end
end)

t.test("route: a signature's scope decides, unless it names a service not simulated here", function()
  local auth = "AWS4-HMAC-SHA256 Credential=AKID/20261201/us-west-2/%s/aws4_request, SignedHeaders=host, Signature=00"
  local function req(svc, extra)
    local r = { method = "POST", path = "/", headers = { authorization = auth:format(svc) } }
    for k, v in pairs(extra or {}) do r.headers[k] = v end
    return r
  end
  t.eq({ route.service(req("iam", { ["x-amz-target"] = "SageMaker.ListClusters" }), NAMES) }, { "iam", "iam" })
  t.eq({ route.service(req("sagemaker"), NAMES) }, { "sagemaker", "sagemaker" })
  t.eq({ route.service(req("api.sagemaker"), NAMES) }, { "sagemaker", "sagemaker" })
  t.eq({ route.service(req("sns", { ["content-type"] = FORM }), NAMES) }, { "sts", "sns" })
  t.eq({ route.service({ method = "GET", path = "/b/k", headers = {},
    query = "X-Amz-Credential=AKID%2F20261201%2Fus-west-2%2Fs3%2Faws4_request&X-Amz-Signature=00" }, NAMES) },
    { "s3", "s3" })
end)
