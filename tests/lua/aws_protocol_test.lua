-- The AWS wire protocols against recorded boto3 traffic: for every pair in
-- tests/data/aws/recorded/ (made by mk/record_botocore.py), hypd
-- must build the request boto3 sent and parse the canned response into
-- what boto3 returned. Then the rules the recordings do not show:
-- validation, idempotency tokens, checksums, timestamps, odd answers.
local t = require "hypd.tap"
local json = require "hypd.json"
local protocol = require "hypd.aws.protocol"
local S = require "hypd.aws.shape"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local DIR = "tests/data/aws/recorded"

local function model(service) return require("hypd.aws.models." .. service) end

local function unescape(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- decoded, sorted [k, v] pairs of a query string or form body
local function pairs_of(s)
  local out = {}
  for part in s:gmatch("[^&]+") do
    local k, v = part:match("^([^=]*)=(.*)$")
    out[#out + 1] = { unescape(k or part), unescape(v or "") }
  end
  table.sort(out, function(a, b) return a[1] < b[1] or a[1] == b[1] and a[2] < b[2] end)
  return out
end

local function recorded()
  local _, out = H.sh("ls " .. DIR)
  local files = {}
  for name in out:gmatch("[^\n]+") do
    if name:match("%.json$") then files[#files + 1] = name end
  end
  return files
end

local function label(pair, file)
  local case = file:match("^[^-]+%-[^-]+%-(.+)%.json$")
  return pair.service .. " " .. pair.operation .. (case and " (" .. case .. ")" or "")
end

local files = recorded()
t.test("there are recorded boto3 pairs for every protocol", function()
  local protocols = {}
  for _, f in ipairs(files) do
    protocols[model(f:match("^([^-]+)")).metadata.protocol] = true
  end
  t.eq(protocols, { json = true, ["rest-json"] = true, query = true, ec2 = true, ["rest-xml"] = true })
  t.ok(#files >= 25, "at least 25 pairs, got " .. #files)
end)

for _, file in ipairs(files) do
  local pair = assert(json.decode(assert(H.read(DIR .. "/" .. file))))
  local m = model(pair.service)
  local name = label(pair, file)

  t.test(name .. " builds the request boto3 sends", function()
    local req, err = protocol.build(m, pair.operation, pair.params)
    t.eq(err, nil)
    local want = pair.request
    t.eq(req.method, want.method, "method")
    t.eq(req.path, want.path, "path")
    t.eq(req.query, want.query_string, "query string")
    t.eq(pairs_of(req.query), want.query, "query pairs")
    local headers = {}
    for k, v in pairs(req.headers) do headers[k] = v end
    if headers["content-md5"] then
      t.eq(headers["content-md5"], sys.digest("md5", req.body, "base64"), "content-md5")
      headers["content-md5"] = nil
    end
    t.eq(headers, want.headers, "headers")
    if want.json then
      t.eq(json.decode(req.body), want.json, "JSON body")
    elseif (want.headers["content-type"] or ""):find("form%-urlencoded") then
      t.eq(pairs_of(req.body), pairs_of(want.body), "form pairs")
      t.eq(req.body, want.body, "form body")
    else
      t.eq(req.body, want.body, "body")
    end
    if pair.service == "s3" then t.eq(req.bucket, pair.params.Bucket, "bucket") end
  end)

  t.test(name .. " parses the response as boto3 does", function()
    local result, err = protocol.parse(m, pair.operation, pair.response)
    if pair.parsed then
      t.eq(err, nil)
      t.eq(result, pair.parsed)
    else
      t.fails(result, err, pair.error.code)
      t.eq({ code = err.code, message = err.message, status = err.status, request_id = err.request_id,
        type = err.type }, pair.error)
    end
  end)
end

-- --- validation ------------------------------------------------------------

local sagemaker, eks, s3, ec2, iam = model("sagemaker"), model("eks"), model("s3"), model("ec2"), model("iam")

t.test("an unknown parameter fails with VALIDATION naming it and the valid members", function()
  local req, err = protocol.build(sagemaker, "DescribeCluster", { ClusterName = "a", Colour = "red" })
  t.fails(req, err, "VALIDATION")
  t.eq(err.field, "Colour")
  t.like(err.message, "unknown member %(valid: ClusterName%)")
end)

t.test("a parameter of the wrong type fails naming its full path", function()
  local req, err = protocol.build(sagemaker, "CreateCluster", { ClusterName = "hp",
    InstanceGroups = { { InstanceGroupName = "w", InstanceType = "ml.g5.8xlarge", InstanceCount = "2",
      LifeCycleConfig = { SourceS3Uri = "s3://b/", OnCreate = "x.sh" }, ExecutionRole = "arn" } } })
  t.fails(req, err, "VALIDATION")
  t.eq(err.field, "InstanceGroups[1].InstanceCount")
  t.like(err.message, "must be an integer")
end)

t.test("a missing required member fails naming it", function()
  local req, err = protocol.build(sagemaker, "DescribeCluster", {})
  t.fails(req, err, "VALIDATION")
  t.eq(err.field, "ClusterName")
  t.like(err.message, "is required")
  t.ok(protocol.build(ec2, "DescribeSubnets", { Filters = { { Values = { "x" } } } }), "Filter.Name is optional")
  req, err = protocol.build(eks, "DescribeCluster", {})
  t.fails(req, err, "VALIDATION")
  t.eq(err.field, "name")
end)

t.test("an empty URI label fails instead of building a different path", function()
  local req, err = protocol.build(eks, "DescribeCluster", { name = "" })
  t.fails(req, err, "VALIDATION")
  t.eq(err.field, "name")
  t.like(err.message, "part of the URI")
end)

t.test("lists, maps and structures are told apart", function()
  local _, err = protocol.build(ec2, "DescribeSubnets", { SubnetIds = "subnet-1" })
  t.eq({ err.code, err.field }, { "VALIDATION", "SubnetIds" })
  _, err = protocol.build(eks, "TagResource", { resourceArn = "arn", tags = { "a" } })
  t.eq(err.field, "tags")
  _, err = protocol.build(eks, "CreateCluster", { name = "x", roleArn = "r", resourcesVpcConfig = "subnet" })
  t.eq(err.field, "resourcesVpcConfig")
  _, err = protocol.build(sagemaker, "ListClusters", { CreationTimeAfter = "yesterday" })
  t.eq(err.field, "CreationTimeAfter")
  t.like(err.message, "timestamp")
end)

t.test("an unknown operation fails with VALIDATION", function()
  local req, err = protocol.build(eks, "DescribeClusterz", {})
  t.fails(req, err, "VALIDATION")
  t.eq(err.field, "operation")
end)

-- --- request details ---------------------------------------------------------

t.test("a missing idempotency token is filled with a UUID v4 and reported", function()
  local req = assert(protocol.build(eks, "CreateAddon", { clusterName = "eks1", addonName = "vpc-cni" }))
  t.eq(req.idempotency_token_filled, true)
  t.like(json.decode(req.body).clientRequestToken, "^%x+%-%x+%-4%x+%-[89ab]%x+%-%x+$")
  local again = assert(protocol.build(eks, "CreateAddon", { clusterName = "eks1", addonName = "vpc-cni",
    clientRequestToken = "mine" }))
  t.eq(again.idempotency_token_filled, nil)
  t.eq(json.decode(again.body).clientRequestToken, "mine")
end)

t.test("a built request carries its operation's class: read, mutating or deleting", function()
  t.eq(assert(protocol.build(eks, "DescribeCluster", { name = "a" })).class, "read")
  t.eq(assert(protocol.build(iam, "ListRoles", {})).class, "read")
  t.eq(assert(protocol.build(iam, "CreateRole", { RoleName = "r", AssumeRolePolicyDocument = "{}" })).class, "mutating")
  t.eq(assert(protocol.build(eks, "DeleteCluster", { name = "a" })).class, "deleting")
end)

t.test("an operation that requires a checksum gets Content-MD5 of its body", function()
  local req = assert(protocol.build(s3, "PutBucketLifecycleConfiguration", { Bucket = "b",
    LifecycleConfiguration = { Rules = { { ID = "r", Status = "Enabled", Filter = { Prefix = "tmp/" },
      Expiration = { Days = 7 } } } } }))
  t.eq(req.headers["content-md5"], sys.digest("md5", req.body, "base64"))
  t.like(req.body, '^<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006%-03%-01/"><Rule>')
  t.eq(req.path, "/b")
  t.eq(req.query, "lifecycle")
end)

t.test("S3 keys keep their slashes and the bucket is named for virtual hosting", function()
  local req = assert(protocol.build(s3, "GetObject", { Bucket = "my.bucket", Key = "a/b c/ü?.txt" }))
  t.eq(req.path, "/my.bucket/a/b%20c/%C3%BC%3F.txt")
  t.eq(req.bucket, "my.bucket")
end)

t.test("timestamps are sent in each protocol's format", function()
  local body = json.decode(assert(protocol.build(sagemaker, "ListClusters",
    { CreationTimeAfter = "2023-11-14T23:13:20+01:00" })).body)
  t.eq(body.CreationTimeAfter, 1700000000)
  body = json.decode(assert(protocol.build(sagemaker, "ListClusters", { CreationTimeAfter = 1700000000.25 })).body)
  t.eq(body.CreationTimeAfter, 1700000000.25)
  local req = assert(protocol.build(ec2, "DescribeSpotPriceHistory", { StartTime = 1700000000 }))
  t.like(req.body, "StartTime=2023%-11%-14T22%%3A13%%3A20Z")
  req = assert(protocol.build(s3, "GetObject", { Bucket = "b", Key = "k", IfModifiedSince = 1700000000 }))
  t.eq(req.headers["if-modified-since"], "Tue, 14 Nov 2023 22:13:20 GMT")
end)

t.test("the query protocol sends an empty list as an empty value", function()
  local req = assert(protocol.build(model("cloudformation"), "UpdateStack", { StackName = "s", Capabilities = {} }))
  t.like(req.body, "&Capabilities=&?")
end)

t.test("an operation with a host prefix reports it", function()
  local req = assert(protocol.build(model("logs"), "GetLogObject", { logObjectPointer = "p" }))
  t.eq(req.host_prefix, "stream-")
end)

-- --- responses -----------------------------------------------------------------

t.test("timestamps come back as UTC ISO 8601 with milliseconds only when present", function()
  t.eq(S.output_timestamp(1700000000), "2023-11-14T22:13:20Z")
  t.eq(S.output_timestamp(1700000000.123), "2023-11-14T22:13:20.123Z")
  t.eq(S.output_timestamp("2023-11-14T23:13:20.5+01:00"), "2023-11-14T22:13:20.500Z")
  t.eq(S.output_timestamp("Tue, 14 Nov 2023 22:13:20 GMT"), "2023-11-14T22:13:20Z")
  t.eq(S.output_timestamp("1700000000"), "2023-11-14T22:13:20Z")
  t.eq(S.output_timestamp("1969-12-31T23:59:59Z"), "1969-12-31T23:59:59Z")
end)

t.test("a 503 with an HTML body is an error named by its status", function()
  local _, err = protocol.parse(iam, "ListRoles", { status = 503, headers = {}, body = "<html><body>busy" })
  t.eq({ err.code, err.status, err.message }, { "503", 503, "Service Unavailable" })
  _, err = protocol.parse(sagemaker, "ListClusters", { status = 502, headers = {}, body = "Bad Gateway" })
  t.eq({ err.code, err.status }, { "502", 502 })
end)

t.test("a JSON error named only by a header keeps the header's code", function()
  local _, err = protocol.parse(sagemaker, "ListClusters", { status = 400,
    headers = { ["x-amzn-errortype"] = "ThrottlingException:http://x" }, body = "" })
  t.eq(err.code, "ThrottlingException")
end)

t.test("S3 answering 200 with an <Error> body is an error", function()
  local _, err = protocol.parse(s3, "CopyObject", { status = 200, headers = { ["x-amz-request-id"] = "R" },
    body = "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>" })
  t.eq({ err.code, err.status, err.request_id }, { "InternalError", 200, "R" })
end)

t.test("a successful answer that is not XML fails with XML, not a crash", function()
  local r, err = protocol.parse(iam, "ListRoles", { status = 200, headers = {}, body = "<ListRolesResponse>" })
  t.fails(r, err, "XML")
end)

t.test("JSON nulls in answers are absent members", function()
  local r = assert(protocol.parse(eks, "ListAddons", { status = 200, headers = {},
    body = '{"addons":[],"nextToken":null}' }))
  t.eq(r.nextToken, nil)
  t.ok(json.is_array(r.addons), "an empty list stays a list")
  t.eq(json.encode(r), '{"addons":[]}')
end)

-- --- the XML module ----------------------------------------------------------

local xml = require "hypd.xml"

t.test("xml.decode keeps leaf text exactly and drops indentation between elements", function()
  local root = assert(xml.decode('<?xml version="1.0"?>\n<a:R xmlns:a="urn:x" k="v">\n  <B>  x &amp; y ' ..
    '<![CDATA[<z>]]> </B>\n  <C/>\n</a:R>'))
  t.eq(root.name, "R")
  t.eq(root.attrs, { ["xmlns:a"] = "urn:x", k = "v" })
  t.eq(root.text, nil)
  t.eq({ root[1].name, root[1].text, root[2].name, root[2].text, #root }, { "B", "  x & y <z> ", "C", "", 2 })
end)

t.test("xml.decode refuses malformed XML, DOCTYPEs and deep nesting with a position", function()
  local r, err = xml.decode("<a>\n<b></a>")
  t.fails(r, err, "XML")
  t.eq({ err.line, err.column }, { 2, 6 })
  t.like(err.message, "^line 2, column 6: mismatched tag")
  r, err = xml.decode('<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>')
  t.like(t.fails(r, err, "XML").message, "DOCTYPE")
  r, err = xml.decode(string.rep("<a>", 257) .. string.rep("</a>", 257))
  t.fails(r, err, "XML")
  t.like(err.message, "deeper than 256")
  t.ok(xml.decode(string.rep("<a>", 256) .. string.rep("</a>", 256)), "256 levels are fine")
  r, err = xml.decode("")
  t.fails(r, err, "XML")
end)

-- --- every operation of every model ------------------------------------------

local SERVICES = { "sagemaker", "eks", "ec2", "iam", "sts", "s3", "fsx", "cloudformation", "ssm", "logs" }

t.test("every operation of every model builds from no parameters or names the missing one", function()
  local built, refused = 0, 0
  for _, service in ipairs(SERVICES) do
    local m = model(service)
    for name in pairs(m.operations) do
      local ok, req, err = pcall(protocol.build, m, name, {})
      t.ok(ok, service .. " " .. name .. " raised " .. tostring(req))
      if req then
        built = built + 1
        t.eq(type(req.body), "string")
      else
        refused = refused + 1
        t.eq(err.code, "VALIDATION", service .. " " .. name)
        t.ok(err.field, service .. " " .. name .. " names a field")
      end
    end
  end
  t.ok(built > 400 and refused > 1000, built .. " built, " .. refused .. " refused")
end)

t.test("every operation of every model parses an empty success and an error without raising", function()
  local bodies = { json = "{}", ["rest-json"] = "{}", query = "<R><XResult/></R>", ec2 = "<R/>", ["rest-xml"] = "" }
  for _, service in ipairs(SERVICES) do
    local m = model(service)
    local body = bodies[m.metadata.protocol]
    for name in pairs(m.operations) do
      local ok, r = pcall(protocol.parse, m, name, { status = 200, headers = {}, body = body })
      t.ok(ok and r, service .. " " .. name .. ": " .. tostring(r))
      local _, err = protocol.parse(m, name, { status = 500, headers = {}, body = "" })
      t.eq(err.code, "500", service .. " " .. name)
    end
  end
end)
