-- sandbox S3 object versions: what a versioned bucket (versioning Enabled,
-- or Suspended after it was) keeps besides the current version of each key.
--
-- The current version stays where s3/objects.lua keeps it ("object/<bucket>",
-- VersionId nil meaning "null"); the others (noncurrent versions and
-- delete markers) are records "version/<bucket>"/<key>\n<seq> { Key,
-- VersionId, DeleteMarker, Size, ETag, LastModified, StorageClass, seq, ... }
-- with their bytes in "vbody/<bucket>" under the same id. As S3 does:
--   * an overwrite (PutObject, CopyObject, CompleteMultipartUpload) in a
--     versioned bucket keeps the version it replaces, except a null
--     version while versioning is Suspended (a bucket has one null version);
--   * a DeleteObject (or DeleteObjects item) without a version id adds a
--     delete marker (version id null while Suspended) and the key
--     disappears from ListObjectsV2 and GetObject;
--   * with a version id it deletes that version for good; when that was the
--     latest, the version before it becomes current again (unless that one
--     is a delete marker);
--   * GetObject and HeadObject take a version id (NoSuchVersion when it is
--     not there; MethodNotAllowed for a delete marker);
--   * ListObjectVersions lists versions and delete markers, newest first
--     per key, with prefix, delimiter and KeyMarker/VersionIdMarker pages;
--   * DeleteBucket refuses a bucket that still has any version or marker.
-- wrap(ops) replaces those operations in the table s3.lua serves, and adds
-- DeleteObjects (versioned buckets or not) and ListObjectVersions.
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

-- M.bucket(ctx, name, head, any_region) and M.OWNER are set by s3.lua

local function okind(b) return "object/" .. b end
local function bkind(b) return "body/" .. b end
local function vkind(b) return "version/" .. b end
local function vbkind(b) return "vbody/" .. b end

local function versioned(b)
  local s = b.Versioning and b.Versioning.Status
  return s == "Enabled" or s == "Suspended"
end

local function vid_of(o) return o.VersionId or "null" end

local function new_vid()
  return (sys.b64encode(sys.random_bytes(24)):gsub("[+/=]", { ["+"] = ".", ["/"] = "_", ["="] = "" }))
end

local function next_seq(ctx, b)
  local cur = ctx.state:get("bucket", b.Name) or b
  cur.VersionSeq = (cur.VersionSeq or 0) + 1
  ctx.state:put("bucket", b.Name, cur)
  b.VersionSeq = cur.VersionSeq
  return cur.VersionSeq
end

-- versions_of(ctx, bucket, key) -> the archived entries of key, newest first
local function versions_of(ctx, bucket, key)
  local out = {}
  for _, v in ipairs(ctx.state:list(vkind(bucket))) do
    if v.Key == key then out[#out + 1] = v end
  end
  table.sort(out, function(x, y) return x.seq > y.seq end)
  return out
end

local function vid_key(v) return v.Key .. "\n" .. string.format("%012d", v.seq) end

local function drop_version(ctx, bucket, v)
  ctx.state:delete(vkind(bucket), vid_key(v))
  ctx.state:delete(vbkind(bucket), vid_key(v))
end

-- drop_null(ctx, bucket, key): the archived null version of key goes
-- (a new null version replaces it)
local function drop_null(ctx, bucket, key)
  for _, v in ipairs(versions_of(ctx, bucket, key)) do
    if v.VersionId == "null" then drop_version(ctx, bucket, v) end
  end
end

-- archive(ctx, b, key) -> undo(): the current version of key is kept as a
-- noncurrent one (not a null one while Suspended: that one is replaced)
local function archive(ctx, b, key)
  local cur = ctx.state:get(okind(b.Name), key)
  if not cur then return function() end end
  if b.Versioning.Status == "Suspended" and vid_of(cur) == "null" then return function() end end
  local v = json.decode(json.encode(cur))
  v.VersionId, v.seq = vid_of(cur), next_seq(ctx, b)
  local id = vid_key(v)
  ctx.state:put(vkind(b.Name), id, v)
  local body = ctx.state:get(bkind(b.Name), key)
  if body then ctx.state:put(vbkind(b.Name), id, body) end
  return function()
    ctx.state:delete(vkind(b.Name), id)
    ctx.state:delete(vbkind(b.Name), id)
  end
end

-- overwriting(orig): an operation that writes input.Key keeps what it replaces
local function overwriting(orig)
  return function(ctx, input)
    local b = M.bucket(ctx, input.Bucket)
    if not versioned(b) or type(input.Key) ~= "string" then return orig(ctx, input) end
    local undo = archive(ctx, b, input.Key)
    local ok, out = pcall(orig, ctx, input)
    if not ok then
      undo()
      error(out, 0)
    end
    if b.Versioning.Status == "Suspended" then drop_null(ctx, b.Name, input.Key) end
    return out
  end
end

-- restore(ctx, bucket, v): an archived version becomes the current one again
local function restore(ctx, bucket, v)
  local o = json.decode(json.encode(v))
  o.seq, o.DeleteMarker = nil, nil
  if o.VersionId == "null" then o.VersionId = nil end
  local body = ctx.state:get(vbkind(bucket), vid_key(v))
  drop_version(ctx, bucket, v)
  ctx.state:put(bkind(bucket), v.Key, body or { Body = "" })
  ctx.state:put(okind(bucket), v.Key, o)
end

-- delete_marker(ctx, b, key) -> {DeleteMarker, VersionId}
local function delete_marker(ctx, b, key)
  archive(ctx, b, key)
  ctx.state:delete(okind(b.Name), key)
  ctx.state:delete(bkind(b.Name), key)
  local vid = b.Versioning.Status == "Enabled" and new_vid() or "null"
  if vid == "null" then drop_null(ctx, b.Name, key) end
  local m = { Key = key, VersionId = vid, DeleteMarker = true, LastModified = math.floor(ctx.now()),
    seq = next_seq(ctx, b) }
  ctx.state:put(vkind(b.Name), vid_key(m), m)
  return { DeleteMarker = true, VersionId = vid }
end

-- delete_version(ctx, b, key, vid) -> {VersionId, DeleteMarker}: that
-- version goes for good; the newest remaining one becomes current when
-- the deleted one was the latest
local function delete_version(ctx, b, key, vid)
  local cur = ctx.state:get(okind(b.Name), key)
  local was_latest, marker = false, nil
  if cur and vid_of(cur) == vid then
    ctx.state:delete(okind(b.Name), key)
    ctx.state:delete(bkind(b.Name), key)
    was_latest = true
  else
    local list = versions_of(ctx, b.Name, key)
    for i, v in ipairs(list) do
      if v.VersionId == vid then
        drop_version(ctx, b.Name, v)
        marker = v.DeleteMarker or nil
        was_latest = i == 1 and cur == nil
        break
      end
    end
  end
  if was_latest then
    local newest = versions_of(ctx, b.Name, key)[1]
    if newest and not newest.DeleteMarker then restore(ctx, b.Name, newest) end
  end
  return { VersionId = vid, DeleteMarker = marker }
end

local function check_vid(ctx, vid)
  if vid ~= "null" and not tostring(vid):match("^[%w._-]+$") then
    ctx.error("InvalidArgument", "Invalid version id specified", 400,
      { ArgumentName = "versionId", ArgumentValue = tostring(vid) })
  end
end

local function wrap_delete(orig)
  return function(ctx, input)
    local b = M.bucket(ctx, input.Bucket)
    if input.VersionId == nil and not versioned(b) then return orig(ctx, input) end
    if type(input.Key) ~= "string" or input.Key == "" then return orig(ctx, input) end
    ctx.target = b.Name .. "/" .. input.Key
    if input.VersionId ~= nil then
      check_vid(ctx, input.VersionId)
      return delete_version(ctx, b, input.Key, input.VersionId)
    end
    return delete_marker(ctx, b, input.Key)
  end
end

-- DeleteObjects: up to 1000 keys (or versions) a call, in any bucket
local function delete_many(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local list = (input.Delete or {}).Objects or {}
  if #list == 0 or #list > 1000 then
    ctx.error("MalformedXML", "The XML you provided was not well-formed or did not validate against our " ..
      "published schema", 400)
  end
  local deleted, errs = json.array(), json.array()
  for _, item in ipairs(list) do
    local key = item.Key
    if type(key) ~= "string" or key == "" or #key > 1024 then
      errs[#errs + 1] = { Key = tostring(key), Code = "InvalidArgument", Message = "Invalid key" }
    elseif item.VersionId ~= nil and item.VersionId ~= "null" and not tostring(item.VersionId):match("^[%w._-]+$") then
      errs[#errs + 1] = { Key = key, VersionId = tostring(item.VersionId), Code = "NoSuchVersion",
        Message = "The specified version does not exist." }
    else
      local r
      if item.VersionId ~= nil then
        r = delete_version(ctx, b, key, item.VersionId)
        r = { Key = key, VersionId = item.VersionId, DeleteMarker = r.DeleteMarker,
          DeleteMarkerVersionId = r.DeleteMarker and item.VersionId or nil }
      elseif versioned(b) then
        r = delete_marker(ctx, b, key)
        r = { Key = key, DeleteMarker = true, DeleteMarkerVersionId = r.VersionId }
      else
        ctx.state:delete(okind(b.Name), key)
        ctx.state:delete(bkind(b.Name), key)
        r = { Key = key }
      end
      if not input.Delete.Quiet then deleted[#deleted + 1] = r end
    end
  end
  ctx.target = b.Name
  return { Deleted = #deleted > 0 and deleted or nil, Errors = #errs > 0 and errs or nil }
end

-- reading one version -----------------------------------------------------------

local function version_of(ctx, b, key, vid, head)
  for _, v in ipairs(versions_of(ctx, b.Name, key)) do
    if v.VersionId == vid then
      if v.DeleteMarker then
        ctx.error("MethodNotAllowed", "The specified method is not allowed against this resource.", 405,
          { Method = head and "HEAD" or "GET", ResourceType = "DeleteMarker" })
      end
      return v
    end
  end
  if head then ctx.error("NotFound", "Not Found", 404) end
  ctx.error("NoSuchVersion", "The specified version does not exist.", 404, { Key = key, VersionId = vid })
end

local function wrap_read(orig, head)
  return function(ctx, input)
    if input.VersionId == nil then return orig(ctx, input) end
    local b = M.bucket(ctx, input.Bucket, head)
    local cur = type(input.Key) == "string" and ctx.state:get(okind(b.Name), input.Key)
    if cur and vid_of(cur) == input.VersionId then return orig(ctx, input) end
    check_vid(ctx, input.VersionId)
    local v = version_of(ctx, b, input.Key, input.VersionId, head)
    local out = { ETag = v.ETag, LastModified = v.LastModified, ContentType = v.ContentType, Metadata = v.Metadata,
      VersionId = v.VersionId, ServerSideEncryption = v.ServerSideEncryption, AcceptRanges = "bytes",
      ContentLength = v.Size }
    if not head then
      local r = ctx.state:get(vbkind(b.Name), vid_key(v))
      out.Body = require("sandbox.services.s3.objects").body_of(r)
    end
    return out
  end
end

-- ListObjectVersions --------------------------------------------------------------

local function list_versions(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local objects = require "sandbox.services.s3.objects"
  local max, urlenc = objects.max_keys(ctx, input), objects.urlenc
  if input.VersionIdMarker ~= nil and input.KeyMarker == nil then
    ctx.error("InvalidArgument", "A version-id marker cannot be specified without a key marker.", 400,
      { ArgumentName = "version-id-marker", ArgumentValue = tostring(input.VersionIdMarker) })
  end
  local prefix, delim = input.Prefix or "", input.Delimiter
  if delim == "" then delim = nil end
  local enc = input.EncodingType == "url" and urlenc or function(s) return s end
  -- every key's entries, newest first: the current version, then the archive
  local by, keys = {}, {}
  local function add(key, e)
    if not by[key] then by[key] = {}; keys[#keys + 1] = key end
    local l = by[key]
    l[#l + 1] = e
  end
  for _, o in ipairs(ctx.state:list(okind(b.Name))) do add(o.Key, { o = o, current = true }) end
  local archived = ctx.state:list(vkind(b.Name))
  table.sort(archived, function(x, y) return x.Key < y.Key or (x.Key == y.Key and x.seq > y.seq) end)
  for _, v in ipairs(archived) do add(v.Key, { o = v }) end
  table.sort(keys)
  local versions, markers, prefixes = json.array(), json.array(), json.array()
  local seen, count, truncated, next_key, next_vid = {}, 0, false, nil, nil
  local km, vm = input.KeyMarker, input.VersionIdMarker
  for _, key in ipairs(keys) do
    if key:sub(1, #prefix) == prefix and (not km or key > km or (key == km and vm ~= nil)) then
      local cp
      if delim then
        local i = key:find(delim, #prefix + 1, true)
        if i then cp = key:sub(1, i + #delim - 1) end
      end
      if cp then
        if not seen[cp] and not (km and cp <= km and km:sub(1, #cp) == cp) then
          if count >= max then truncated = max > 0 break end
          seen[cp] = true
          count = count + 1
          prefixes[#prefixes + 1] = { Prefix = enc(cp) }
          next_key, next_vid = cp, nil
        end
      else
        local list = by[key]
        local skipping = key == km and vm ~= nil
        for i, e in ipairs(list) do
          if skipping then
            if vid_of(e.o) == vm then skipping = false end
          else
            if count >= max then truncated = max > 0 break end
            count = count + 1
            local latest = i == 1
            if e.o.DeleteMarker then
              markers[#markers + 1] = { Owner = M.OWNER, Key = enc(key), VersionId = e.o.VersionId,
                IsLatest = latest, LastModified = e.o.LastModified }
            else
              versions[#versions + 1] = { ETag = e.o.ETag, Size = e.o.Size, StorageClass = e.o.StorageClass or
                "STANDARD", Key = enc(key), VersionId = vid_of(e.o), IsLatest = latest,
                LastModified = e.o.LastModified, Owner = M.OWNER }
            end
            next_key, next_vid = key, vid_of(e.o)
          end
        end
        if truncated then break end
      end
    end
  end
  return {
    Name = b.Name, Prefix = enc(prefix), Delimiter = enc(delim), MaxKeys = max, EncodingType = input.EncodingType,
    KeyMarker = input.KeyMarker or "", VersionIdMarker = input.VersionIdMarker, IsTruncated = truncated,
    NextKeyMarker = truncated and enc(next_key) or nil, NextVersionIdMarker = truncated and next_vid or nil,
    Versions = #versions > 0 and versions or nil, DeleteMarkers = #markers > 0 and markers or nil,
    CommonPrefixes = #prefixes > 0 and prefixes or nil,
  }
end

local function wrap_delete_bucket(orig)
  return function(ctx, input)
    local b = M.bucket(ctx, input.Bucket)
    if #ctx.state:list(vkind(b.Name)) > 0 then
      ctx.error("BucketNotEmpty", "The bucket you tried to delete is not empty. You must delete all versions in " ..
        "the bucket.", 409, { BucketName = b.Name })
    end
    return orig(ctx, input)
  end
end

-- wrap(ops): the operations above replace (or wrap) the ones in ops
function M.wrap(ops)
  for _, name in ipairs { "PutObject", "CopyObject", "CompleteMultipartUpload" } do
    ops[name] = overwriting(ops[name])
  end
  ops.DeleteObject = wrap_delete(ops.DeleteObject)
  ops.DeleteObjects = delete_many
  ops.GetObject = wrap_read(ops.GetObject, false)
  ops.HeadObject = wrap_read(ops.HeadObject, true)
  ops.DeleteBucket = wrap_delete_bucket(ops.DeleteBucket)
  ops.ListObjectVersions = list_versions
end

return M
