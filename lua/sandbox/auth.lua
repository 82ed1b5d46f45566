-- sandbox.auth: SigV4 verification of every request, with the errors AWS
-- answers. The sandbox has one static key pair and issues session
-- credentials through STS (stored with their expiry).
local core = require "hypd.core"
local sigv4 = require "hypd.sigv4"
local store = require "hypd.store"

local M = {}

M.ACCOUNT = "123456789012"
M.ACCESS_KEY = "AKIAHYPDSANDBOX00001"
M.SECRET_KEY = "hypdSandboxSecretKey/NotForProduction0001"
M.USER = "arn:aws:iam::123456789012:user/sandbox"
M.USER_ID = "AIDAHYPDSANDBOX00001"
M.SKEW = 15 * 60

local function fail(code, message, status)
  return nil, { code = code, message = message, status = status or 403, type = "Sender" }
end

-- the error code for an expired signature, per protocol
local EXPIRED = { json = "InvalidSignatureException", ["rest-json"] = "InvalidSignatureException",
  query = "SignatureDoesNotMatch", ec2 = "RequestExpired", ["rest-xml"] = "RequestTimeTooSkewed" }
local MISMATCH = { json = "InvalidSignatureException", ["rest-json"] = "InvalidSignatureException",
  query = "SignatureDoesNotMatch", ec2 = "AuthFailure", ["rest-xml"] = "SignatureDoesNotMatch" }
local UNKNOWN_KEY = { json = "UnrecognizedClientException", ["rest-json"] = "UnrecognizedClientException",
  query = "InvalidClientTokenId", ec2 = "AuthFailure", ["rest-xml"] = "InvalidAccessKeyId" }

-- issue(principal, seconds) -> session credentials stored for verification
function M.issue(principal, seconds)
  local hex = function(n) return (core.random_bytes(n):gsub(".", function(c) return string.format("%02X", c:byte()) end)) end
  local akid = "ASIA" .. hex(8)
  local cred = {
    AccessKeyId = akid,
    SecretAccessKey = core.b64encode(core.random_bytes(30)),
    SessionToken = core.b64encode(core.random_bytes(96)),
    Expiration = math.floor(core.now() + seconds),
    arn = principal.arn, user_id = principal.user_id,
  }
  store.put("sandbox/global/sts/session/" .. akid, cred)
  return cred
end

-- more static key pairs the sandbox accepts (sandbox.start{credentials = {[akid] = secret}})
M.extra = {}

local function lookup(akid)
  if akid == M.ACCESS_KEY then
    return { secret = M.SECRET_KEY, arn = M.USER, user_id = M.USER_ID }
  end
  if M.extra[akid] then
    return { secret = M.extra[akid], arn = M.USER, user_id = M.USER_ID }
  end
  local s = store.get("sandbox/global/sts/session/" .. akid)
  if s then
    return { secret = s.SecretAccessKey, token = s.SessionToken, expires = s.Expiration,
             arn = s.arn, user_id = s.user_id }
  end
end

local function parse_date(s)
  local y, mo, d, h, mi, se = (s or ""):match("^(%d%d%d%d)(%d%d)(%d%d)T(%d%d)(%d%d)(%d%d)Z$")
  if not y then return nil end
  -- days from civil (UTC), no os.time timezone games
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  local yy = mo <= 2 and y - 1 or y
  local era = (yy >= 0 and yy or yy - 399) // 400
  local yoe = yy - era * 400
  local doy = (153 * (mo + (mo > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  local days = era * 146097 + doe - 719468
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(se)
end
M.parse_date = parse_date

local function query_params(q)
  local out = {}
  for pair in (q or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    out[k] = v
  end
  return out
end

local function unescape(s) return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)) end

-- verify(req, protocol) -> principal {arn, user_id, access_key, region, service} | nil, err
function M.verify(req, protocol)
  local h = req.headers
  local auth = h.authorization
  local akid, date, region, service, signed, sig, when_s, presigned
  if auth then
    akid, date, region, service, signed, sig = auth:match(
      "^AWS4%-HMAC%-SHA256%s+Credential=([^/]+)/(%d+)/([^/]+)/([^/]+)/aws4_request,%s*SignedHeaders=([^,]+),%s*Signature=(%x+)$")
    when_s = h["x-amz-date"]
  else
    local q = query_params(req.query)
    if q["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" then
      presigned = q
      local cred = unescape(q["X-Amz-Credential"] or "")
      akid, date, region, service = cred:match("^([^/]+)/(%d+)/([^/]+)/([^/]+)/aws4_request$")
      signed, sig, when_s = unescape(q["X-Amz-SignedHeaders"] or ""), q["X-Amz-Signature"], q["X-Amz-Date"]
    end
  end
  if not akid then
    return fail(protocol == "ec2" and "AuthFailure" or "MissingAuthenticationTokenException" ,
      "Missing Authentication Token", protocol == "ec2" and 401 or 403)
  end
  local who = lookup(akid)
  if not who then
    return fail(UNKNOWN_KEY[protocol] or "InvalidClientTokenId",
      "The security token included in the request is invalid.")
  end
  local when = parse_date(when_s)
  if not when or when_s:sub(1, 8) ~= date then
    return fail(MISMATCH[protocol] or "SignatureDoesNotMatch", "Invalid X-Amz-Date")
  end
  local now = core.now()
  -- under the virtual clock, clients in other processes sign with the wall
  -- clock while this one jumps ahead: a date near either clock is current
  if core.virtual() and math.abs(core.wall() - when) < math.abs(now - when) then now = core.wall() end
  if presigned then
    local expires = tonumber(presigned["X-Amz-Expires"]) or 0
    if now > when + math.max(expires, 0) + M.SKEW or when > now + M.SKEW then
      return fail(EXPIRED[protocol] or "SignatureDoesNotMatch", "Signature expired")
    end
  elseif math.abs(now - when) > M.SKEW then
    return fail(EXPIRED[protocol] or "SignatureDoesNotMatch", string.format(
      "Signature expired: %s is now earlier than %s (%s - 15 min.)", when_s,
      os.date("!%Y%m%dT%H%M%SZ", math.floor(now - M.SKEW)), os.date("!%Y%m%dT%H%M%SZ", math.floor(now))))
  end
  if who.expires and now >= who.expires then
    return fail("ExpiredToken", "The security token included in the request is expired", 400)
  end
  local token = presigned and unescape(presigned["X-Amz-Security-Token"] or "") or h["x-amz-security-token"]
  if who.token and token ~= who.token then
    return fail(UNKNOWN_KEY[protocol] or "InvalidClientTokenId", "The security token included in the request is invalid.")
  end
  local headers = {}
  for name in signed:gmatch("[^;]+") do
    local v = h[name]
    if v == nil then
      return fail(MISMATCH[protocol] or "SignatureDoesNotMatch", "A signed header is missing: " .. name)
    end
    headers[#headers + 1] = { name, v }
  end
  local body_hash = h["x-amz-content-sha256"]
  if body_hash and body_hash ~= "UNSIGNED-PAYLOAD" and not body_hash:find("^STREAMING")
      and body_hash ~= core.digest("sha256", req.body or "", "hex") then
    return fail("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.", 400)
  end
  local expect, err
  if presigned then
    -- re-presign the request without its X-Amz-* parameters
    local parts = {}
    for pair in (req.query or ""):gmatch("[^&]+") do
      if not pair:find("^X%-Amz%-") then parts[#parts + 1] = pair end
    end
    expect, err = sigv4.sign {
      method = req.method, path = req.path, query = table.concat(parts, "&"), headers = headers, body = req.body,
      access_key = akid, secret_key = who.secret, session_token = token ~= "" and token or nil,
      region = region, service = service, when = when, normalize = service ~= "s3",
      presign = tonumber(presigned["X-Amz-Expires"]),
    }
  else
    expect, err = sigv4.sign {
      method = req.method, path = req.path, query = req.query, headers = headers, body = req.body,
      payload_hash = body_hash, access_key = akid, secret_key = who.secret,
      region = region, service = service, when = when, normalize = service ~= "s3",
    }
  end
  if not expect then return fail(MISMATCH[protocol] or "SignatureDoesNotMatch", err.message) end
  if expect.signature ~= sig then
    return fail(MISMATCH[protocol] or "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. " ..
      "Check your AWS Secret Access Key and signing method.")
  end
  return { arn = who.arn, user_id = who.user_id, access_key = akid, region = region, service = service }
end

return M
