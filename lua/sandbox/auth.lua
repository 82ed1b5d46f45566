-- sandbox.auth: SigV4 verification of every request, with the errors AWS
-- answers. The sandbox has one static key pair and issues session
-- credentials through STS (stored with their expiry).
local core = require "hypd.core"
local sigv4 = require "hypd.sigv4"
local store = require "hypd.store"
local sys = require "hypd.sys"

local M = {}

M.ACCOUNT = "123456789012"
M.ACCESS_KEY = "AKIAHYPDSANDBOX00001"
M.SECRET_KEY = "hypdSandboxSecretKey/NotForProduction0001"
M.USER = "arn:aws:iam::123456789012:user/sandbox"
M.USER_ID = "AIDAHYPDSANDBOX00001"
M.SKEW = 15 * 60 -- how old a signature may be
-- how far ahead of the clock a request may be dated: S3 and EC2 take the
-- same 15 minutes, the other services 5 ("... (T + 5 min.)")
M.AHEAD = { default = 5 * 60, ["rest-xml"] = 15 * 60, ec2 = 15 * 60 }

-- the refusals, per kind and protocol: { code, status, message } as each
-- kind of AWS front end answers (STS and IAM share the query one; S3 treats
-- an unsigned request as anonymous and denies it)
local SIG = "The request signature we calculated does not match the signature you provided. " ..
  "Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
local TOKEN = "The security token included in the request is invalid."
local EC2_AUTH = "AWS was not able to validate the provided access credentials"
local REFUSE = {
  missing = {
    query = { "MissingAuthenticationToken", 403, "Request is missing Authentication Token" },
    ec2 = { "MissingAuthenticationToken", 401,
      "The request must contain either a valid (registered) AWS access key ID or X.509 certificate." },
    json = { "MissingAuthenticationTokenException", 403, "Missing Authentication Token" },
    ["rest-json"] = { "MissingAuthenticationTokenException", 403, "Missing Authentication Token" },
    ["rest-xml"] = { "AccessDenied", 403, "Access Denied" },
  },
  unknown_key = {
    query = { "InvalidClientTokenId", 403, TOKEN },
    ec2 = { "AuthFailure", 401, EC2_AUTH },
    json = { "UnrecognizedClientException", 403, TOKEN },
    ["rest-json"] = { "UnrecognizedClientException", 403, TOKEN },
    ["rest-xml"] = { "InvalidAccessKeyId", 403, "The AWS Access Key Id you provided does not exist in our records." },
  },
  mismatch = {
    query = { "SignatureDoesNotMatch", 403, SIG },
    ec2 = { "AuthFailure", 401, EC2_AUTH },
    json = { "InvalidSignatureException", 403, SIG },
    ["rest-json"] = { "InvalidSignatureException", 403, SIG },
    ["rest-xml"] = { "SignatureDoesNotMatch", 403,
      "The request signature we calculated does not match the signature you provided. Check your key and signing method." },
  },
  -- dated too far from the clock; the message says which way (S3 has one
  -- message for both)
  skew = {
    query = { "SignatureDoesNotMatch", 403 },
    ec2 = { "RequestExpired", 400 },
    json = { "InvalidSignatureException", 403 },
    ["rest-json"] = { "InvalidSignatureException", 403 },
    ["rest-xml"] = { "RequestTimeTooSkewed", 403,
      "The difference between the request time and the current time is too large." },
  },
}

-- refuse(kind, protocol [, message [, fields]]) -> nil, err: the refusal
-- of that kind in the protocol's words; message replaces the usual one
-- (but S3's messages do not vary); fields are S3's extra error members
local function refuse(kind, protocol, message, fields)
  local r = REFUSE[kind][protocol] or REFUSE[kind].query
  local s3 = protocol == "rest-xml"
  return nil, { code = r[1], status = r[2], message = s3 and r[3] or message or r[3], type = "Sender",
    fields = s3 and fields or nil }
end
M.refuse = refuse

local function fail(code, message, status)
  return nil, { code = code, message = message, status = status or 403, type = "Sender" }
end

local function stamp(t) return os.date("!%Y%m%dT%H%M%SZ", math.floor(t)) end

-- issue(principal, seconds) -> session credentials stored for verification
function M.issue(principal, seconds)
  local hex = function(n) return (sys.random_bytes(n):gsub(".", function(c) return string.format("%02X", c:byte()) end)) end
  local akid = "ASIA" .. hex(8)
  local cred = {
    AccessKeyId = akid,
    SecretAccessKey = sys.b64encode(sys.random_bytes(30)),
    SessionToken = sys.b64encode(sys.random_bytes(96)),
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
  -- an access key ID is letters and digits (AKIA..., ASIA...): anything
  -- else names no key, and must not reach the store, whose keys refuse a
  -- NUL byte with an error (a Credential=AK%00ID/... raised out of verify)
  if not akid:match("^%w+$") then return nil end
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
  if not akid and protocol == "rest-xml" then
    local q = query_params(req.query)
    -- Signature Version 2 (a query with AWSAccessKeyId, Expires and
    -- Signature, or an "AWS AKID:sig" header): S3 buckets made since June
    -- 2020 take SigV4 only, and answer this
    if (q.AWSAccessKeyId and q.Signature) or (auth and auth:match("^AWS [^:]+:")) then
      return fail("InvalidRequest", "The authorization mechanism you have provided is not supported. " ..
        "Please use AWS4-HMAC-SHA256.", 400)
    end
  end
  if presigned and protocol == "rest-xml" then
    local expires = tonumber(presigned["X-Amz-Expires"] or "")
    if not (expires and expires >= 0 and expires <= 604800) then
      return fail("AuthorizationQueryParametersError", expires and expires > 604800 and
        "X-Amz-Expires must be less than a week (in seconds) that is 604800" or
        "X-Amz-Expires should be a number", 400)
    end
  end
  if not akid then return refuse("missing", protocol) end
  local who = lookup(akid)
  if not who then return refuse("unknown_key", protocol) end
  local when = parse_date(when_s)
  if not when or when_s:sub(1, 8) ~= date then
    return refuse("mismatch", protocol, "Invalid X-Amz-Date")
  end
  local ahead = M.AHEAD[protocol] or M.AHEAD.default
  -- late(now) -> the refusal when the date is not current at now, else nil
  local function late(now)
    local skewed = { RequestTime = when_s, ServerTime = os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(now)),
      MaxAllowedSkewMilliseconds = M.SKEW * 1000 }
    if when > now + ahead then
      return table.pack(refuse("skew", protocol, string.format("Signature not yet current: %s is still later than %s " ..
        "(%s + %d min.)", when_s, stamp(now + ahead), stamp(now), ahead // 60), skewed))
    end
    if presigned then
      local expires = tonumber(presigned["X-Amz-Expires"]) or 0
      -- S3 honours X-Amz-Expires to the second; STS (EKS tokens) takes the
      -- usual 15 minutes past it
      if protocol == "rest-xml" and now > when + math.max(expires, 0) then
        return table.pack(nil, { code = "AccessDenied", message = "Request has expired", status = 403, type = "Sender",
          fields = { ["X-Amz-Expires"] = tostring(expires),
            Expires = os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(when + expires)),
            ServerTime = os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(now)) } })
      end
      if now > when + math.max(expires, 0) + M.SKEW then
        return table.pack(refuse("skew", protocol, "Signature expired", skewed))
      end
    elseif now - when > M.SKEW then
      return table.pack(refuse("skew", protocol, string.format("Signature expired: %s is now earlier than %s (%s - 15 " ..
        "min.)", when_s, stamp(now - M.SKEW), stamp(now)), skewed))
    end
  end
  -- under the virtual clock, clients in other processes sign with the wall
  -- clock while this one jumps ahead, and a client reuses a presigned token
  -- for minutes of its own clock: a date current by either clock is current
  local now = core.now()
  local bad = late(now)
  if bad and core.virtual() and not late(core.wall()) then bad, now = nil, core.wall() end
  if bad then return table.unpack(bad, 1, bad.n) end
  if who.expires and now >= who.expires then
    return fail("ExpiredToken", "The security token included in the request is expired", 400)
  end
  local token = presigned and unescape(presigned["X-Amz-Security-Token"] or "") or h["x-amz-security-token"]
  if who.token and token ~= who.token then return refuse("unknown_key", protocol) end
  local headers = {}
  for name in signed:gmatch("[^;]+") do
    local v = h[name]
    if v == nil then return refuse("mismatch", protocol, "A signed header is missing: " .. name) end
    headers[#headers + 1] = { name, v }
  end
  local body_hash = h["x-amz-content-sha256"]
  if body_hash and body_hash ~= "UNSIGNED-PAYLOAD" and not body_hash:find("^STREAMING")
      and body_hash ~= sys.digest("sha256", req.body or "", "hex") then
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
      -- S3's query signing never covers the payload (the URL is made before it)
      payload_hash = service == "s3" and "UNSIGNED-PAYLOAD" or nil,
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
  if not expect then return refuse("mismatch", protocol, err.message) end
  if expect.signature ~= sig then return refuse("mismatch", protocol) end
  return { arn = who.arn, user_id = who.user_id, access_key = akid, region = region, service = service }
end

return M
