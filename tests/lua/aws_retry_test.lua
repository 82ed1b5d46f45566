-- The AWS call path end to end against a scripted loopback endpoint:
-- signing, error tables, and the standard retry policy under injected
-- throttling, server errors and connection resets (counting attempts; an
-- unsafe call is never repeated after it may have reached the service).
-- The suite runs with AWS_ACCESS_KEY_ID=AKIDEXAMPLE (tests/run).
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local base, stop_fake = H.spawn_server("python3 tests/tools/fake_aws.py 120")

local function script(answers)
  http.request { method = "POST", url = base .. "/_reset" }
  local r = http.request { method = "POST", url = base .. "/_script", body = json.encode(json.array(answers)) }
  assert(r and r.status == 200, "scripted the fake")
end

local function requests()
  return json.decode(http.request { url = base .. "/_requests" }.body)
end

local OPTS = { endpoint_url = base, region = "us-west-2" }
local THROTTLE = { status = 400, body = '{"__type":"ThrottlingException","message":"Rate exceeded"}' }
local FAIL500 = { status = 500, body = '{"__type":"InternalFailure","message":"boom"}' }
local OK = { status = 200, body = '{"ClusterSummaries":[]}' }

-- every test runs under the virtual clock so backoff sleeps take no time
local function virtual(fn)
  return function()
    core.virtual(true)
    local ok, err = pcall(fn)
    core.virtual(false)
    if not ok then error(err, 0) end
  end
end

t.test("a signed request names the access key, scope and signed headers", virtual(function()
  script { OK }
  aws.call("sagemaker", "ListClusters", {}, OPTS)
  local req = requests()[1]
  t.eq(req.method, "POST")
  t.eq(req.headers["x-amz-target"], "SageMaker.ListClusters")
  t.like(req.headers.authorization,
    "^AWS4%-HMAC%-SHA256 Credential=AKIDEXAMPLE/%d+/us%-west%-2/sagemaker/aws4_request, SignedHeaders=[%w;%-]+, Signature=%x+$")
  t.like(req.headers["x-amz-date"], "^%d+T%d+Z$")
end))

t.test("a throttled read is retried and succeeds on the third attempt", virtual(function()
  script { THROTTLE, THROTTLE, OK }
  local out = aws.call("sagemaker", "ListClusters", {}, OPTS)
  t.eq(#out.ClusterSummaries, 0)
  t.eq(#requests(), 3)
end))

t.test("a read that keeps failing stops after 3 attempts with a full error table", virtual(function()
  script { FAIL500 }
  local out, err = aws.try("sagemaker", "ListClusters", {}, OPTS)
  t.fails(out, err, "InternalFailure")
  t.eq({ err.status, err.attempts, err.retryable, err.service, err.operation },
    { 500, 3, true, "sagemaker", "ListClusters" })
  t.eq(err.request_id, "req-3")
  t.eq(#requests(), 3)
end))

t.test("max_attempts bounds the attempts", virtual(function()
  script { FAIL500 }
  local _, err = aws.try("sagemaker", "ListClusters", {}, { endpoint_url = base, region = "us-west-2", max_attempts = 5 })
  t.eq(err.attempts, 5)
  t.eq(#requests(), 5)
end))

t.test("an unsafe call without an idempotency token is not repeated after a server error", virtual(function()
  script { FAIL500, OK }
  local _, err = aws.try("sagemaker", "DeleteCluster", { ClusterName = "hp" }, OPTS)
  t.eq(err.code, "InternalFailure")
  t.eq(err.attempts, 1)
  t.eq(#requests(), 1, "exactly one request reached the service")
end))

t.test("an unsafe call is not repeated after a connection reset", virtual(function()
  script { { action = "reset" }, OK }
  local _, err = aws.try("sagemaker", "DeleteCluster", { ClusterName = "hp" }, OPTS)
  t.eq(err.code, "RESET")
  t.eq(#requests(), 1)
end))

t.test("an unsafe call is retried when throttled, since the service did not act", virtual(function()
  script { THROTTLE, { status = 200, body = '{"ClusterArn":"arn:aws:sagemaker:us-west-2:1:cluster/x"}' } }
  local out = aws.call("sagemaker", "DeleteCluster", { ClusterName = "hp" }, OPTS)
  t.eq(out.ClusterArn, "arn:aws:sagemaker:us-west-2:1:cluster/x")
  t.eq(#requests(), 2)
end))

t.test("a call with an idempotency token is retried after a server error with the same token", virtual(function()
  script { FAIL500, { status = 200, body = '{"cluster":{"name":"eks1","status":"CREATING"}}' } }
  local out = aws.call("eks", "CreateCluster", { name = "eks1", roleArn = "arn:aws:iam::1:role/r",
    resourcesVpcConfig = { subnetIds = { "subnet-1" } } }, OPTS)
  t.eq(out.cluster.status, "CREATING")
  local reqs = requests()
  t.eq(#reqs, 2)
  local a, b = json.decode(reqs[1].body), json.decode(reqs[2].body)
  t.ok(type(a.clientRequestToken) == "string" and #a.clientRequestToken >= 32, "a token was filled in")
  t.eq(b.clientRequestToken, a.clientRequestToken, "the retry repeats the same token")
end))

t.test("a connection that was never made is retried even for an unsafe call", virtual(function()
  local out, err = aws.try("sagemaker", "DeleteCluster", { ClusterName = "hp" },
    { endpoint_url = "http://127.0.0.1:1", region = "us-west-2" })
  t.fails(out, err, "CONNECT")
  t.eq(err.attempts, 3)
end))

t.test("the retry quota stops retries when it is spent", virtual(function()
  script { FAIL500 }
  local quota_hit = false
  for _ = 1, 80 do
    local _, err = aws.try("sagemaker", "ListClusters", {}, { endpoint_url = base, region = "eu-west-1" })
    if err.message:find("retry quota", 1, true) then quota_hit = true break end
  end
  t.ok(quota_hit, "the quota ran out")
end))

t.test("an AWS error from a restJson1 service keeps code, message and status", virtual(function()
  script { { status = 404, headers = { ["x-amzn-errortype"] = "ResourceNotFoundException:http://internal.amazon.com/" },
    body = '{"message":"No cluster found for name: nope."}' } }
  local _, err = aws.try("eks", "DescribeCluster", { name = "nope" }, OPTS)
  t.eq({ err.code, err.message, err.status, err.retryable, err.attempts },
    { "ResourceNotFoundException", "No cluster found for name: nope.", 404, false, 1 })
  t.eq(requests()[1].path, "/clusters/nope")
end))

t.test("bad parameters fail before anything is sent", virtual(function()
  script { OK }
  local _, err = aws.try("sagemaker", "DescribeCluster", { ClusterNam = "x" }, OPTS)
  t.eq(err.code, "VALIDATION")
  t.like(err.message, "ClusterNam")
  t.eq(#requests(), 0)
end))

t.test("an unknown service or operation is refused with the known names", function()
  t.raises(function() aws.call("lambda", "Invoke", {}, OPTS) end, "VALIDATION")
  local _, err = aws.try("eks", "DescribeClusterz", {}, OPTS)
  t.eq(err.code, "VALIDATION")
end)

t.test("read-only services refuse mutating operations", function()
  local _, err = aws.try("cloudformation", "DeleteStack", { StackName = "x" }, OPTS)
  t.eq(err.code, "VALIDATION")
  t.like(err.message, "read%-only")
end)

t.test("an S3 object goes out with its exact bytes, a body hash and no invented content type", virtual(function()
  script { { status = 200, headers = { etag = '"abc"' }, body = "" } }
  aws.call("s3", "PutObject", { Bucket = "b", Key = "a b/c.txt", Body = "hello\0world" }, OPTS)
  local req = requests()[1]
  t.eq({ req.method, req.path }, { "PUT", "/b/a%20b/c.txt" })
  t.eq(req.headers["content-type"], nil)
  t.eq(req.headers["x-amz-content-sha256"], sys.digest("sha256", "hello\0world", "hex"))
  t.like(req.headers.authorization, "/us%-west%-2/s3/aws4_request")
end))

t.cleanup(function()
  stop_fake()
end)
