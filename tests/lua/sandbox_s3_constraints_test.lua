-- S3 refuses the model's enums in its own words, one at a time, before any
-- handler (sandbox._codec_s3_rules): a bad x-amz-storage-class is
-- InvalidStorageClass, a bad x-amz-server-side-encryption, encoding-type or
-- max-keys InvalidArgument naming the argument, a bad LocationConstraint
-- InvalidLocationConstraint, and an enum outside its set in a configuration
-- body MalformedXML. Through boto3 (its parameter validation off), the aws
-- CLI (which does not check enums) and a raw signed request for the XML.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local env, pid = H.sandbox_process(dir)
t.cleanup(function()
  if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)

-- boto(op, params) -> { code, message, error = the parsed <Error>, status },
-- or { result } when S3 answered 200
local function boto(op, params)
  local path = dir .. "/one.py"
  H.write(path, string.format([[
import json, os, boto3
from botocore.config import Config
from botocore.exceptions import ClientError
c = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                 config=Config(parameter_validation=False, retries={"max_attempts": 1}))
try:
    r = getattr(c, %q)(**json.loads(%q))
    r.pop("ResponseMetadata", None)
    print(json.dumps({"result": r}, default=str))
except ClientError as e:
    print(json.dumps({"code": e.response["Error"]["Code"], "message": e.response["Error"].get("Message"),
                      "error": e.response["Error"],
                      "status": e.response["ResponseMetadata"]["HTTPStatusCode"]}))
]], op, json.encode(params)))
  local rc, out, err = H.with_env(env, dir, "python3 " .. H.quote(path))
  assert(rc == 0, err)
  return json.decode(out)
end

-- cli(args) -> rc, what the aws CLI printed (stdout and stderr)
local function cli(args)
  local rc, out, err = H.with_env(env, dir, "aws s3api " .. args)
  return rc, (out or "") .. (err or "")
end

t.test("the sandbox started and has a bucket", function()
  t.ok(env ~= nil, "hypd sandbox printed its environment")
  local r = boto("create_bucket", { Bucket = "strict-b", CreateBucketConfiguration = {
    LocationConstraint = "us-west-2" } })
  t.eq(r.code, nil, r.message)
end)

t.test("a storage class outside the model's set is InvalidStorageClass, and nothing is stored", function()
  local r = boto("put_object", { Bucket = "strict-b", Key = "k", Body = "x", StorageClass = "FAST" })
  t.eq(r.code, "InvalidStorageClass")
  t.eq(r.message, "The storage class you specified is not valid.")
  t.eq(r.status, 400)
  t.eq(boto("head_object", { Bucket = "strict-b", Key = "k" }).code, "404")
  -- a class of the set is stored and read back
  t.eq(boto("put_object", { Bucket = "strict-b", Key = "ia", Body = "x", StorageClass = "STANDARD_IA" }).code, nil)
  local h = boto("head_object", { Bucket = "strict-b", Key = "ia" })
  t.eq(h.code, nil, h.message)
end)

t.test("a bad encryption header or encoding-type is InvalidArgument naming the argument and its value", function()
  local r = boto("put_object", { Bucket = "strict-b", Key = "k", Body = "x", ServerSideEncryption = "AES-256" })
  t.eq(r.code, "InvalidArgument")
  t.eq(r.message, "The encryption method specified is not supported")
  t.eq(r.error.ArgumentName, "x-amz-server-side-encryption")
  t.eq(r.error.ArgumentValue, "AES-256")
  for _, op in ipairs { "list_objects_v2", "list_objects", "list_object_versions" } do
    r = boto(op, { Bucket = "strict-b", EncodingType = "xml" })
    t.eq(r.code, "InvalidArgument", op)
    t.eq(r.message, "Invalid Encoding Method specified in Request", op)
    t.eq(r.error.ArgumentName, "encoding-type", op)
    t.eq(r.error.ArgumentValue, "xml", op)
  end
  t.eq(boto("list_objects_v2", { Bucket = "strict-b", EncodingType = "url" }).code, nil, "url is the one encoding")
end)

t.test("a LocationConstraint outside the model's regions is InvalidLocationConstraint", function()
  local r = boto("create_bucket", { Bucket = "strict-mars", CreateBucketConfiguration = {
    LocationConstraint = "mars-north-1" } })
  t.eq(r.code, "InvalidLocationConstraint")
  t.eq(r.message, "The specified location-constraint is not valid")
  t.eq(r.error.LocationConstraint, "mars-north-1")
  t.eq(boto("head_bucket", { Bucket = "strict-mars" }).code, "404")
end)

t.test("an enum outside its set in a configuration body is MalformedXML", function()
  local r = boto("put_bucket_versioning", { Bucket = "strict-b", VersioningConfiguration = { Status = "On" } })
  t.eq(r.code, "MalformedXML")
  t.eq(r.message, "The XML you provided was not well-formed or did not validate against our published schema")
  r = boto("put_bucket_versioning", { Bucket = "strict-b", VersioningConfiguration = { MFADelete = "Yes" } })
  t.eq(r.code, "MalformedXML", "MFADelete too")
  t.eq(boto("get_bucket_versioning", { Bucket = "strict-b" }).result.Status, nil, "versioning left alone")
end)

t.test("a max-keys that is not an integer of 0..2147483647 is InvalidArgument maxKeys", function()
  for _, case in ipairs { { "list_objects_v2", -1, "-1" }, { "list_objects", "abc", "abc" },
    { "list_object_versions", 2147483648, "2147483648" } } do
    local r = boto(case[1], { Bucket = "strict-b", MaxKeys = case[2] })
    t.eq(r.code, "InvalidArgument", case[1])
    t.eq(r.message, "Argument maxKeys must be an integer between 0 and 2147483647", case[1])
    t.eq(r.error.ArgumentName, "maxKeys", case[1])
    t.eq(r.error.ArgumentValue, case[3], case[1])
  end
  -- 0 is an empty page, not truncated (there are objects: "ia" above)
  local r = boto("list_objects_v2", { Bucket = "strict-b", MaxKeys = 0 })
  t.eq(r.code, nil, r.message)
  t.eq(r.result.KeyCount, 0, "max-keys 0 is an empty page")
  t.eq(r.result.IsTruncated, false)
  r = boto("list_object_versions", { Bucket = "strict-b", MaxKeys = 0 })
  t.eq(r.code, nil, r.message)
  t.eq(r.result.Versions, nil, "no versions listed")
  t.eq(r.result.IsTruncated, false)
  r = boto("list_objects_v2", { Bucket = "strict-b", MaxKeys = 2147483647 })
  t.eq(r.code, nil, r.message)
end)

t.test("the aws CLI sees S3's code and words", function()
  H.write(dir .. "/body.txt", "hello")
  local rc, out = cli("put-object --bucket strict-b --key cli --storage-class FAST --body " ..
    H.quote(dir .. "/body.txt"))
  t.ok(rc ~= 0, "the CLI failed")
  t.like(out, "An error occurred %(InvalidStorageClass%) when calling the PutObject operation: " ..
    "The storage class you specified is not valid%.")
  rc, out = cli("list-objects-v2 --bucket strict-b --encoding-type xml")
  t.ok(rc ~= 0, "the CLI failed")
  t.like(out, "An error occurred %(InvalidArgument%) when calling the ListObjectsV2 operation: " ..
    "Invalid Encoding Method specified in Request")
  rc, out = cli("put-object --bucket strict-b --key cli --storage-class GLACIER_IR --body " ..
    H.quote(dir .. "/body.txt"))
  t.eq(rc, 0, out)
end)

t.test("the answer is S3's <Error> document", function()
  local path = dir .. "/raw.py"
  H.write(path, [[
import os, urllib.request, urllib.error
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
url = os.environ["AWS_ENDPOINT_URL"] + "/strict-b/raw"
req = AWSRequest(method="PUT", url=url, data=b"x", headers={"x-amz-storage-class": "FAST"})
S3SigV4Auth(Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]), "s3",
            os.environ.get("AWS_REGION", "us-west-2")).add_auth(req)
r = urllib.request.Request(url, data=b"x", headers=dict(req.headers.items()), method="PUT")
try:
    print(urllib.request.urlopen(r).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("content-type"), e.read().decode())
]])
  local rc, out, err = H.with_env(env, dir, "python3 " .. H.quote(path))
  t.eq(rc, 0, err)
  t.like(out, "^400 application/xml ")
  t.like(out, "<Error><Code>InvalidStorageClass</Code><Message>The storage class you specified is not valid%.</Message>")
  t.like(out, "<RequestId>[^<]+</RequestId><HostId>[^<]+</HostId></Error>")
end)
