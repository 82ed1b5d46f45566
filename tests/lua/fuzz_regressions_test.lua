-- Inputs the fuzz targets (tests/fuzz/lua_targets.lua) found, checked
-- against each function's contract without the fuzzer: each one is also
-- in tests/fuzz/corpus/lua_<target>/, so the fuzz smoke pass replays it.
local t = require "hypd.tap"
local auth = require "sandbox.auth"
local core = require "hypd.core"
local k8sauth = require "sandbox.k8s.auth"
local protobuf = require "sandbox.k8s.protobuf"
local sys = require "hypd.sys"

local function stamp() return os.date("!%Y%m%dT%H%M%SZ", math.floor(core.now())) end

t.test("sandbox SigV4: an access key ID with a NUL byte is an unknown key, not an error out of verify", function()
  local q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%00ID%2F20150830%2Fus-east-1%2Fsts%2Faws4_request" ..
    "&X-Amz-Date=20150830T123600Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=abc"
  local ok, p, err = pcall(auth.verify, { method = "GET", path = "/", query = q, headers = { host = "sts.amazonaws.com" },
    body = "" }, "query")
  t.ok(ok, "verify returns: " .. tostring(not ok and p or ""))
  t.eq(p, nil)
  t.eq(type(err) == "table" and err.code, "InvalidClientTokenId")
  ok, p, err = pcall(auth.verify, { method = "POST", path = "/", query = "", body = "{}", headers = {
    host = "sagemaker.us-west-2.amazonaws.com", ["x-amz-date"] = "20150830T123600Z",
    authorization = "AWS4-HMAC-SHA256 Credential=AKID\0X/20150830/us-west-2/sagemaker/aws4_request, " ..
      "SignedHeaders=host;x-amz-date, Signature=5fa0" } }, "json")
  t.ok(ok, "verify returns for a NUL in the Authorization header's key: " .. tostring(not ok and p or ""))
  t.eq(p, nil)
  t.eq(type(err) == "table" and type(err.code), "string")
end)

t.test("EKS token: a presigned URL whose credential holds a NUL byte is refused with a reason", function()
  local url = "https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15" ..
    "&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%01%00AMPLE%2F20260101%2Fus-west-2%2Fsts%2Faws4_request" ..
    "&X-Amz-Date=" .. stamp() .. "&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&X-Amz-Signature=00"
  local tok = "Bearer k8s-aws-v1." .. sys.b64encode(url):gsub("+", "-"):gsub("/", "_"):gsub("=", "")
  local ok, p, why = pcall(k8sauth.token, tok, "fuzz")
  t.ok(ok, "token returns: " .. tostring(not ok and p or ""))
  t.eq(p, nil)
  t.eq(type(why), "string")
end)

t.test("k8s protobuf: an apiVersion whose group starts with '.' names no message, it does not raise", function()
  local ok, full = pcall(protobuf.for_kind, ".pps/v1", "Deployment")
  t.ok(ok, "for_kind returns: " .. tostring(not ok and full or ""))
  t.eq(full, nil)
  -- the envelope: typeMeta {apiVersion ".pps/v1", kind "Deployment"}, raw ""
  local body = "k8s\0\x0a\x15\x0a\x07.pps/v1\x12\x0aDeployment\x12\x00"
  local dok, obj, why = pcall(protobuf.decode, body)
  t.ok(dok, "decode returns: " .. tostring(not dok and obj or ""))
  t.eq(obj, nil)
  t.like(why, "no protobuf message for .pps/v1, Kind=Deployment")
end)
