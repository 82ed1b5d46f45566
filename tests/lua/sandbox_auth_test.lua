-- The sandbox checks every signature the way AWS does: a tampered request,
-- a wrong secret, an unknown key, a replay older than 15 minutes and an
-- expired session token are each refused with AWS's own error code.
local t = require "hypd.tap"
local auth = require "sandbox.auth"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local sandbox = require "sandbox"
local sigv4 = require "hypd.sigv4"
local xml = require "hypd.xml"

local srv = assert(sandbox.start { listen = "127.0.0.1:0" })
local port = srv.port
local host = "127.0.0.1:" .. port
local BODY = "Action=GetCallerIdentity&Version=2011-06-15"

-- send a query-protocol STS call signed by hand
local function sts(opts)
  opts = opts or {}
  local when = opts.when or math.floor(core.now())
  local headers = { host = host, ["content-type"] = "application/x-www-form-urlencoded; charset=utf-8",
                    ["x-amz-date"] = os.date("!%Y%m%dT%H%M%SZ", when) }
  if opts.token then headers["x-amz-security-token"] = opts.token end
  local signed = assert(sigv4.sign { method = "POST", path = "/", query = "", headers = headers, body = BODY,
    access_key = opts.akid or auth.ACCESS_KEY, secret_key = opts.secret or auth.SECRET_KEY,
    region = "us-west-2", service = opts.service or "sts", when = when })
  headers.authorization = signed.authorization
  return assert(http.request { method = "POST", url = "http://" .. host .. "/", headers = headers,
    body = opts.tamper and (BODY .. "&x=1") or BODY })
end

local function xml_code(body)
  local doc = xml.decode(body)
  local function find(node)
    if type(node) ~= "table" then return nil end
    if node.name == "Code" then return node.text end
    for _, c in ipairs(node) do
      local v = find(c)
      if v then return v end
    end
  end
  return doc and find(doc)
end

t.test("a request signed with the sandbox's keys is answered", function()
  local r = sts()
  t.eq(r.status, 200, r.body)
  t.like(r.body, "<Arn>arn:aws:iam::123456789012:user/sandbox</Arn>")
end)

t.test("a tampered body fails with SignatureDoesNotMatch", function()
  local r = sts { tamper = true }
  t.eq({ r.status, xml_code(r.body) }, { 403, "SignatureDoesNotMatch" })
end)

t.test("a wrong secret fails with SignatureDoesNotMatch", function()
  local r = sts { secret = "not-the-secret-key-at-all-0000000000000000" }
  t.eq({ r.status, xml_code(r.body) }, { 403, "SignatureDoesNotMatch" })
end)

t.test("an unknown access key fails with InvalidClientTokenId", function()
  local r = sts { akid = "AKIAUNKNOWNKEY000001" }
  t.eq({ r.status, xml_code(r.body) }, { 403, "InvalidClientTokenId" })
end)

t.test("a replay older than 15 minutes is refused as expired", function()
  local r = sts { when = math.floor(core.now()) - 16 * 60 }
  t.eq({ r.status, xml_code(r.body) }, { 403, "SignatureDoesNotMatch" })
  t.like(r.body, "Signature expired")
end)

t.test("an expired session token fails with ExpiredToken", function()
  local cred = auth.issue({ arn = "arn:aws:sts::123456789012:assumed-role/r/s", user_id = "AROAX:s" }, 900)
  local ok = sts { akid = cred.AccessKeyId, secret = cred.SecretAccessKey, token = cred.SessionToken }
  t.eq(ok.status, 200, ok.body)
  t.like(ok.body, "assumed%-role/r/s")
  core.virtual(true)
  core.advance_to(core.now() + 1000)
  local r = sts { akid = cred.AccessKeyId, secret = cred.SecretAccessKey, token = cred.SessionToken }
  core.virtual(false)
  t.eq({ r.status, xml_code(r.body) }, { 400, "ExpiredToken" })
end)

t.test("a session key used without its token is refused", function()
  local cred = auth.issue({ arn = "arn:aws:sts::123456789012:assumed-role/r/s", user_id = "AROAX:s" }, 900)
  local r = sts { akid = cred.AccessKeyId, secret = cred.SecretAccessKey }
  t.eq({ r.status, xml_code(r.body) }, { 403, "InvalidClientTokenId" })
end)

t.test("a JSON-protocol service answers a bad signature in its own shape", function()
  local when = math.floor(core.now())
  local body = "{}"
  local headers = { host = host, ["content-type"] = "application/x-amz-json-1.1",
                    ["x-amz-target"] = "SageMaker.ListClusters", ["x-amz-date"] = os.date("!%Y%m%dT%H%M%SZ", when) }
  local signed = assert(sigv4.sign { method = "POST", path = "/", query = "", headers = headers, body = body,
    access_key = auth.ACCESS_KEY, secret_key = "wrong-secret-0000000000000000000000000000", region = "us-west-2",
    service = "sagemaker", when = when })
  headers.authorization = signed.authorization
  local r = http.request { method = "POST", url = "http://" .. host .. "/", headers = headers, body = body }
  t.eq(r.status, 403)
  t.like(json.decode(r.body).__type or r.headers["x-amzn-errortype"] or "", "InvalidSignatureException")
end)

t.test("an unsigned request for a signed operation is refused", function()
  local r = http.request { method = "POST", url = "http://" .. host .. "/", body = BODY,
    headers = { ["content-type"] = "application/x-www-form-urlencoded" } }
  t.ok(r.status == 400 or r.status == 403, "refused, got " .. r.status)
end)

t.cleanup(function()
  srv:stop()
end)
