-- sandbox S3 multipart uploads (what SDK transfer managers and `aws s3 cp`
-- use for large files): create, upload parts, list parts, complete (the
-- ETag is the md5 of the parts' md5s, "-N"), abort, list uploads.
--
-- Record "upload/<bucket>"/<UploadId>: { UploadId, Key, Initiated, meta =
--   { ContentType, Metadata, ServerSideEncryption, StorageClass },
--   parts = { ["<n>"] = { ETag, Size, LastModified } } }; part bytes are
--   records "part/<bucket>/<UploadId>"/<n>: { Body (base64) }.
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = { operations = {} }
local ops = M.operations

-- M.bucket(ctx, name) and M.store(ctx, bucket, key, body, meta) are set by s3.lua

local MIN_PART = 5 * 1024 * 1024

local function upload_of(ctx, b, id, key)
  local u = type(id) == "string" and ctx.state:get("upload/" .. b.Name, id)
  if not u or (key and u.Key ~= key) then
    ctx.error("NoSuchUpload", "The specified upload does not exist. The upload ID may be invalid, or the upload " ..
      "may have been aborted or completed.", 404, { UploadId = tostring(id) })
  end
  return u
end

local function drop(ctx, b, u)
  for n in pairs(u.parts) do ctx.state:delete("part/" .. b.Name .. "/" .. u.UploadId, n) end
  ctx.state:delete("upload/" .. b.Name, u.UploadId)
end

function ops.CreateMultipartUpload(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  if type(input.Key) ~= "string" or input.Key == "" or #input.Key > 1024 then
    ctx.error("KeyTooLongError", "Your key is too long", 400)
  end
  local id = sys.b64encode(sys.random_bytes(48)):gsub("[+/=]", { ["+"] = ".", ["/"] = "_", ["="] = "" })
  local meta = { ContentType = input.ContentType, Metadata = input.Metadata or json.object(),
                 ServerSideEncryption = input.ServerSideEncryption, StorageClass = input.StorageClass }
  ctx.state:put("upload/" .. b.Name, id, { UploadId = id, Key = input.Key, Initiated = math.floor(ctx.now()),
    meta = meta, parts = json.object() })
  ctx.target = b.Name .. "/" .. input.Key
  return { Bucket = b.Name, Key = input.Key, UploadId = id }
end

function ops.UploadPart(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local u = upload_of(ctx, b, input.UploadId, input.Key)
  local n = math.tointeger(tonumber(input.PartNumber))
  if not n or n < 1 or n > 10000 then
    ctx.error("InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive", 400,
      { ArgumentName = "partNumber", ArgumentValue = tostring(input.PartNumber) })
  end
  local body = input.Body or ""
  if input.ContentMD5 ~= nil and sys.b64decode(input.ContentMD5) ~= sys.digest("md5", body, "raw") then
    ctx.error("BadDigest", "The Content-MD5 you specified did not match what we received.", 400)
  end
  local etag = '"' .. sys.digest("md5", body, "hex") .. '"'
  ctx.state:put("part/" .. b.Name .. "/" .. u.UploadId, tostring(n), { Body = sys.b64encode(body) })
  u.parts[tostring(n)] = { ETag = etag, Size = #body, LastModified = math.floor(ctx.now()) }
  ctx.state:put("upload/" .. b.Name, u.UploadId, u)
  ctx.target = b.Name .. "/" .. u.Key
  return { ETag = etag }
end

local function sorted_parts(u)
  local out = {}
  for n, p in pairs(u.parts) do out[#out + 1] = { PartNumber = tonumber(n), ETag = p.ETag, Size = p.Size,
    LastModified = p.LastModified } end
  table.sort(out, function(a, c) return a.PartNumber < c.PartNumber end)
  return out
end

function ops.ListParts(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local u = upload_of(ctx, b, input.UploadId, input.Key)
  local max = math.min(math.tointeger(tonumber(input.MaxParts or 1000)) or 1000, 1000)
  local after = math.tointeger(tonumber(input.PartNumberMarker or 0)) or 0
  local parts, truncated = json.array(), false
  for _, p in ipairs(sorted_parts(u)) do
    if p.PartNumber > after then
      if #parts == max then truncated = true break end
      parts[#parts + 1] = p
    end
  end
  return { Bucket = b.Name, Key = u.Key, UploadId = u.UploadId, PartNumberMarker = after, MaxParts = max,
           NextPartNumberMarker = truncated and parts[#parts].PartNumber or nil, IsTruncated = truncated,
           Parts = #parts > 0 and parts or nil, StorageClass = "STANDARD" }
end

function ops.CompleteMultipartUpload(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local u = upload_of(ctx, b, input.UploadId, input.Key)
  local wanted = (input.MultipartUpload or {}).Parts or {}
  if #wanted == 0 then
    ctx.error("MalformedXML", "The XML you provided was not well-formed or did not validate against our " ..
      "published schema", 400)
  end
  local chunks, md5s, last = {}, {}, 0
  for i, w in ipairs(wanted) do
    local n = math.tointeger(tonumber(w.PartNumber))
    if not n or n <= last then
      ctx.error("InvalidPartOrder", "The list of parts was not in ascending order. The parts list must be " ..
        "specified in order of the part number.", 400)
    end
    last = n
    local p = u.parts[tostring(n)]
    local etag = type(w.ETag) == "string" and w.ETag:gsub('"', "") or ""
    if not p or p.ETag:gsub('"', "") ~= etag then
      ctx.error("InvalidPart", "One or more of the specified parts could not be found. The part may not have " ..
        "been uploaded, or the specified entity tag may not match the part's entity tag.", 400,
        { UploadId = u.UploadId, PartNumber = n, ETag = tostring(w.ETag) })
    end
    if p.Size < MIN_PART and i < #wanted then
      ctx.error("EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.", 400,
        { ProposedSize = p.Size, MinSizeAllowed = MIN_PART, PartNumber = n })
    end
    local r = ctx.state:get("part/" .. b.Name .. "/" .. u.UploadId, tostring(n))
    chunks[#chunks + 1] = r and sys.b64decode(r.Body) or ""
    md5s[#md5s + 1] = sys.digest("md5", chunks[#chunks], "raw")
  end
  local o = M.store(ctx, b, u.Key, table.concat(chunks), u.meta)
  o.ETag = '"' .. sys.digest("md5", table.concat(md5s), "hex") .. "-" .. #wanted .. '"'
  ctx.state:put("object/" .. b.Name, u.Key, o)
  drop(ctx, b, u)
  ctx.target = b.Name .. "/" .. u.Key
  return { Location = string.format("http://%s.s3.%s.amazonaws.com/%s", b.Name, b.Region, u.Key),
           Bucket = b.Name, Key = u.Key, ETag = o.ETag, VersionId = o.VersionId,
           ServerSideEncryption = o.ServerSideEncryption }
end

function ops.AbortMultipartUpload(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local u = upload_of(ctx, b, input.UploadId, input.Key)
  drop(ctx, b, u)
  ctx.target = b.Name .. "/" .. u.Key
  return {}
end

function ops.ListMultipartUploads(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local out = json.array()
  for _, u in ipairs(ctx.state:list("upload/" .. b.Name)) do
    if not input.Prefix or u.Key:sub(1, #input.Prefix) == input.Prefix then
      out[#out + 1] = { Key = u.Key, UploadId = u.UploadId, Initiated = u.Initiated, StorageClass = "STANDARD" }
    end
  end
  table.sort(out, function(a, c) return a.Key < c.Key or (a.Key == c.Key and a.Initiated < c.Initiated) end)
  return { Bucket = b.Name, Uploads = #out > 0 and out or nil, IsTruncated = false, MaxUploads = 1000,
           Prefix = input.Prefix }
end

return M
