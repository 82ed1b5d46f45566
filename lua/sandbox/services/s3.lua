-- sandbox S3 (global bucket names; each bucket records its region):
-- buckets and their configuration here, objects in s3/objects.lua.
--
-- Record "bucket"/<name>: { Name, Region, CreationDate, Policy (text),
--   Versioning = { Status, MFADelete }, Encryption (the
--   ServerSideEncryptionConfiguration), PublicAccessBlock (or nil),
--   Tags = [{Key, Value}] }
-- Objects are records "object/<bucket>"/<key> (see s3/objects.lua);
-- multipart uploads are in s3/multipart.lua; the versions a versioned
-- bucket keeps in s3/versions.lua.
local json = require "hypd.json"

local M = { scope = "global", operations = {}, transitions = {} }
local ops = M.operations

local OWNER = { DisplayName = "sandbox", ID = "75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a" }
M.OWNER = OWNER

local function default_encryption()
  return { Rules = { { ApplyServerSideEncryptionByDefault = { SSEAlgorithm = "AES256" }, BucketKeyEnabled = false } } }
end

local function default_block()
  return { BlockPublicAcls = true, IgnorePublicAcls = true, BlockPublicPolicy = true, RestrictPublicBuckets = true }
end

-- valid_name(name) -> whether S3's general purpose bucket naming rules allow it
local function valid_name(name)
  if type(name) ~= "string" or #name < 3 or #name > 63 then return false end
  if not name:match("^[a-z0-9][a-z0-9.%-]*[a-z0-9]$") then return false end
  if name:find("..", 1, true) or name:find(".-", 1, true) or name:find("-.", 1, true) then return false end
  if name:match("^%d+%.%d+%.%d+%.%d+$") then return false end
  for _, p in ipairs { "xn--", "sthree-", "amzn-s3-demo-" } do
    if name:sub(1, #p) == p then return false end
  end
  for _, s in ipairs { "-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3" } do
    if name:sub(-#s) == s then return false end
  end
  return true
end

-- the operations S3 answers whatever region the request was signed for
local ANY_REGION = { GetBucketLocation = true, HeadBucket = true }

-- bucket(ctx, name, head, any_region) -> the bucket record, or NoSuchBucket
-- (NotFound for HEAD). A request signed for another region than the
-- bucket's is refused as S3 refuses it once DNS has routed it to the
-- bucket's region: AuthorizationHeaderMalformed naming the right region
-- (SDKs re-sign and retry on it).
function M.bucket(ctx, name, head, any_region)
  local b = type(name) == "string" and ctx.state:get("bucket", name)
  if not b then
    if head then ctx.error("NotFound", "Not Found", 404) end
    ctx.error("NoSuchBucket", "The specified bucket does not exist", 404, { BucketName = tostring(name) })
  end
  if not any_region and not ANY_REGION[ctx.operation] and ctx.region and b.Region ~= ctx.region then
    ctx.error("AuthorizationHeaderMalformed", string.format("The authorization header is malformed; the region " ..
      "'%s' is wrong; expecting '%s'", ctx.region, b.Region), 400, { Region = b.Region })
  end
  return b
end

function ops.CreateBucket(ctx, input)
  local name = input.Bucket
  if not valid_name(name) then
    ctx.error("InvalidBucketName", "The specified bucket is not valid.", 400, { BucketName = tostring(name) })
  end
  local cfg = input.CreateBucketConfiguration or {}
  local lc = cfg.LocationConstraint
  if lc == "" then lc = nil end
  local region = ctx.region or "us-east-1"
  if lc == nil and region ~= "us-east-1" then
    ctx.error("IllegalLocationConstraintException", "The unspecified location constraint is incompatible for the " ..
      "region specific endpoint this request was sent to.")
  end
  if lc == "us-east-1" then
    ctx.error("InvalidLocationConstraint", "The specified location-constraint is not valid", 400,
      { LocationConstraint = lc })
  end
  -- the us-east-1 (global, s3.amazonaws.com) endpoint creates buckets in any region
  if lc ~= nil and lc ~= region and region ~= "us-east-1" then
    ctx.error("IllegalLocationConstraintException", "The " .. lc .. " location constraint is incompatible for the " ..
      "region specific endpoint this request was sent to.")
  end
  local existing = ctx.state:get("bucket", name)
  if existing then
    -- us-east-1 answers 200 to its owner for legacy reasons
    if existing.Region == "us-east-1" and region == "us-east-1" then
      return { Location = "/" .. name, BucketArn = "arn:aws:s3:::" .. name }
    end
    ctx.error("BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you " ..
      "already own it.", 409, { BucketName = name })
  end
  local tags = json.array()
  for _, t in ipairs(cfg.Tags or {}) do tags[#tags + 1] = { Key = t.Key, Value = t.Value } end
  ctx.state:put("bucket", name, {
    Name = name, Region = lc or region, CreationDate = math.floor(ctx.now()), Versioning = json.object(),
    Encryption = default_encryption(), PublicAccessBlock = default_block(), Tags = tags,
    ObjectOwnership = input.ObjectOwnership or "BucketOwnerEnforced",
  })
  local location = lc and string.format("http://%s.s3.amazonaws.com/", name) or "/" .. name
  return { Location = location, BucketArn = "arn:aws:s3:::" .. name }
end

function ops.HeadBucket(ctx, input)
  local b = M.bucket(ctx, input.Bucket, true)
  return { BucketRegion = b.Region, AccessPointAlias = false, BucketArn = "arn:aws:s3:::" .. b.Name }
end

function ops.DeleteBucket(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  if #ctx.state:list("object/" .. b.Name) > 0 then
    ctx.error("BucketNotEmpty", "The bucket you tried to delete is not empty", 409, { BucketName = b.Name })
  end
  ctx.state:delete("bucket", b.Name)
  return {}
end

function ops.ListBuckets(ctx, input)
  local max = input.MaxBuckets and math.tointeger(tonumber(input.MaxBuckets)) or 10000
  if max < 1 or max > 10000 then
    ctx.error("InvalidArgument", "Argument max-buckets must be an integer between 1 and 10000", 400)
  end
  local after = input.ContinuationToken
  local out = json.array()
  local nxt
  for _, b in ipairs(ctx.state:list("bucket")) do
    local keep = (not after or b.Name > after) and (not input.Prefix or b.Name:sub(1, #input.Prefix) == input.Prefix)
      and (not input.BucketRegion or b.Region == input.BucketRegion)
    if keep then
      if #out == max then nxt = out[#out].Name break end
      out[#out + 1] = { Name = b.Name, CreationDate = b.CreationDate, BucketRegion = b.Region,
                        BucketArn = "arn:aws:s3:::" .. b.Name }
    end
  end
  return { Buckets = out, Owner = OWNER, ContinuationToken = nxt, Prefix = input.Prefix }
end

function ops.GetBucketLocation(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  return { LocationConstraint = b.Region ~= "us-east-1" and b.Region or "" }
end

-- --- policy ---------------------------------------------------------------

function ops.PutBucketPolicy(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local text = input.Policy
  local doc = type(text) == "string" and text:match("^%s*{") and json.decode(text)
  if type(doc) ~= "table" then
    ctx.error("MalformedPolicy", "Policies must be valid JSON and the first byte must be '{'", 400)
  end
  if doc.Statement == nil then ctx.error("MalformedPolicy", "Missing required field Statement", 400) end
  for _, st in ipairs(json.is_array(doc.Statement) and doc.Statement or { doc.Statement }) do
    if type(st) ~= "table" or (st.Effect ~= "Allow" and st.Effect ~= "Deny") then
      ctx.error("MalformedPolicy", "Invalid effect: " .. tostring(type(st) == "table" and st.Effect), 400)
    end
    if st.Principal == nil and st.NotPrincipal == nil then
      ctx.error("MalformedPolicy", "Missing required field Principal", 400)
    end
    if st.Action == nil and st.NotAction == nil then
      ctx.error("MalformedPolicy", "Missing required field Action", 400)
    end
    if st.Resource == nil and st.NotResource == nil then
      ctx.error("MalformedPolicy", "Missing required field Resource", 400)
    end
  end
  if #text > 20480 then ctx.error("MalformedPolicy", "Policy exceeds the maximum allowed document size.", 400) end
  b.Policy = text
  ctx.state:put("bucket", b.Name, b)
  return {}
end

function ops.GetBucketPolicy(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  if not b.Policy then
    ctx.error("NoSuchBucketPolicy", "The bucket policy does not exist", 404, { BucketName = b.Name })
  end
  return { Policy = b.Policy }
end

function ops.DeleteBucketPolicy(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  b.Policy = nil
  ctx.state:put("bucket", b.Name, b)
  return {}
end

-- --- versioning, encryption, public access block, tags --------------------

function ops.PutBucketVersioning(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  -- a Status outside Enabled | Suspended is MalformedXML before this (sandbox._codec_s3_rules)
  local cfg = input.VersioningConfiguration or {}
  if cfg.MFADelete == "Enabled" then
    ctx.error("InvalidRequest", "DevPay and Mfa are mutually exclusive authorization methods.", 400)
  end
  if cfg.Status then
    b.Versioning = { Status = cfg.Status, MFADelete = cfg.MFADelete }
  end
  ctx.state:put("bucket", b.Name, b)
  return {}
end

function ops.GetBucketVersioning(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  return { Status = b.Versioning.Status, MFADelete = b.Versioning.MFADelete }
end

function ops.PutBucketEncryption(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local cfg = input.ServerSideEncryptionConfiguration or {}
  local rules = cfg.Rules or {}
  if #rules ~= 1 then
    ctx.error("MalformedXML", "The XML you provided was not well-formed or did not validate against our " ..
      "published schema", 400)
  end
  local d = rules[1].ApplyServerSideEncryptionByDefault or {}
  local alg = d.SSEAlgorithm
  if alg ~= "AES256" and alg ~= "aws:kms" and alg ~= "aws:kms:dsse" then
    ctx.error("MalformedXML", "The XML you provided was not well-formed or did not validate against our " ..
      "published schema", 400)
  end
  if d.KMSMasterKeyID and alg == "AES256" then
    ctx.error("InvalidArgument", "a KMSMasterKeyID is not applicable if the default sse algorithm is not aws:kms " ..
      "or aws:kms:dsse", 400, { ArgumentName = "ApplyServerSideEncryptionByDefault" })
  end
  b.Encryption = { Rules = { { ApplyServerSideEncryptionByDefault = { SSEAlgorithm = alg,
    KMSMasterKeyID = d.KMSMasterKeyID }, BucketKeyEnabled = rules[1].BucketKeyEnabled == true } } }
  ctx.state:put("bucket", b.Name, b)
  return {}
end

function ops.GetBucketEncryption(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  if not b.Encryption then
    ctx.error("ServerSideEncryptionConfigurationNotFoundError",
      "The server side encryption configuration was not found", 404, { BucketName = b.Name })
  end
  return { ServerSideEncryptionConfiguration = b.Encryption }
end

-- since 2023 every bucket keeps SSE-S3 when its configuration is deleted
function ops.DeleteBucketEncryption(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  b.Encryption = default_encryption()
  ctx.state:put("bucket", b.Name, b)
  return {}
end

function ops.PutPublicAccessBlock(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local cfg = input.PublicAccessBlockConfiguration or {}
  local out = {}
  for _, k in ipairs { "BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets" } do
    out[k] = cfg[k] == true
  end
  b.PublicAccessBlock = out
  ctx.state:put("bucket", b.Name, b)
  return {}
end

function ops.GetPublicAccessBlock(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  if not b.PublicAccessBlock then
    ctx.error("NoSuchPublicAccessBlockConfiguration", "The public access block configuration was not found", 404,
      { BucketName = b.Name })
  end
  return { PublicAccessBlockConfiguration = b.PublicAccessBlock }
end

function ops.DeletePublicAccessBlock(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  b.PublicAccessBlock = nil
  ctx.state:put("bucket", b.Name, b)
  return {}
end

function ops.PutBucketTagging(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local tags, seen = json.array(), {}
  for _, t in ipairs((input.Tagging or {}).TagSet or {}) do
    if seen[t.Key] then
      ctx.error("InvalidTag", "Cannot provide multiple Tags with the same key", 400, { TagKey = t.Key })
    end
    seen[t.Key] = true
    tags[#tags + 1] = { Key = t.Key, Value = t.Value }
  end
  b.Tags = tags
  ctx.state:put("bucket", b.Name, b)
  return {}
end

function ops.GetBucketTagging(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  if #b.Tags == 0 then
    ctx.error("NoSuchTagSet", "The TagSet does not exist", 404, { BucketName = b.Name })
  end
  return { TagSet = b.Tags }
end

function ops.DeleteBucketTagging(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  b.Tags = json.array()
  ctx.state:put("bucket", b.Name, b)
  return {}
end

local objects = require "sandbox.services.s3.objects"
local multipart = require "sandbox.services.s3.multipart"
objects.bucket, multipart.bucket, multipart.store = M.bucket, M.bucket, objects.store
for _, family in ipairs { objects, multipart } do
  for name, fn in pairs(family.operations) do ops[name] = fn end
end
-- versioned buckets keep what is overwritten or deleted (s3/versions.lua)
local versions = require "sandbox.services.s3.versions"
versions.bucket, versions.OWNER = M.bucket, OWNER
versions.wrap(ops)

return M
