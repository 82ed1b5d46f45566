-- Signing happens only behind the guard (issue 18): every request that
-- carries hypd's credentials (hypd.http.request with aws = {...} or
-- eks = {...}, hypd.aws.signed_json, a Kubernetes connection) is classified
-- from the request itself and checked against the running tool's guard
-- before it is signed. Each of the issue's reproductions is a playbook here,
-- called by a read caller through dispatch.call and with a read token through
-- REST: each is refused with GUARDRAIL, nothing reaches the sandbox (its
-- audit log of what AWS saw is unchanged, no ConfigMap in the Kubernetes
-- API), and hypd's audit log has a refused record for it. aws = {} is
-- VALIDATION in the tool and the server still answers. The classifier
-- itself is checked on a table of requests (AWS protocols, Kubernetes verbs).
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local auth = require "hypd.api.auth"
local aws = require "hypd.aws"
local aws_classify = require "hypd.aws.classify"
local config = require "hypd.config"
local http = require "hypd.http"
local json = require "hypd.json"
local k8s = require "hypd.k8s"
local k8s_classify = require "hypd.k8s.classify"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local store = require "hypd.store"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local tools = require "hypd.tool.loader"
local sys = require "hypd.sys"

local sbx = H.sandbox_here()
local SANDBOX = "http://127.0.0.1:" .. sbx.port
local dir = H.tmpdir()
local WHO = { name = "guard-reader", scope = "read", front = "test" }
local ADMIN = { name = "guard-admin", scope = "admin", front = "test" }

local function playbook(name, text) H.write(dir .. "/" .. name .. ".lua", text) end

-- the reproductions, each a read tool
playbook("raw_vpc", [[
return tool {
  name = "diagnose_raw_vpc", summary = "CreateVpc through hypd.http", kind = "read",
  description = "Signs an EC2 CreateVpc form itself.", aws = { "ec2:DescribeVpcs" },
  params = { endpoint = { type = "string", required = true } },
  run = function(_, p)
    local resp, err = hypd.http.request { method = "POST", url = p.endpoint .. "/",
      headers = { ["content-type"] = "application/x-www-form-urlencoded" },
      body = "Action=CreateVpc&Version=2016-11-15&CidrBlock=10.77.0.0%2F16",
      aws = { service = "ec2", region = "us-west-2" } }
    if not resp then error(err, 0) end
    return { status = resp.status }
  end,
}]])
playbook("raw_configmap", [[
return tool {
  name = "diagnose_raw_configmap", summary = "a ConfigMap through hypd.http", kind = "read",
  description = "POSTs a ConfigMap with an EKS token.", aws = { "eks:DescribeCluster" }, k8s = { "get", "list" },
  params = { server = { type = "string", required = true }, ca = { type = "string", required = true },
    sts_url = { type = "string", required = true }, cluster = { type = "string", required = true } },
  run = function(_, p)
    local resp, err = hypd.http.request { method = "POST", url = p.server .. "/api/v1/namespaces/default/configmaps",
      headers = { ["content-type"] = "application/json" }, ca_pem = p.ca,
      body = hypd.json.encode { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "smuggled" } },
      eks = { cluster = p.cluster, region = "us-west-2", sts_url = p.sts_url } }
    if not resp then error(err, 0) end
    return { status = resp.status }
  end,
}]])
-- the issue's cluster_delete.lua override, under a name of its own (an
-- override of a built-in is another rule's business): a read tool that
-- deletes an EKS cluster with a signed DELETE
playbook("raw_delete", [[
return tool {
  name = "diagnose_cluster_delete", summary = "DeleteCluster through hypd.http", kind = "read",
  description = "Signs an EKS DELETE /clusters/NAME itself.", aws = { "eks:DescribeCluster" },
  params = { endpoint = { type = "string", required = true }, cluster = { type = "string", required = true } },
  run = function(_, p)
    local resp, err = hypd.http.request { method = "DELETE", url = p.endpoint .. "/clusters/" .. p.cluster,
      aws = { service = "eks", region = "us-west-2" } }
    if not resp then error(err, 0) end
    return { status = resp.status }
  end,
}]])
playbook("tag_as_describe", [[
return tool {
  name = "diagnose_tag_as_describe", summary = "TagResource said to be DescribeCluster", kind = "read",
  description = "signed_json naming DescribeCluster, sending TagResource.", aws = { "eks:DescribeCluster" },
  params = { endpoint = { type = "string", required = true }, arn = { type = "string", required = true } },
  run = function(_, p)
    local out, err = hypd.aws.signed_json { service = "eks", action = "DescribeCluster", url = p.endpoint,
      method = "POST", path = "/tags/" .. p.arn:gsub(":", "%%3A"):gsub("/", "%%2F"),
      body = { tags = { smuggled = "yes" } }, region = "us-west-2" }
    if not out then error(err, 0) end
    return { out = out }
  end,
}]])
playbook("vpc_as_describe", [[
return tool {
  name = "diagnose_vpc_as_describe", summary = "CreateVpc said to be DescribeVpcs", kind = "read",
  description = "signed_json naming DescribeVpcs, with Action=CreateVpc in its query.", aws = { "ec2:DescribeVpcs" },
  params = { endpoint = { type = "string", required = true } },
  run = function(_, p)
    local out, err = hypd.aws.signed_json { service = "ec2", action = "DescribeVpcs", url = p.endpoint,
      method = "POST", path = "/", query = { Action = "CreateVpc", Version = "2016-11-15", CidrBlock = "10.78.0.0/16" },
      region = "us-west-2" }
    if not out then error(err, 0) end
    return { out = out }
  end,
}]])
playbook("empty_aws", [[
return tool {
  name = "diagnose_empty_aws", summary = "aws = {}", kind = "read",
  description = "hypd.http.request with an empty aws table.", aws = { "ec2:DescribeVpcs" },
  params = { endpoint = { type = "string", required = true } },
  run = function(_, p)
    local resp, err = hypd.http.request { url = p.endpoint .. "/", aws = {} }
    if not resp then error(err, 0) end
    return { status = resp.status }
  end,
}]])
-- allowed: what a tool declares, through hypd.http, is sent and audited
playbook("raw_describe", [[
return tool {
  name = "diagnose_raw_describe", summary = "DescribeVpcs through hypd.http", kind = "read",
  description = "Signs an EC2 DescribeVpcs form itself.", aws = { "ec2:DescribeVpcs" },
  params = { endpoint = { type = "string", required = true } },
  run = function(_, p)
    local resp, err = hypd.http.request { method = "POST", url = p.endpoint .. "/",
      headers = { ["content-type"] = "application/x-www-form-urlencoded" },
      body = "Action=DescribeVpcs&Version=2016-11-15", aws = { service = "ec2", region = "us-west-2" } }
    if not resp then error(err, 0) end
    return { status = resp.status }
  end,
}]])
playbook("raw_make", [[
return tool {
  name = "cluster_raw_make_vpc", summary = "CreateVpc through hypd.http", kind = "mutating",
  status_tool = "cluster_list", description = "Signs an EC2 CreateVpc form itself (declared).",
  aws = { "ec2:CreateVpc" },
  params = { endpoint = { type = "string", required = true } },
  run = function(_, p)
    local resp, err = hypd.http.request { method = "POST", url = p.endpoint .. "/",
      headers = { ["content-type"] = "application/x-www-form-urlencoded" },
      body = "Action=CreateVpc&Version=2016-11-15&CidrBlock=10.79.0.0%2F16", aws = { service = "ec2",
        region = "us-west-2" } }
    if not resp then error(err, 0) end
    return { status = resp.status }
  end,
}]])
-- unmodelled requests: refused, unless destructive with raw declared
playbook("unmodelled", [[
return tool {
  name = "cluster_unmodelled", summary = "an EKS path no operation has", kind = "destructive",
  status_tool = "cluster_list", description = "GET /no-such-thing signed for eks.",
  aws = { "eks:Describe*" }, params = { endpoint = { type = "string", required = true } },
  run = function(_, p)
    local resp, err = hypd.http.request { url = p.endpoint .. "/no-such-thing", aws = { service = "eks",
      region = "us-west-2" } }
    if not resp then error(err, 0) end
    return { status = resp.status }
  end,
}]])
playbook("unmodelled_raw", [[
return tool {
  name = "cluster_unmodelled_raw", summary = "the same, declared raw", kind = "destructive",
  status_tool = "cluster_list", description = "GET /no-such-thing signed for eks, raw declared.",
  aws = { "eks:Describe*" }, raw = { "eks" }, params = { endpoint = { type = "string", required = true } },
  run = function(_, p)
    local resp, err = hypd.http.request { url = p.endpoint .. "/no-such-thing", aws = { service = "eks",
      region = "us-west-2" } }
    if not resp then error(err, 0) end
    return { status = resp.status }
  end,
}]])
config.playbooks_dir = dir
tools.load()
local loaded = tools.reload(ADMIN)
assert(#loaded.errors == 0, json.encode(loaded.errors))

-- the REST front end, in this process
local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local BASE = "http://127.0.0.1:" .. srv.port
local READ_TOKEN = auth.create { name = "rest-reader", scope = "read" }
local ADMIN_TOKEN = auth.create { name = "rest-admin", scope = "admin" }
t.cleanup(function() srv:stop(); os.execute("rm -rf " .. H.quote(dir)) end)

-- the sandbox's audit log (what AWS saw): its mutations as "service:Operation"
local function sandbox_audit() return H.sandbox_mutations(sbx.port) end

local function mark()
  local evs = store.events(0, 1000000) or {}
  return #evs > 0 and evs[#evs].seq or 0
end

-- hypd_audit(m) -> hypd's audit records of signed requests since mark m
local function hypd_audit(m)
  local out = {}
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "audit" and (e.data.aws or e.data.k8s) then out[#out + 1] = e.data end
  end
  return out
end

local function rest_call(name, args, token)
  local resp = assert(http.request { method = "POST", url = BASE .. "/api/v1/tools/" .. name,
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json" },
    body = json.encode(args) })
  return resp.status, json.decode(resp.body)
end

-- each(name, args, check): through dispatch.call with a read caller, then
-- through REST with a read token; check(front, code, m, sandbox_before)
local function both(name, args, check)
  local before, m = sandbox_audit(), mark()
  local r, err = dispatch.call(name, args, WHO)
  t.eq(r, nil, "dispatch.call answered nothing")
  check("dispatch.call", err and err.code, m, before, err and err.message)
  before, m = sandbox_audit(), mark()
  local status, body = rest_call(name, args, READ_TOKEN)
  local e = type(body) == "table" and (body.error or body) or {}
  t.ok(status >= 400, "REST answered an error: " .. status)
  check("REST", e.code, m, before, e.message)
end

-- refused_record(m, action, caller): the refused record since m (action:
-- a name, or a list of the names it may have)
local function refused_record(m, action, caller)
  local names = type(action) == "table" and action or { action }
  local function named(rec)
    for _, n in ipairs(names) do if rec.aws == n or rec.k8s == n then return true end end
  end
  action = table.concat(names, " or ")
  for _, rec in ipairs(hypd_audit(m)) do
    if named(rec) and rec.refused == true and rec.outcome == "GUARDRAIL" then
      t.eq(rec.caller, caller, "the record names the caller")
      return rec
    end
  end
  t.ok(false, "a refused audit record for " .. action .. " since " .. m .. ": " .. json.encode(hypd_audit(m)))
end

local function guarded(action)
  return function(front, code, m, before, message)
    t.eq(code, "GUARDRAIL", front .. ": " .. tostring(message))
    t.eq(sandbox_audit(), before, front .. ": the sandbox saw no mutation")
    refused_record(m, action, front == "REST" and "rest-reader" or WHO.name)
  end
end

t.test("a read tool's hypd.http POST of Action=CreateVpc signed for ec2 is refused and recorded", function()
  both("diagnose_raw_vpc", { endpoint = SANDBOX }, guarded("ec2:CreateVpc"))
  local vpcs = aws.call("ec2", "DescribeVpcs", {}).Vpcs
  for _, v in ipairs(vpcs) do t.ok(v.CidrBlock ~= "10.77.0.0/16", "no VPC 10.77.0.0/16") end
end)

local victim = H.eks_cluster(function(s, o, p) return aws.call(s, o, p or {}) end, "hypd-victim", 74)

t.test("a read tool's hypd.http POST of a ConfigMap with an EKS token is refused; the API has no ConfigMap", function()
  local prep = require("hypd.aws.eks").prepare { cluster = "hypd-victim", region = "us-west-2" }
  local c = k8s.connect { cluster = "hypd-victim" } -- hypd has met the cluster: its token may go to its endpoint
  both("diagnose_raw_configmap", { server = victim.endpoint, ca = sys.b64decode(victim.certificateAuthority.data),
    sts_url = prep.sts_url, cluster = "hypd-victim" }, guarded { "create configmaps", "create ConfigMap" })
  local cm, err = c:get("v1", "ConfigMap", "smuggled", { namespace = "default" })
  t.eq({ cm, err and err.code }, { nil, "NotFound" }, "no ConfigMap smuggled")
end)

t.test("a read tool's signed DELETE /clusters/hypd-victim is refused; the cluster is still there", function()
  both("diagnose_cluster_delete", { endpoint = SANDBOX, cluster = "hypd-victim" }, guarded("eks:DeleteCluster"))
  t.eq(aws.call("eks", "DescribeCluster", { name = "hypd-victim" }).cluster.status, "ACTIVE")
end)

t.test("signed_json naming eks:DescribeCluster while sending TagResource is refused, naming both", function()
  both("diagnose_tag_as_describe", { endpoint = SANDBOX, arn = victim.arn }, function(front, code, m, before, msg)
    t.eq(code, "GUARDRAIL", front)
    t.like(msg or "", "says eks:DescribeCluster, but POST /tags/.* is eks:TagResource", front)
    t.eq(sandbox_audit(), before, front .. ": no TagResource reached the sandbox")
    refused_record(m, "eks:TagResource", front == "REST" and "rest-reader" or WHO.name)
  end)
  local tags = aws.call("eks", "DescribeCluster", { name = "hypd-victim" }).cluster.tags or {}
  t.eq(tags.smuggled, nil, "the cluster has no smuggled tag")
end)

t.test("signed_json naming ec2:DescribeVpcs with query Action=CreateVpc is refused, naming both", function()
  both("diagnose_vpc_as_describe", { endpoint = SANDBOX }, function(front, code, m, before, msg)
    t.eq(code, "GUARDRAIL", front)
    t.like(msg or "", "says ec2:DescribeVpcs, but POST / is ec2:CreateVpc", front)
    t.eq(sandbox_audit(), before, front .. ": no CreateVpc reached the sandbox")
    refused_record(m, "ec2:CreateVpc", front == "REST" and "rest-reader" or WHO.name)
  end)
end)

t.test("hypd.http.request with aws = {} is VALIDATION in the tool, and the server still answers", function()
  local _, err = dispatch.call("diagnose_empty_aws", { endpoint = SANDBOX }, WHO)
  t.eq(err and err.code, "VALIDATION")
  t.like(err and err.message or "", "field 'aws.service' is required")
  local status, body = rest_call("diagnose_empty_aws", { endpoint = SANDBOX }, READ_TOKEN)
  t.eq({ status, body and body.error and body.error.code or body and body.code }, { 400, "VALIDATION" })
  local h = assert(http.request { url = BASE .. "/api/v1/health", timeout = 5 })
  t.eq(h.status, 200, "health answers")
end)

t.test("http.request validates aws, eks, headers and numbers field by field", function()
  local cases = {
    { { url = SANDBOX, aws = { service = "ec2" } }, "aws.region", "is required" },
    { { url = SANDBOX, aws = { service = 1, region = "r" } }, "aws.service", "must be a string" },
    { { url = SANDBOX, aws = { service = "ec2", region = "r", bogus = true } }, "aws.bogus", "is unknown" },
    { { url = SANDBOX, aws = { service = "ec2", region = "r", sign_body = "yes" } }, "aws.sign_body", "boolean" },
    { { url = SANDBOX, eks = { cluster = "c", region = "r" } }, "eks.sts_url", "is required" },
    { { url = SANDBOX, eks = { cluster = "", region = "r", sts_url = "u" } }, "eks.cluster", "non%-empty" },
    { { url = SANDBOX, aws = { service = "ec2", region = "r" }, eks = { cluster = "c", region = "r", sts_url = "u" } },
      "eks", "cannot go with aws" },
    { { url = SANDBOX, headers = { [1] = "x" } }, "headers", "HTTP tokens" },
    { { url = SANDBOX, headers = { a = "b\r\nX-Amz-Target: x" } }, "headers.a", "without CR" },
    { { url = SANDBOX, headers = { ["X-A"] = "1", ["x-a"] = "2" } }, "headers.", "twice" },
    { { url = SANDBOX, max_body = 1.5 }, "max_body", "whole number" },
    { { url = SANDBOX, timeout = 0 / 0 }, "timeout", "finite" },
    { { url = SANDBOX, method = "GET / HTTP/1.1" }, "method", "letters only" },
    { { url = SANDBOX .. "/a b" }, "url", "without spaces" },
  }
  for _, c in ipairs(cases) do
    local r, err = http.request(c[1])
    t.eq({ r, err and err.code }, { nil, "VALIDATION" }, c[2])
    t.like(err and err.message or "", "field '" .. c[2]:gsub("%p", "%%%0") .. ".-" .. c[3], c[2])
  end
end)

t.test("what a tool declares goes through hypd.http; the sandbox's audit log and hypd's agree", function()
  local before, m = #sandbox_audit(), mark()
  t.eq(assert(dispatch.call("diagnose_raw_describe", { endpoint = SANDBOX }, WHO)).status, 200)
  local r = assert(dispatch.call("cluster_raw_make_vpc", { endpoint = SANDBOX }, ADMIN))
  t.eq(r.status, 200)
  local status = rest_call("cluster_raw_make_vpc", { endpoint = SANDBOX }, ADMIN_TOKEN)
  t.eq(status, 200)
  local saw = {}
  for i, a in ipairs(sandbox_audit()) do if i > before then saw[#saw + 1] = a end end
  local sent, reads = {}, 0
  for _, rec in ipairs(hypd_audit(m)) do
    t.eq(rec.refused, false, "sent, not refused: " .. tostring(rec.aws))
    if rec.class == "read" then reads = reads + 1 else sent[#sent + 1] = rec.aws end
    t.eq(rec.outcome, "ok")
  end
  t.eq(saw, { "ec2:CreateVpc", "ec2:CreateVpc" }, "what AWS saw")
  t.eq(sent, saw, "hypd's audit log has each mutation once")
  t.eq(reads, 1, "and the read, once")
end)

t.test("a signed request no model has is refused, unless the tool is destructive and declares raw", function()
  local _, err = dispatch.call("cluster_unmodelled", { endpoint = SANDBOX }, ADMIN)
  t.eq(err and err.code, "GUARDRAIL")
  t.like(err and err.message or "", "GET /no%-such%-thing signed for eks is no operation of its model")
  t.like(err and err.message or "", "raw = { \"eks\" }")
  local r = assert(dispatch.call("cluster_unmodelled_raw", { endpoint = SANDBOX }, ADMIN))
  t.ok(r.status >= 400, "sent (the sandbox answers what it answers: " .. r.status .. ")")
  local ok, derr = pcall(tool.define, { name = "diagnose_raw_reader", summary = "s", description = "d", kind = "read",
    raw = { "eks" }, run = function() end })
  t.eq(ok, false)
  t.like(tostring(derr), "only a destructive tool declares it")
end)

t.test("the classifier reads the operation from the request: query, form, target and REST", function()
  local function op(method, url, o)
    o = o or {}
    local c, why = aws_classify.request { method = method, url = url, body = o.body, headers = o.headers,
      aws = { service = o.service, region = "us-west-2" } }
    if not c then return "none: " .. why end
    local names = {}
    for _, x in ipairs(c.candidates) do names[#names + 1] = x.service .. ":" .. x.operation end
    return table.concat(names, "|") .. " " .. c.class
  end
  local E = "https://ec2.us-west-2.amazonaws.com/"
  t.eq(op("POST", E, { service = "ec2", body = "Action=DescribeVpcs&Version=2016-11-15" }), "ec2:DescribeVpcs read")
  t.eq(op("GET", E .. "?Action=DeleteVpc&VpcId=v", { service = "ec2" }), "ec2:DeleteVpc deleting")
  t.eq(op("POST", E .. "?Act%69on=CreateVpc", { service = "ec2" }), "ec2:CreateVpc mutating", "escapes decoded")
  t.like(op("POST", E .. "?Action=DescribeVpcs", { service = "ec2", body = "Action=CreateVpc" }),
    "^none: it names more than one Action")
  t.like(op("POST", E .. "?Action=DescribeVpcs&action=CreateVpc", { service = "ec2" }),
    "^none: it names more than one Action", "whatever the key's case")
  t.eq(op("POST", "https://api.sagemaker.us-west-2.amazonaws.com/", { service = "sagemaker",
    headers = { ["X-Amz-Target"] = "SageMaker.DeleteCluster" } }), "sagemaker:DeleteCluster deleting")
  t.like(op("POST", "https://api.sagemaker.us-west-2.amazonaws.com/", { service = "sagemaker" }), "^none:")
  local K = "https://eks.us-west-2.amazonaws.com"
  t.eq(op("GET", K .. "/clusters/x", { service = "eks" }), "eks:DescribeCluster read")
  t.eq(op("DELETE", K .. "/clust%65rs/x", { service = "eks" }), "eks:DeleteCluster deleting")
  t.eq(op("GET", K .. "/clusters", { service = "eks" }), "eks:ListClusters read")
  t.eq(op("POST", K .. "/tags/arn%3Aaws%3Aeks", { service = "eks" }), "eks:TagResource mutating")
  t.like(op("DELETE", K .. "/clusters/x/../y", { service = "eks" }), "^none: its path has a '%.'")
  t.eq(op("GET", "https://s3.us-west-2.amazonaws.com/b?tagging", { service = "s3" }), "s3:GetBucketTagging read")
  t.eq(op("GET", "https://s3.us-west-2.amazonaws.com/b?list-type=2", { service = "s3" }), "s3:ListObjectsV2 read")
  t.eq(op("PUT", "https://b.s3.us-west-2.amazonaws.com/k/x.txt", { service = "s3" }), "s3:PutObject mutating")
  t.eq(op("DELETE", "http://127.0.0.1:9/b/k", { service = "s3" }), "s3:DeleteObject deleting")
  t.eq(op("GET", "https://s3.us-west-2.amazonaws.com/", { service = "s3" }), "s3:ListBuckets|s3:ListDirectoryBuckets read",
    "a tie the model cannot break: both, and the guard needs one declared")
  t.eq(op("GET", "https://x/api/2.0/mlflow/runs/get?run_id=1", { service = "sagemaker-mlflow" }),
    "sagemaker-mlflow:GetRun read")
  t.like(op("POST", "https://x/api/2.0/mlflow/runs/delete", { service = "sagemaker-mlflow" }), "^none:")
  t.like(op("GET", E, { service = "bogus" }), "^none: it signs for 'bogus'")
end)

t.test("the classifier reads the Kubernetes verb from method, path, query and content type", function()
  local function verb(method, path, ctype)
    local c, why = k8s_classify.request(method, "https://k" .. path, { ["content-type"] = ctype })
    if not c then return "none: " .. why end
    if c.verb == "discover" then return "discover " .. c.what end
    return c.verb .. (c.dry and " dry" or "") .. " " .. c.resource .. (c.name and ("/" .. c.name) or "") ..
      (c.sub and c.verb == "create" and ("/" .. c.sub) or "")
  end
  local cases = {
    { "GET", "/api/v1/namespaces/default/pods/p", nil, "get pods/p" },
    { "GET", "/api/v1/namespaces/default/pods", nil, "list pods" },
    { "GET", "/api/v1/pods?watch=true", nil, "watch pods" },
    { "GET", "/api/v1/watch/namespaces/default/pods", nil, "watch pods" },
    { "GET", "/api/v1/namespaces/default/pods/p/log?follow=true", nil, "logs pods/p" },
    { "POST", "/api/v1/namespaces/default/services/http:s:80/proxy/x", nil, "proxy services/http:s:80" },
    { "POST", "/api/v1/namespaces/default/configmaps", "application/json", "create configmaps" },
    { "PUT", "/apis/apps/v1/namespaces/d/deployments/x", nil, "update deployments/x" },
    { "PATCH", "/apis/apps/v1/namespaces/d/deployments/x", "application/apply-patch+yaml", "apply deployments/x" },
    { "PATCH", "/apis/apps/v1/namespaces/d/deployments/x?dryRun=All", "application/apply-patch+yaml",
      "apply dry deployments/x" },
    { "PATCH", "/apis/apps/v1/namespaces/d/deployments/x", "application/merge-patch+json", "patch deployments/x" },
    { "DELETE", "/api/v1/namespaces/default", nil, "delete namespaces/default" },
    { "DELETE", "/api/v1/namespaces/d/configmaps", nil, "delete configmaps" },
    { "GET", "/api/v1/namespaces/d/pods/p/exec?command=sh", nil, "create pods/p/exec" },
    { "GET", "/apis/apps/v1", nil, "discover /apis/apps/v1" },
    { "POST", "/apis/apps/v1", nil, "none: POST /apis/apps/v1 is no Kubernetes resource path" },
    { "OPTIONS", "/api/v1/pods", nil, "none: the method OPTIONS is no Kubernetes verb" },
  }
  for _, c in ipairs(cases) do t.eq(verb(c[1], c[2], c[3]), c[4], c[1] .. " " .. c[2]) end
  k8s_classify.learn("v1", "widgets", "Widget")
  t.eq(k8s_classify.request("DELETE", "https://k/api/v1/namespaces/d/widgets/x").what, "Widget/x",
    "named by its kind once discovered")
end)

t.test("http.stream and a kubeconfig token's requests pass the same chokepoint; the token stays in hypd.k8s", function()
  local guard = require "hypd.tool.guard"
  local g = guard.new { tool = { name = "diagnose_streamer", kind = "read", aws = { "eks:DescribeCluster" },
    k8s = { "get", "list", "watch" } }, caller = WHO }
  -- port 1: were either sent, it would fail with CONNECT, not GUARDRAIL
  local s, err = guard.with(g, http.stream, { method = "DELETE", url = "http://127.0.0.1:1/clusters/x",
    aws = { service = "eks", region = "us-west-2" } })
  t.eq({ s, err and err.code }, { nil, "GUARDRAIL" }, "a stream signed for eks:DeleteCluster")
  local r, kerr = guard.with(g, http.request, { method = "DELETE", url = "http://127.0.0.1:1/api/v1/namespaces/x",
    kubernetes = true, headers = { authorization = "Bearer not-a-real-token" } })
  t.eq({ r, kerr and kerr.code }, { nil, "GUARDRAIL" }, "a kubeconfig-token delete")
  t.like(kerr and kerr.message or "", "diagnose_streamer may not call kubernetes delete [Nn]amespaces?/x: a read tool")
  local _, cerr = guard.with(g, http.request, { url = "http://127.0.0.1:1/api/v1/namespaces", kubernetes = true })
  t.eq(cerr and cerr.code, "CONNECT", "a declared list is sent")
  local kc = dir .. "/kubeconfig"
  H.write(kc, json.encode { apiVersion = "v1", kind = "Config", ["current-context"] = "x",
    clusters = { { name = "x", cluster = { server = "http://127.0.0.1:1" } } },
    users = { { name = "x", user = { token = "kubeconfig-secret" } } },
    contexts = { { name = "x", context = { cluster = "x", user = "x" } } } })
  local c = k8s.from_kubeconfig { path = kc }
  for k, v in pairs(c) do t.ok(not tostring(v):find("kubeconfig-secret", 1, true), "not in the connection's " .. k) end
  t.eq(c.http_req, nil, "no method hands out a request with the token")
end)

t.test("an EKS token goes only to the API server of its cluster, whatever verb the request is", function()
  local guard = require "hypd.tool.guard"
  local g = guard.new { tool = { name = "diagnose_exfil", kind = "read", aws = { "eks:DescribeCluster" },
    k8s = { "get", "list" } }, caller = WHO }
  local prep = require("hypd.aws.eks").prepare { cluster = "hypd-victim", region = "us-west-2" }
  local m = mark()
  -- port 1: had the token been sent, this would be CONNECT
  local r, err = guard.with(g, http.request, { url = "http://127.0.0.1:1/api/v1/namespaces",
    eks = { cluster = "hypd-victim", region = "us-west-2", sts_url = prep.sts_url } })
  t.eq({ r, err and err.code }, { nil, "GUARDRAIL" })
  t.like(err and err.message or "", "may not send the EKS token of cluster hypd%-victim to http://127%.0%.0%.1:1")
  refused_record(m, "token for hypd-victim to http://127.0.0.1:1/api/v1/namespaces", WHO.name)
  local c = k8s.connect { cluster = "hypd-victim" }
  c.server = "http://127.0.0.1:1" -- a playbook holding a connection can change its fields
  local _, cerr = guard.with(g, c.list, c, "v1", "Namespace")
  t.eq(cerr and cerr.code, "GUARDRAIL", "a connection pointed elsewhere sends nothing")
end)
