-- Shared helpers for the EKS, SageMaker and FSx simulations: reading the
-- records other services own (IAM roles, EC2 subnets and security groups,
-- S3 objects) and small utilities (pagination, uuids, durations).
--
-- Record layouts read here (owned by other services):
--   iam  "role"   id RoleName        { RoleName, Arn, ... }
--   ec2  "subnet" id SubnetId        { SubnetId, VpcId, AvailabilityZone, AvailabilityZoneId, CidrBlock }
--   ec2  "sg"     id GroupId         { GroupId, VpcId }
--   s3   "bucket" id name; "object/<bucket>" id key { Key, ... }
-- Lookups accept a few spellings so a layout change shows up as a clear
-- validation error rather than a crash.
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

-- role_name(arn) -> "Name" for arn:aws:iam::123456789012:role/path/Name
function M.role_name(arn)
  if type(arn) ~= "string" then return nil end
  local rest = arn:match("^arn:aws[%w-]*:iam::%d+:role/(.+)$")
  return rest and rest:match("([^/]+)$")
end

-- role(ctx, arn) -> the IAM role record, or nil
function M.role(ctx, arn)
  local name = M.role_name(arn)
  if not name then return nil end
  local r = ctx:view("iam"):get("role", name)
  if r and r.Arn and r.Arn ~= arn then return nil end
  return r
end

local function first(rec, ...)
  for _, k in ipairs { ... } do
    if rec[k] ~= nil then return rec[k] end
  end
end

-- az_id(region, az) -> "usw2-az2" for ("us-west-2", "us-west-2b"), the
-- default mapping when EC2 did not record one
function M.az_id(region, az)
  local a, b, n = region:match("^(%a)%a*%-(%a)%a*%-(%d+)$")
  local letter = az and az:match("(%a)$")
  if not a or not letter then return nil end
  return string.format("%s%s%s-az%d", a, b, n, letter:byte() - 96)
end

-- subnet(ctx, id) -> { id, vpc, az, az_id, cidr } or nil
function M.subnet(ctx, id)
  if type(id) ~= "string" then return nil end
  local s = ctx:view("ec2"):get("subnet", id)
  if not s then return nil end
  local az = first(s, "AvailabilityZone", "availability_zone", "az")
  return {
    id = id, vpc = first(s, "VpcId", "vpc_id", "vpc"), az = az,
    az_id = first(s, "AvailabilityZoneId", "availability_zone_id", "az_id") or M.az_id(ctx.region, az),
    cidr = first(s, "CidrBlock", "cidr_block", "cidr"),
  }
end

-- security_group(ctx, id) -> { id, vpc } or nil
function M.security_group(ctx, id)
  if type(id) ~= "string" then return nil end
  local ec2 = ctx:view("ec2")
  for _, kind in ipairs { "sg", "security_group" } do
    local g = ec2:get(kind, id)
    if g then return { id = id, vpc = first(g, "VpcId", "vpc_id", "vpc") } end
  end
end

-- s3_uri(uri) -> bucket, prefix for "s3://bucket/prefix"
function M.s3_uri(uri)
  if type(uri) ~= "string" then return nil end
  local bucket, key = uri:match("^s3://([^/]+)/?(.*)$")
  return bucket, key
end

function M.bucket_exists(ctx, bucket)
  return ctx:view("s3"):get("bucket", bucket) ~= nil
end

-- s3_prefix(ctx, uri) -> true when at least one object lies under the prefix
-- (S3 keeps a bucket's objects as kind "object/<bucket>", id = key)
function M.s3_prefix(ctx, uri)
  local bucket, prefix = M.s3_uri(uri)
  if not bucket or not M.bucket_exists(ctx, bucket) then return false end
  for _, o in ipairs(ctx:view("s3"):list("object/" .. bucket)) do
    local key = o.Key or o.key
    if key and key:sub(1, #prefix) == prefix then return true end
  end
  return false
end

-- s3_object(ctx, uri) -> the object record at "s3://bucket/key", or nil
function M.s3_object(ctx, uri)
  local bucket, key = M.s3_uri(uri)
  if not bucket or key == "" or not M.bucket_exists(ctx, bucket) then return nil end
  return ctx:view("s3"):get("object/" .. bucket, key)
end

-- uuid() -> "1b2c...-...": EKS ids and update ids
function M.uuid(ctx)
  return string.format("%s-%s-%s-%s-%s", ctx.hex(8), ctx.hex(4), ctx.hex(4), ctx.hex(4), ctx.hex(12))
end

-- between(a, b) -> a random whole number of seconds in [a, b]
function M.between(a, b) return math.random(a, b) end

-- page(ctx, items, max, token, limit, code) -> slice, next_token: opaque
-- offset tokens (base64, as AWS's are: Service Quotas' model requires
-- ^[a-zA-Z0-9/+]*={0,2}$); a bad token or maxResults answers `code`
function M.page(ctx, items, max, token, limit, code)
  local start = 1
  if token ~= nil and token ~= "" then
    local raw = tostring(token):match("^[%w/+]+=*$") and sys.b64decode(tostring(token))
    start = tonumber(tostring(raw or ""):match("^page%-(%d+)$"))
    if not start or start < 1 then ctx.error(code, "The nextToken provided is invalid.") end
  end
  max = max and math.tointeger(max) or limit
  if max < 1 or max > limit then
    ctx.error(code, "maxResults must be between 1 and " .. limit)
  end
  local out = json.array()
  for i = start, math.min(#items, start + max - 1) do out[#out + 1] = items[i] end
  local nxt = start + max <= #items and sys.b64encode("page-" .. (start + max)) or nil
  return out, nxt
end

-- address(ctx, cidr) -> ip, dns: a private address in the subnet's CIDR
-- (10.0.0.0/16 when it has none) and its EC2 private DNS name
function M.address(ctx, cidr)
  local a, b, c, d, bits = tostring(cidr):match("^(%d+)%.(%d+)%.(%d+)%.(%d+)/(%d+)$")
  if not a then a, b, c, d, bits = 10, 0, 0, 0, 16 end
  local base = ((tonumber(a) << 24) | (tonumber(b) << 16) | (tonumber(c) << 8) | tonumber(d))
  local size = 1 << (32 - tonumber(bits))
  local host = size > 8 and math.random(4, size - 2) or 1
  local ip = (base & ~(size - 1)) + host
  local text = string.format("%d.%d.%d.%d", (ip >> 24) & 255, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255)
  return text, "ip-" .. text:gsub("%.", "-") .. "." .. ctx.region .. ".compute.internal"
end

-- child(ctx, kind, cluster, name, missing) -> the record of kind
-- "<cluster>/<name>" that belongs to an EKS cluster (an add-on, a node
-- group); ResourceNotFoundException with message `missing` when there is none
function M.child(ctx, kind, cluster, name, missing)
  require("sandbox.services.eks.clusters").get(ctx, cluster)
  local r = ctx.state:get(kind, cluster .. "/" .. tostring(name))
  if not r then ctx.error("ResourceNotFoundException", missing, 404) end
  return r
end

-- children(ctx, kind, input, field) -> page, next token: the `field` of
-- every record of kind of cluster input.clusterName, paged as EKS's List*
-- calls page (maxResults up to 100, nextToken)
function M.children(ctx, kind, input, field)
  require("sandbox.services.eks.clusters").get(ctx, input.clusterName)
  local names = json.array()
  for _, r in ipairs(ctx.state:list(kind)) do
    if r.clusterName == input.clusterName then names[#names + 1] = r[field] end
  end
  return M.page(ctx, names, input.maxResults, input.nextToken, 100, "InvalidParameterException")
end

-- public(rec) -> a copy of a record without its internal key and client token
function M.public(rec)
  local out = M.copy(rec)
  out.key, out.token = nil, nil
  return out
end

-- launched(ctx, kind, match) -> the records of kind (instances) whose
-- fields equal match's (nil matches anything), oldest launch first
function M.launched(ctx, kind, match)
  local out = {}
  for _, r in ipairs(ctx.state:list(kind)) do
    local ok = true
    for k, v in pairs(match) do ok = ok and r[k] == v end
    if ok then out[#out + 1] = r end
  end
  table.sort(out, function(a, b)
    if a.LaunchTime ~= b.LaunchTime then return a.LaunchTime < b.LaunchTime end
    return a.InstanceId < b.InstanceId
  end)
  return out
end

-- list(t) -> a JSON array copy of the array t (nil -> [])
function M.list(t)
  local out = json.array()
  for i, v in ipairs(t or {}) do out[i] = v end
  return out
end

-- copy(v) -> a deep copy (records are plain tables)
function M.copy(v)
  if type(v) ~= "table" then return v end
  local out = json.is_array(v) and json.array() or json.object()
  for k, x in pairs(v) do out[k] = M.copy(x) end
  return out
end

return M
