-- _s3: the S3 side of an S3 storage (and of the buckets the cluster and
-- training tools make): the bucket (hypd's own, named
-- and tagged for a cluster tag, or a named one that is reused as it is),
-- what it holds, and emptying it.
--
--   local s3 = require "_s3"
--   local b = s3.ensure_bucket(ctx, tag [, name])
--     -> {name, region, arn, owned, action = "created" | "unchanged" | ...}
--
-- ensure_bucket is a kit resource (ctx:ensure: found by name, owner check,
-- created only if missing, plans itself) that needs no EKS cluster, so a
-- pipeline can make the bucket before EKS exists (cluster_create); its
-- AWS actions are M.AWS (add them to the calling tool's aws list). hypd's
-- bucket is hypd-<tag>-data-<account>-<region> (the tag shortened, with a
-- hash, when that is longer than S3's 63 characters), created in the
-- call's region with the tags hypd:cluster-tag=<tag> and hypd:storage=s3
-- (S3's defaults: public access blocked, SSE-S3 encryption). A named
-- bucket that exists is used as it is, in whatever region it is, and is
-- never tagged or changed; one that does not exist is created as hypd's.
local Names = require "_names"
local errors = hypd.errors
local json = hypd.json

local M = {}

M.KIND_TAG = "hypd:storage"
M.AWS = { "s3:HeadBucket", "s3:CreateBucket", "s3:GetBucketTagging", "s3:PutBucketTagging", "sts:GetCallerIdentity" }


-- call(ctx, region, operation, params) -> result | nil, err: S3 in a bucket's region
local function try(ctx, region, operation, params)
  return hypd.aws.try("s3", operation, params, { region = region or ctx:aws_region() })
end

local function call(ctx, region, operation, params)
  local out, err = try(ctx, region, operation, params)
  if not out then error(err, 0) end
  return out
end

-- tags(ctx, name, region) -> {key = value} of a bucket
function M.tags(ctx, name, region)
  local out, err = try(ctx, region, "GetBucketTagging", { Bucket = name })
  if out then return hypd.aws.tags.map(out.TagSet) end
  if err.code ~= "NoSuchTagSet" then error(err, 0) end
  return {}
end

-- head(ctx, name) -> {Name, Region} | nil: the bucket, wherever it is;
-- a bucket another account owns is a CONFLICT
function M.head(ctx, name, field)
  local h, err = try(ctx, nil, "HeadBucket", { Bucket = name })
  if h then return { Name = name, Region = h.BucketRegion or ctx:aws_region() } end
  if err.status == 404 or err.code == "NotFound" or err.code == "NoSuchBucket" then return nil end
  if err.status == 403 or err.code == "Forbidden" or err.code == "AccessDenied" then
    errors.refuse(field or "bucket", "available", "S3 answers 403 for bucket " .. name .. ": another account owns it (choose " ..
      "another name), or this host may not use it (its IAM policy needs s3:ListBucket on it; hypd iam-policy " ..
      "prints the policy)", { code = "AccessDenied", field_message = (field or "bucket") .. ": not usable" })
  end
  error(err, 0)
end

-- ensure_bucket(ctx, tag [, name [, kind]]) -> {name, region, arn, owned,
-- reused, action}. ctx.state.s3_bucket remembers the name. kind: what
-- the bucket holds, its hypd:storage tag and its name's word (default
-- "s3" and "data"; "mlflow" for MLflow artifacts)
function M.ensure_bucket(ctx, tag, name, kind)
  local st = ctx.state
  st.account_id = st.account_id or ctx:call("sts", "GetCallerIdentity", {}).Account
  local region = ctx:aws_region()
  local named = name ~= nil
  name = name or Names.bucket(tag, st.account_id, region, kind)
  kind = kind or "s3"
  local want = { [Names.TAG] = tag, [M.KIND_TAG] = kind }
  local found -- the bucket as found (not made by this call)
  local b, action = ctx:ensure { type = "s3:bucket", label = "S3 bucket", name = name, id = "Name",
    field = "bucket", exists = { "BucketAlreadyOwnedByYou" },
    search = function()
      local h = M.head(ctx, name)
      if h then
        h.Tags = M.tags(ctx, name, h.Region)
        found = true
      end
      return h
    end,
    -- hypd's name: the bucket must be hypd's for this tag; a named one is used as it is
    owned = not named and function(x)
      if x.Tags[Names.TAG] == tag then return true end
      return false, string.format("its %s tag is %s, not '%s'; to mount it as it is, pass bucket = %s", Names.TAG,
        x.Tags[Names.TAG] and ("'" .. x.Tags[Names.TAG] .. "'") or "missing", tag, name)
    end or nil,
    fields = { Region = region, ["tag:" .. Names.TAG] = tag, ["tag:" .. M.KIND_TAG] = kind },
    desired = not named and { ["tag:" .. M.KIND_TAG] = kind } or nil,
    current = function(x) return { ["tag:" .. M.KIND_TAG] = (x.Tags or {})[M.KIND_TAG] } end,
    update = function(x, changes)
      local tags = {}
      for k, v in pairs(M.tags(ctx, name, x.Region)) do tags[k] = v end
      for k, c in pairs(changes) do tags[k:match("^tag:(.+)$")] = c.to end
      call(ctx, x.Region, "PutBucketTagging", { Bucket = name, Tagging = { TagSet = hypd.aws.tags.list(tags) } })
      x.Tags = tags
      return x
    end,
    placeholder = function() return { Name = name, Region = region, Tags = want } end,
    create = function()
      local cfg = { Tags = hypd.aws.tags.list(want) }
      if region ~= "us-east-1" then cfg.LocationConstraint = region end
      call(ctx, region, "CreateBucket", { Bucket = name, CreateBucketConfiguration = cfg })
      return { Name = name, Region = region, Tags = want }
    end }
  st.s3_bucket, st.s3_bucket_region = b.Name, b.Region
  return { name = b.Name, region = b.Region, arn = "arn:aws:s3:::" .. b.Name, action = action,
    owned = (b.Tags or {})[Names.TAG] == tag, reused = found == true }
end

-- listing ------------------------------------------------------------------------

-- list(ctx, bucket, region, prefix, token, max) -> {folders, objects,
-- next_page_token, truncated}: one page of ListObjectsV2 with delimiter "/"
function M.list(ctx, bucket, region, prefix, token, max)
  local r = call(ctx, region, "ListObjectsV2", { Bucket = bucket, Prefix = prefix ~= "" and prefix or nil,
    Delimiter = "/", ContinuationToken = token, MaxKeys = max })
  local folders, objects = json.array(), json.array()
  for _, c in ipairs(r.CommonPrefixes or {}) do folders[#folders + 1] = c.Prefix end
  for _, o in ipairs(r.Contents or {}) do
    objects[#objects + 1] = { key = o.Key, size = o.Size, last_modified = o.LastModified,
      storage_class = o.StorageClass, etag = o.ETag }
  end
  return { folders = folders, objects = objects, truncated = r.IsTruncated == true,
    next_page_token = r.IsTruncated and r.NextContinuationToken or nil, key_count = r.KeyCount }
end

-- holdings(ctx, bucket, region) -> {versions = n, markers = n, more = bool,
-- versioning = status}: what a bucket holds, counted up to 1000 of each
function M.holdings(ctx, bucket, region)
  local v = call(ctx, region, "GetBucketVersioning", { Bucket = bucket })
  local r = call(ctx, region, "ListObjectVersions", { Bucket = bucket, MaxKeys = 1000 })
  return { versions = #(r.Versions or {}), markers = #(r.DeleteMarkers or {}), more = r.IsTruncated == true,
    versioning = v.Status }
end

-- empty(ctx, bucket, region) -> n: deletes every object version and delete
-- marker (the objects of an unversioned bucket are its null versions), a
-- thousand a call
function M.empty(ctx, bucket, region)
  local n = 0
  while true do
    ctx:check_cancel()
    local r = call(ctx, region, "ListObjectVersions", { Bucket = bucket, MaxKeys = 1000 })
    local batch = json.array()
    for _, list in ipairs { r.Versions or {}, r.DeleteMarkers or {} } do
      for _, x in ipairs(list) do batch[#batch + 1] = { Key = x.Key, VersionId = x.VersionId } end
    end
    if #batch == 0 then return n end
    local d = call(ctx, region, "DeleteObjects", { Bucket = bucket, Delete = { Objects = batch, Quiet = true } })
    if d.Errors and #d.Errors > 0 then
      local e = d.Errors[1]
      errors.raise("FAILED", string.format("emptying S3 bucket %s: %d objects could not be deleted (first: %s %s: " ..
        "%s)", bucket, #d.Errors, tostring(e.Key), tostring(e.Code), tostring(e.Message)), { bucket = bucket })
    end
    n = n + #batch
    ctx:progress(string.format("emptying S3 bucket %s: %d object versions deleted", bucket, n))
  end
end

function M.delete_bucket(ctx, bucket, region)
  call(ctx, region, "DeleteBucket", { Bucket = bucket })
end

return M
