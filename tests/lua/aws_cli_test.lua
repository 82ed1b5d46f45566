-- hypd eks-token and hypd doctor, run as a user (or kubectl) would. The
-- suite's environment has AWS_ACCESS_KEY_ID=AKIDEXAMPLE (tests/run).
local t = require "hypd.tap"
local http = require "hypd.http"
local json = require "hypd.json"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local state = H.tmpdir()
local SECRET = os.getenv("AWS_SECRET_ACCESS_KEY")

local function token_url(token)
  local b64 = token:match("^k8s%-aws%-v1%.([%w_%-]+)$")
  if not b64 then return nil end
  b64 = b64:gsub("%-", "+"):gsub("_", "/")
  return sys.b64decode(b64 .. string.rep("=", (4 - #b64 % 4) % 4))
end

local function hypd(env, ...)
  env = env or {}
  env.HYPD_STATE = state
  return H.run_hypd(env, ...)
end

t.test("eks-token prints a v1beta1 ExecCredential whose token is a presigned STS URL", function()
  local rc, out, err = hypd(nil, "eks-token", "--cluster", "eks1")
  t.eq(rc, 0, err)
  local cred = json.decode(out)
  t.eq({ cred.kind, cred.apiVersion }, { "ExecCredential", "client.authentication.k8s.io/v1beta1" })
  t.like(cred.status.expirationTimestamp, "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$")
  local url = token_url(cred.status.token)
  t.ok(url, "the token is k8s-aws-v1. + unpadded base64url")
  t.like(url, "^https://sts%.us%-west%-2%.amazonaws%.com/%?Action=GetCallerIdentity&Version=2011%-06%-15&")
  t.like(url, "X%-Amz%-Credential=AKIDEXAMPLE%%2F%d+%%2Fus%-west%-2%%2Fsts%%2Faws4_request")
  t.like(url, "X%-Amz%-SignedHeaders=host%%3Bx%-k8s%-aws%-id")
  t.like(url, "X%-Amz%-Expires=60")
  t.ok(not out:find(SECRET, 1, true), "the secret key is not in the output")
end)

t.test("botocore re-signs the token's URL to the same signature", function()
  local _, out = hypd(nil, "eks-token", "--cluster", "eks1")
  local token = json.decode(out).status.token
  local rc, said = H.sh("python3 tests/tools/verify_eks_token.py " .. H.quote(token) .. " eks1")
  if rc == 3 then return t.skip("botocore is absent") end
  t.eq({ rc, said }, { 0, "match\n" })
end)

t.test("eks-token signs for the configured STS endpoint and carries a session token", function()
  local rc, out = hypd({ AWS_ENDPOINT_URL_STS = "http://127.0.0.1:4566", AWS_SESSION_TOKEN = "SESSIONTOKEN123" },
    "eks-token", "--cluster", "eks1", "--region", "eu-west-1")
  t.eq(rc, 0)
  local url = token_url(json.decode(out).status.token)
  t.like(url, "^http://127%.0%.0%.1:4566/%?")
  t.like(url, "%%2Feu%-west%-1%%2Fsts%%2F")
  t.like(url, "X%-Amz%-Security%-Token=SESSIONTOKEN123")
end)

t.test("eks-token refuses a bad cluster name and a missing one with one clear line", function()
  local rc, _, err = hypd(nil, "eks-token", "--cluster", "bad name")
  t.eq(rc, 1)
  t.like(err, "^hypd: VALIDATION: cluster: ")
  rc, _, err = hypd(nil, "eks-token")
  t.eq(rc, 2)
  t.eq(err, "hypd: eks-token needs --cluster NAME (see hypd eks-token --help)\n")
end)

t.test("eks-token without credentials says so and prints no token", function()
  local rc, out, err = H.sh("env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HYPD_STATE=" .. H.quote(state) ..
    " " .. H.hypd .. " eks-token --cluster eks1")
  t.eq({ rc, out }, { 1, "" })
  t.like(err, "^hypd: CREDENTIALS: ")
end)

local IDENTITY = [[<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/dev</Arn><UserId>AIDAEXAMPLE</UserId>
  <Account>123456789012</Account></GetCallerIdentityResult>
  <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></GetCallerIdentityResponse>]]

t.test("doctor reports region, credential source, identity and endpoints, never a secret", function()
  local base, stop = H.spawn_server("python3 tests/tools/fake_aws.py 60")
  http.request { method = "POST", url = base .. "/_script",
    body = json.encode(json.array { { status = 200, body = IDENTITY, headers = { ["content-type"] = "text/xml" } } }) }
  local rc, out = hypd({ AWS_ENDPOINT_URL = base }, "doctor", "--json")
  local reqs = json.decode(http.request { url = base .. "/_requests" }.body)
  stop()
  t.eq(rc, 0)
  local r = json.decode(out)
  t.eq({ r.ok, r.region, r.region_source, r.credentials.source },
    { true, "us-west-2", "AWS_REGION", "env" })
  t.eq(r.identity.arn, "arn:aws:iam::123456789012:user/dev")
  t.eq({ r.endpoints.sts.url, r.endpoints.sts.source }, { base, "AWS_ENDPOINT_URL" })
  t.like(reqs[1].headers.authorization, "Credential=AKIDEXAMPLE/")
  t.ok(not out:find(SECRET, 1, true), "no secret in the report")
end)

t.test("doctor in text form names what is missing and exits 1", function()
  local rc, out = H.sh("env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HYPD_STATE=" .. H.quote(state) ..
    " " .. H.hypd .. " doctor")
  t.eq(rc, 1)
  t.like(out, "region       us%-west%-2  %(from AWS_REGION%)")
  t.like(out, "credentials  MISSING: ")
  t.like(out, "PROBLEMS FOUND")
end)

t.cleanup(function() os.execute("rm -rf " .. H.quote(state)) end)
