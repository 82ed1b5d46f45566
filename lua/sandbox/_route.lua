-- sandbox._route: which simulated service a request addresses, signed or
-- not, so that even a refusal is written in the protocol its client reads.
-- The signature's credential scope decides when it names a simulated
-- service; otherwise the request itself: its X-Amz-Target, its Host
-- ("sts.…", "bucket.s3.…"), the Action and Version of a form, an EKS path,
-- its content type; S3 when nothing else fits (any path is an S3 path).
--
--   local svc, scoped = route.service(req, { "sts", "iam", ... })
--   -- svc: one of the names given; scoped: the service the signature names
--   -- (nil when unsigned), which the sandbox may not simulate
local codec = require "sandbox.codec"
local Q = require "sandbox._codec_query"

local M = {}

local ALIAS = { ["api.sagemaker"] = "sagemaker" }

-- scope(req) -> the service of the credential scope (header or presigned)
local function scope(req)
  local svc = (req.headers.authorization or ""):match("Credential=[^/]+/%d+/[^/]+/([^/]+)/")
  if not svc then
    local cred = (req.query or ""):match("X%-Amz%-Credential=([^&]+)")
    if cred then svc = Q.unescape(cred):match("^[^/]+/%d+/[^/]+/([^/]+)/") end
  end
  return svc and (ALIAS[svc] or svc)
end

local function models(names)
  local out = {}
  for _, n in ipairs(names) do
    local m = codec.model(n)
    if m then out[#out + 1] = { name = n, model = m, protocol = m.metadata.protocol } end
  end
  return out
end

local function first(list, pred)
  for _, s in ipairs(list) do
    if pred(s) then return s.name end
  end
end

-- the first path segments of a restJson1 service's operations ("clusters")
local roots = setmetatable({}, { __mode = "k" })
local function root_of(model)
  local r = roots[model]
  if not r then
    r = {}
    for _, op in pairs(model.operations) do
      local seg = (op.uri or ""):match("^/([^/?{]+)")
      if seg then r[seg] = true end
    end
    roots[model] = r
  end
  return r
end

-- form(req) -> Action, Version of a query-protocol request (query string or
-- form body)
local function form(req)
  local pairs_ = Q.form_pairs(req.query or "")
  local ctype = (req.headers["content-type"] or ""):lower()
  if ctype:find("application/x-www-form-urlencoded", 1, true) then Q.form_pairs(req.body or "", pairs_) end
  local action, version
  for _, p in ipairs(pairs_) do
    if p[1] == "Action" then action = p[2] elseif p[1] == "Version" then version = p[2] end
  end
  return action, version
end

-- guess(req, list) -> the service the request itself names
local function guess(req, list)
  local h = req.headers
  local target = h["x-amz-target"]
  if target then
    local prefix = target:match("^(.*)%.[^.]*$") or target
    return first(list, function(s) return s.model.metadata.targetPrefix == prefix end)
      or first(list, function(s) return s.protocol == "json" end)
  end
  local host = (req.host or h.host or ""):lower():match("^([^:]*)")
  if not host:match("^[%d.]*$") and host ~= "localhost" then
    if codec.bucket_from_host(host) or host:match("^s3[.-]") then
      local s3 = first(list, function(s) return s.protocol == "rest-xml" end)
      if s3 then return s3 end
    end
    local by_host = first(list, function(s)
      local prefix = s.model.metadata.endpointPrefix
      return host:sub(1, #prefix + 1) == prefix .. "." or host:sub(1, #s.name + 1) == s.name .. "."
    end)
    if by_host then return by_host end
  end
  local action, version = form(req)
  local query = function(s) return s.protocol == "query" or s.protocol == "ec2" end
  if action or version then
    return first(list, function(s) return query(s) and s.model.metadata.apiVersion == version end)
      or first(list, function(s) return query(s) and action and s.model.operations[action] ~= nil end)
      or first(list, query)
  end
  local ctype = (h["content-type"] or ""):lower()
  if ctype:find("application/x-www-form-urlencoded", 1, true) then return first(list, query) end
  if ctype:find("application/x-amz-json", 1, true) then
    return first(list, function(s) return s.protocol == "json" end)
  end
  local seg = (req.path or ""):match("^/([^/?]+)")
  local rest = seg and first(list, function(s) return s.protocol == "rest-json" and root_of(s.model)[seg] end)
  if rest then return rest end
  if ctype:find("application/json", 1, true) then
    return first(list, function(s) return s.protocol == "rest-json" end)
  end
  return first(list, function(s) return s.protocol == "rest-xml" end) or (list[1] and list[1].name)
end

-- service(req, names) -> the service of names the request addresses, and
-- the service its signature names (nil when unsigned)
function M.service(req, names)
  local list = models(names)
  local scoped = scope(req)
  -- SageMaker Runtime signs as "sagemaker" too: its REST paths tell it apart
  if scoped == "sagemaker" and not req.headers["x-amz-target"] and (req.path or ""):match("^/endpoints/")
      and first(list, function(s) return s.name == "sagemaker-runtime" end) then
    scoped = "sagemaker-runtime"
  end
  if scoped and first(list, function(s) return s.name == scoped end) then return scoped, scoped end
  return guess(req, list), scoped
end

return M
