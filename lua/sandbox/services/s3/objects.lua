-- sandbox S3 objects: put, get (with ranges and conditions), head, delete,
-- copy, ListObjectsV2 (prefix, delimiter, pages). The batch delete
-- (DeleteObjects) is in s3/versions.lua, with the versions.
--
-- Record "object/<bucket>"/<key>: { Key, Size, ETag (quoted md5 hex),
--   LastModified, ContentType, Metadata, VersionId, ServerSideEncryption,
--   StorageClass }; its bytes are the record "body/<bucket>"/<key>:
--   { Body (base64) }, apart so listings do not read object bodies, or
--   { Fill = n }: n zero bytes, made on read (what a simulated writer, such
--   as the sandbox's model download, puts for a file of gigabytes).
-- This is the current version of a key; what a versioned bucket keeps
-- besides is in s3/versions.lua.
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = { operations = {} }
local ops = M.operations

-- M.bucket(ctx, name, head) is set by s3.lua (the bucket records live there)

local function kind(bucket) return "object/" .. bucket end
local function body_kind(bucket) return "body/" .. bucket end

-- body_of(record [, first, last]) -> the bytes of a body record (0-based,
-- inclusive range; a Fill body makes only the bytes asked for)
function M.body_of(r, first, last)
  if not r then return "" end
  if r.Fill then
    local n = r.Fill
    if first then n = math.max(0, math.min(last, r.Fill - 1) - first + 1) end
    return string.rep("\0", n)
  end
  local body = sys.b64decode(r.Body)
  if first then body = body:sub(first + 1, last + 1) end
  return body
end

local function read_body(ctx, bucket, key, first, last)
  return M.body_of(ctx.state:get(body_kind(bucket), key), first, last)
end

local function remove(ctx, bucket, key)
  ctx.state:delete(kind(bucket), key)
  ctx.state:delete(body_kind(bucket), key)
end

local function check_key(ctx, key)
  if type(key) ~= "string" or key == "" then
    ctx.error("InvalidArgument", "Key must not be empty", 400)
  end
  if #key > 1024 then
    ctx.error("KeyTooLongError", "Your key is too long", 400, { Size = #key, MaxSizeAllowed = 1024 })
  end
end

local function get_object(ctx, b, key, head)
  check_key(ctx, key)
  local o = ctx.state:get(kind(b.Name), key)
  if not o then
    if head then ctx.error("NotFound", "Not Found", 404) end
    ctx.error("NoSuchKey", "The specified key does not exist.", 404, { Key = key })
  end
  return o
end

local function sse_of(b)
  local r = b.Encryption and b.Encryption.Rules and b.Encryption.Rules[1]
  return r and r.ApplyServerSideEncryptionByDefault.SSEAlgorithm or "AES256"
end

local function copy_map(m)
  local out = json.object()
  for k, v in pairs(m or {}) do out[k:lower()] = v end
  return out
end

local function store(ctx, b, key, body, meta)
  local o = {
    Key = key, Size = #body,
    ETag = '"' .. sys.digest("md5", body, "hex") .. '"', LastModified = math.floor(ctx.now()),
    ContentType = meta.ContentType or "binary/octet-stream", Metadata = copy_map(meta.Metadata),
    ServerSideEncryption = meta.ServerSideEncryption or sse_of(b), StorageClass = meta.StorageClass or "STANDARD",
    ContentEncoding = meta.ContentEncoding, ContentDisposition = meta.ContentDisposition,
    CacheControl = meta.CacheControl,
  }
  if b.Versioning and b.Versioning.Status == "Enabled" then o.VersionId = sys.b64encode(sys.random_bytes(24)):gsub(
    "[+/=]", { ["+"] = ".", ["/"] = "_", ["="] = "" }) end
  ctx.state:put(body_kind(b.Name), key, { Body = sys.b64encode(body) })
  ctx.state:put(kind(b.Name), key, o)
  return o
end
M.store = store

-- store_filled(ctx, b, key, size, meta, etag) -> the object record of an
-- object of size zero bytes kept as { Fill = size } (its ETag given: a
-- multipart upload's "<md5>-<parts>")
function M.store_filled(ctx, b, key, size, meta, etag)
  local o = store(ctx, b, key, "", meta)
  o.Size, o.ETag = size, etag or o.ETag
  ctx.state:put(body_kind(b.Name), key, { Fill = size })
  ctx.state:put(kind(b.Name), key, o)
  return o
end

function ops.PutObject(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  check_key(ctx, input.Key)
  local body = input.Body or ""
  if input.ContentMD5 ~= nil then
    local raw = sys.b64decode(input.ContentMD5)
    if not raw or #raw ~= 16 then
      ctx.error("InvalidDigest", "The Content-MD5 you specified was invalid.", 400, { ["Content-MD5"] = input.ContentMD5 })
    end
    if raw ~= sys.digest("md5", body, "raw") then
      ctx.error("BadDigest", "The Content-MD5 you specified did not match what we received.", 400)
    end
  end
  if input.IfNoneMatch == "*" and ctx.state:get(kind(b.Name), input.Key) then
    ctx.error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold", 412,
      { Condition = "If-None-Match" })
  end
  if #body > 5 * 1024 * 1024 * 1024 then
    ctx.error("EntityTooLarge", "Your proposed upload exceeds the maximum allowed size", 400)
  end
  local o = store(ctx, b, input.Key, body, input)
  ctx.target = b.Name .. "/" .. input.Key
  return { ETag = o.ETag, ServerSideEncryption = o.ServerSideEncryption, VersionId = o.VersionId }
end

-- range(ctx, spec, size) -> first, last (0-based, inclusive) or nil for the whole object
local function range(ctx, spec, size)
  if spec == nil then return nil end
  local a, z = spec:match("^bytes=(%d*)%-(%d*)$")
  if not a or (a == "" and z == "") then return nil end -- S3 ignores ranges it cannot parse
  local first, last
  if a == "" then
    local n = tonumber(z)
    if n == 0 then
      ctx.error("InvalidRange", "The requested range is not satisfiable", 416,
        { RangeRequested = spec, ActualObjectSize = size })
    end
    first, last = math.max(size - n, 0), size - 1
  else
    first = tonumber(a)
    last = z ~= "" and math.min(tonumber(z), size - 1) or size - 1
    if z ~= "" and tonumber(z) < first then return nil end
  end
  if first >= size then
    ctx.error("InvalidRange", "The requested range is not satisfiable", 416,
      { RangeRequested = spec, ActualObjectSize = size })
  end
  return first, last
end

local function conditions(ctx, input, o)
  if input.IfMatch ~= nil and input.IfMatch ~= o.ETag and input.IfMatch ~= o.ETag:gsub('"', "") and
      input.IfMatch ~= "*" then
    ctx.error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold", 412,
      { Condition = "If-Match" })
  end
  if input.IfNoneMatch ~= nil and (input.IfNoneMatch == o.ETag or input.IfNoneMatch == o.ETag:gsub('"', "") or
      input.IfNoneMatch == "*") then
    ctx.error("NotModified", "Not Modified", 304)
  end
end

local function object_view(o)
  return {
    ETag = o.ETag, LastModified = o.LastModified, ContentType = o.ContentType, Metadata = o.Metadata,
    VersionId = o.VersionId, ServerSideEncryption = o.ServerSideEncryption, AcceptRanges = "bytes",
    StorageClass = o.StorageClass ~= "STANDARD" and o.StorageClass or nil, ContentEncoding = o.ContentEncoding,
    ContentDisposition = o.ContentDisposition, CacheControl = o.CacheControl,
  }
end

function ops.GetObject(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local o = get_object(ctx, b, input.Key)
  conditions(ctx, input, o)
  local out = object_view(o)
  local first, last = range(ctx, input.Range, o.Size)
  local body = read_body(ctx, b.Name, o.Key, first, last)
  if first then
    out.ContentRange = string.format("bytes %d-%d/%d", first, last, o.Size)
  end
  out.Body, out.ContentLength = body, #body
  out.ContentType = input.ResponseContentType or out.ContentType
  return out
end

function ops.HeadObject(ctx, input)
  local b = M.bucket(ctx, input.Bucket, true)
  local o = get_object(ctx, b, input.Key, true)
  conditions(ctx, input, o)
  local out = object_view(o)
  out.ContentLength = o.Size
  local first, last = range(ctx, input.Range, o.Size)
  if first then
    out.ContentLength = last - first + 1
    out.ContentRange = string.format("bytes %d-%d/%d", first, last, o.Size)
  end
  return out
end

function ops.DeleteObject(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  check_key(ctx, input.Key)
  remove(ctx, b.Name, input.Key)
  ctx.target = b.Name .. "/" .. input.Key
  return {}
end

local function unescape(s) return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)) end

function ops.CopyObject(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  check_key(ctx, input.Key)
  local src = unescape((input.CopySource or ""):gsub("%?versionId=.*$", ""))
  local sb, sk = src:match("^/?([^/]+)/(.+)$")
  if not sb then
    ctx.error("InvalidArgument", "Invalid copy source object key", 400,
      { ArgumentName = "x-amz-copy-source", ArgumentValue = tostring(input.CopySource) })
  end
  local source_bucket = M.bucket(ctx, sb, false, true) -- copies cross regions
  local o = get_object(ctx, source_bucket, sk)
  local replace = input.MetadataDirective == "REPLACE"
  if sb == b.Name and sk == input.Key and not replace and input.StorageClass == nil and
      input.ServerSideEncryption == nil then
    ctx.error("InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself " ..
      "without changing the object's metadata, storage class, website redirect location or encryption attributes.",
      400)
  end
  local meta = replace and input or { ContentType = o.ContentType, Metadata = o.Metadata,
    ContentEncoding = o.ContentEncoding, ContentDisposition = o.ContentDisposition, CacheControl = o.CacheControl }
  meta.ServerSideEncryption = input.ServerSideEncryption
  meta.StorageClass = input.StorageClass
  local src_body = ctx.state:get(body_kind(sb), sk)
  local n
  if src_body and src_body.Fill then
    n = M.store_filled(ctx, b, input.Key, src_body.Fill, meta, o.ETag)
  else
    n = store(ctx, b, input.Key, read_body(ctx, sb, sk), meta)
  end
  ctx.target = b.Name .. "/" .. input.Key
  return { CopyObjectResult = { ETag = n.ETag, LastModified = n.LastModified }, VersionId = n.VersionId,
           CopySourceVersionId = o.VersionId, ServerSideEncryption = n.ServerSideEncryption }
end

-- S3's encoding-type=url: keys percent-encoded, "/" kept
local function urlenc(s)
  if s == nil then return nil end
  return (s:gsub("[^%w%-%._~/]", function(c) return string.format("%%%02X", c:byte()) end))
end

-- max_keys(ctx, input) -> the page size a listing asks for (MaxKeys, at
-- most 1000; one outside 0..2147483647 never gets here: sandbox._codec_s3_rules)
local function max_keys(_, input)
  return math.min(math.tointeger(input.MaxKeys) or 1000, 1000)
end
M.max_keys, M.urlenc = max_keys, urlenc -- also s3/versions.lua's

function ops.ListObjectsV2(ctx, input)
  local b = M.bucket(ctx, input.Bucket)
  local max = max_keys(ctx, input)
  -- a bad EncodingType never gets here: sandbox._codec_s3_rules refuses it
  local after = input.StartAfter
  if input.ContinuationToken ~= nil then
    local tok = sys.b64decode(input.ContinuationToken)
    if not tok or tok:sub(1, 2) ~= "k:" then
      ctx.error("InvalidArgument", "The continuation token provided is incorrect", 400,
        { ArgumentName = "continuation-token" })
    end
    after = tok:sub(3)
  end
  local prefix, delim = input.Prefix or "", input.Delimiter
  if delim == "" then delim = nil end
  local enc = input.EncodingType == "url" and urlenc or function(s) return s end
  local contents, prefixes = json.array(), json.array()
  local seen, count, truncated, last = {}, 0, false, nil
  for _, o in ipairs(ctx.state:list(kind(b.Name))) do
    local key = o.Key
    if key:sub(1, #prefix) == prefix and (not after or key > after) then
      local cp
      if delim then
        local i = key:find(delim, #prefix + 1, true)
        if i then cp = key:sub(1, i + #delim - 1) end
      end
      if not (cp and seen[cp]) then
        if count >= max then truncated = max > 0 break end
        count = count + 1
        if cp then
          seen[cp] = true
          prefixes[#prefixes + 1] = { Prefix = enc(cp) }
          last = cp
        else
          contents[#contents + 1] = { Key = enc(key), LastModified = o.LastModified, ETag = o.ETag, Size = o.Size,
                                      StorageClass = o.StorageClass }
          last = key
        end
      end
    end
  end
  local nxt
  if truncated then
    -- a common prefix continues after every key it rolls up
    nxt = sys.b64encode("k:" .. (seen[last] and last .. "\244\143\191\191" or last))
  end
  return {
    Name = b.Name, Prefix = enc(prefix), Delimiter = enc(delim), MaxKeys = max, KeyCount = count,
    IsTruncated = truncated, Contents = #contents > 0 and contents or nil,
    CommonPrefixes = #prefixes > 0 and prefixes or nil, EncodingType = input.EncodingType,
    ContinuationToken = input.ContinuationToken, NextContinuationToken = nxt,
    StartAfter = enc(input.StartAfter),
  }
end

return M
