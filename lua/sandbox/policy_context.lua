-- sandbox.policy_context: the request context a policy's conditions are
-- evaluated against, built from what the sandbox knows of the request.
--
--   PC.request(ctx, service, operation, input) -> base: the keys every
--     check of the request shares
--   PC.check(ctx, base, check) -> context (sandbox.policy_conditions) for
--     one { action, resource, passed_to } check
--   PC.principal_arn(principal) -> aws:PrincipalArn (an assumed-role
--     session stands for its role)
--
-- Keys supplied:
--   aws:PrincipalArn, aws:PrincipalAccount, aws:PrincipalType (User |
--   AssumedRole), aws:userid, aws:username (an IAM user's name; absent for
--   a role session, as in AWS), aws:RequestedRegion, aws:CurrentTime,
--   aws:EpochTime, aws:SecureTransport (false: the sandbox is reached over
--   plain HTTP, so that is what the request was sent over),
--   aws:RequestTag/<key> and aws:TagKeys (from the request's tags: Tags as
--   a list of {Key, Value} or a map, tags, TagSpecifications[].Tags,
--   Tagging.TagSet, S3's Tagging header), aws:ResourceTag/<key> (and <service>:ResourceTag/<key>)
--   from the tags the sandbox holds for the check's resource (EC2
--   resources, IAM roles, EKS clusters, SageMaker clusters, S3 buckets),
--   aws:ResourceAccount, iam:PassedToService (on iam:PassRole),
--   iam:AWSServiceName, iam:PolicyARN, s3:prefix.
-- Not supplied: aws:SourceIp, aws:SourceVpc(e), MFA and token keys, and
-- the service-specific keys not named above (a condition on one is a
-- condition on a missing key).
local auth = require "sandbox.auth"
local core = require "hypd.core"
local json = require "hypd.json"
local policy_values = require "sandbox.policy_values"

local M = {}

local is_list, as_list = policy_values.is_list, policy_values.as_list

local function str(v) return type(v) == "string" and v ~= "" and v or nil end

-- tag_map(tags) -> { key = value } from a list of {Key, Value} or a map
local function tag_map(tags, into)
  into = into or {}
  if type(tags) ~= "table" then return into end
  if is_list(tags) then
    for _, t in ipairs(tags) do
      if type(t) == "table" and str(t.Key) then into[t.Key] = type(t.Value) == "string" and t.Value or "" end
    end
  else
    for k, v in pairs(tags) do
      if type(k) == "string" then into[k] = tostring(v) end
    end
  end
  return into
end
M.tag_map = tag_map

-- request_tags(input) -> { key = value }, or nil when the request carries none
local function request_tags(input)
  local tags = {}
  tag_map(input.Tags, tags)
  if type(input.tags) == "table" and not is_list(input.tags) then tag_map(input.tags, tags) end
  for _, spec in ipairs(as_list(input.TagSpecifications)) do
    if type(spec) == "table" then tag_map(spec.Tags, tags) end
  end
  if type(input.Tagging) == "table" then tag_map(input.Tagging.TagSet, tags) end
  if type(input.Tagging) == "string" then -- S3's x-amz-tagging: k1=v1&k2=v2, URL-encoded
    local function dec(x) return (x:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)) end
    for pair in input.Tagging:gmatch("[^&]+") do
      local k, v = pair:match("^([^=]*)=?(.*)$")
      if k ~= "" then tags[dec(k)] = dec(v) end
    end
  end
  if next(tags) == nil then return nil end
  return tags
end

function M.principal_arn(p)
  local arn = p and p.arn or auth.USER
  local role = arn:match("^arn:aws:sts::%d+:assumed%-role/([^/]+)/")
  if not role then return arn, "User" end
  local r = require("sandbox.state").view("global", "iam"):get("role", role)
  return r and r.Arn or ("arn:aws:iam::" .. auth.ACCOUNT .. ":role/" .. role), "AssumedRole"
end

local function iso(t) return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t)) end

function M.request(ctx, service, operation, input)
  input = type(input) == "table" and input or {}
  local p = ctx.principal or {}
  local parn, ptype = M.principal_arn(p)
  local now = core.now()
  local base = {
    ["aws:principalarn"] = parn, ["aws:principalaccount"] = auth.ACCOUNT, ["aws:principaltype"] = ptype,
    ["aws:userid"] = p.user_id, ["aws:requestedregion"] = ctx.region or "us-east-1",
    ["aws:currenttime"] = iso(now), ["aws:epochtime"] = math.floor(now), ["aws:securetransport"] = false,
    ["iam:awsservicename"] = service == "iam" and str(input.AWSServiceName) or nil,
    ["iam:policyarn"] = service == "iam" and str(input.PolicyArn) or nil,
    ["s3:prefix"] = service == "s3" and operation:match("^ListObjects") and (input.Prefix or "") or nil,
  }
  if ptype == "User" then base["aws:username"] = (p.arn or auth.USER):match(":user/.-([^/]+)$") end
  local tags = request_tags(input)
  if tags then
    local keys = json.array()
    for k, v in pairs(tags) do
      base["aws:requesttag/" .. k:lower()] = v
      keys[#keys + 1] = k
    end
    table.sort(keys)
    base["aws:tagkeys"] = keys
  end
  return base
end

-- resource_tags(ctx, arn) -> { key = value } of the resource the sandbox holds, or nil
local function resource_tags(ctx, arn)
  local svc, res = tostring(arn):match("^arn:[^:]*:([^:]*):[^:]*:[^:]*:(.*)$")
  if not svc then return nil end
  if svc == "ec2" then
    local id = res:match("^[%w%-]+/(.+)$")
    local kind = require("sandbox.services.ec2.common").kind_of(id)
    local rec = kind and ctx:view("ec2"):get(kind, id)
    return rec and tag_map(rec.Tags)
  elseif svc == "iam" then
    local name = res:match("^role/.-([^/]+)$")
    local rec = name and ctx:view("iam"):get("role", name)
    return rec and rec.Arn == arn and tag_map(rec.Tags) or nil
  elseif svc == "eks" then
    local name = res:match("^cluster/([^/]+)$")
    local rec = name and ctx:view("eks"):get("cluster", name)
    return rec and tag_map(rec.tags)
  elseif svc == "sagemaker" then
    if not res:match("^cluster/") then return nil end
    for _, c in ipairs(ctx:view("sagemaker"):list("cluster")) do
      if c.ClusterArn == arn then return tag_map(c.Tags) end
    end
  elseif svc == "s3" and not res:find("/", 1, true) then
    local rec = ctx:view("s3"):get("bucket", res)
    return rec and tag_map(rec.Tags)
  end
  return nil
end

-- the service prefix its own ResourceTag key carries, where IAM documents one
local OWN_TAG_KEY = { ec2 = "ec2", iam = "iam", sagemaker = "sagemaker", eks = "eks" }

function M.check(ctx, base, check)
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  local resource = check[2]
  local service = (resource or ""):match("^arn:[^:]*:([^:]*):")
  local acct = (resource or ""):match("^arn:[^:]*:[^:]*:[^:]*:([^:]*):")
  c["aws:resourceaccount"] = str(acct) or auth.ACCOUNT
  if check.passed_to then c["iam:passedtoservice"] = check.passed_to end
  local ok, tags = pcall(resource_tags, ctx, resource)
  if ok and tags then
    for k, v in pairs(tags) do
      c["aws:resourcetag/" .. k:lower()] = v
      if OWN_TAG_KEY[service] then c[OWN_TAG_KEY[service] .. ":resourcetag/" .. k:lower()] = v end
    end
  end
  return c
end

return M
