-- sandbox._codec_s3: the server side of restXml (S3): path-style and
-- virtual-hosted requests, aws-chunked bodies (SigV4 streaming uploads,
-- trailing checksums), XML configuration bodies, answers whose root element
-- is the one S3 writes (ListBucketResult...), raw object bodies, and
-- <Error> documents (none for HEAD).
local sys = require "hypd.sys"
local xml = require "hypd.xml"
local S = require "hypd.aws.shape"
local R = require "sandbox._codec_rest"
local V = require "sandbox._codec_value"
local X = require "sandbox._codec_xml"
local Q = require "sandbox._codec_query"

local M = {}

local NS = "http://s3.amazonaws.com/doc/2006-03-01/"

-- the root element S3 writes for outputs whose shape does not name one
local ROOT = {
  ListObjects = "ListBucketResult", ListObjectsV2 = "ListBucketResult", ListBuckets = "ListAllMyBucketsResult",
  ListDirectoryBuckets = "ListAllMyDirectoryBucketsResult", ListObjectVersions = "ListVersionsResult",
  CreateMultipartUpload = "InitiateMultipartUploadResult", ListMultipartUploads = "ListMultipartUploadsResult",
  ListParts = "ListPartsResult", DeleteObjects = "DeleteResult", GetBucketAcl = "AccessControlPolicy",
  GetObjectAcl = "AccessControlPolicy", GetBucketTagging = "Tagging", GetObjectTagging = "Tagging",
  GetBucketVersioning = "VersioningConfiguration", GetBucketCors = "CORSConfiguration",
  GetBucketLifecycleConfiguration = "LifecycleConfiguration", GetBucketWebsite = "WebsiteConfiguration",
  GetBucketLogging = "BucketLoggingStatus", GetBucketNotificationConfiguration = "NotificationConfiguration",
  GetBucketRequestPayment = "RequestPaymentConfiguration", GetBucketAccelerateConfiguration =
  "AccelerateConfiguration", GetObjectAttributes = "GetObjectAttributesResponse",
  ListBucketAnalyticsConfigurations = "ListBucketAnalyticsConfigurationResult",
  ListBucketInventoryConfigurations = "ListInventoryConfigurationsResult",
  ListBucketMetricsConfigurations = "ListMetricsConfigurationResult",
  ListBucketIntelligentTieringConfigurations = "ListBucketIntelligentTieringConfigurationsOutput",
}

-- bucket_from_host(host) -> the bucket of a virtual-hosted request
-- ("b.s3.amazonaws.com", "b.s3.us-west-2.amazonaws.com", "b.localhost:4566",
-- "b.s3.localhost.localstack.cloud"), or nil for path style
function M.bucket_from_host(host)
  if type(host) ~= "string" or host:sub(1, 1) == "[" then return nil end
  host = host:lower():match("^([^:]*)")
  if host:match("^[%d.]+$") then return nil end
  local b = host:match("^(.-)%.s3[.-]") or host:match("^(.+)%.localhost$")
  if b and b ~= "s3" and b:match("^[%w][%w.-]*$") then return b end
  return nil
end

-- dechunk(body, headers) -> body, headers of an aws-chunked upload decoded
-- (trailers become headers); the same two when not chunked; or nil, message
function M.dechunk(body, headers)
  local enc = headers["content-encoding"] or ""
  local sha = headers["x-amz-content-sha256"] or ""
  if not enc:lower():find("aws-chunked", 1, true) and not sha:find("^STREAMING%-") then return body, headers end
  local out, pos, n, trailers = {}, 1, #body, {}
  while true do
    local eol = body:find("\r\n", pos, true)
    local size = eol and body:sub(pos, eol - 1):match("^(%x+)")
    if not size or #size > 12 then return nil, "the aws-chunked body has a bad chunk header" end
    size, pos = tonumber(size, 16), eol + 2
    if size == 0 then
      while pos <= n do
        local e = body:find("\r\n", pos, true) or n + 1
        local line = body:sub(pos, e - 1)
        pos = e + 2
        if line == "" then break end
        local k, v = line:match("^([^:]+):%s*(.-)%s*$")
        if k then trailers[k:lower()] = v end
      end
      break
    end
    if pos + size + 1 > n or body:sub(pos + size, pos + size + 1) ~= "\r\n" then
      return nil, "the aws-chunked body ends before its chunk does"
    end
    out[#out + 1] = body:sub(pos, pos + size - 1)
    pos = pos + size + 2
  end
  local h = {}
  for k, v in pairs(headers) do h[k] = v end
  for k, v in pairs(trailers) do h[k] = v end
  local rest = {}
  for tok in enc:gmatch("[^,%s]+") do
    if tok:lower() ~= "aws-chunked" then rest[#rest + 1] = tok end
  end
  h["content-encoding"] = #rest > 0 and table.concat(rest, ",") or nil
  body = table.concat(out)
  h["content-length"], h["x-amz-decoded-content-length"], h["x-amz-trailer"] = tostring(#body), nil, nil
  return body, h
end

local function wire(m) return m.name or m[1] end

-- read_xml(C, model, head, traits, text, path) -> value of an XML body;
-- or nil, kind, detail
local function read_xml(C, model, head, traits, text, path)
  local root, err = xml.decode(text)
  if not root then
    return nil, "malformed", "The XML you provided was not well-formed or did not validate against our published " ..
      "schema (" .. tostring(err and err.message or err) .. ")"
  end
  local v = X.read(C, model, head, traits, root, path)
  if v == nil then return nil, "type", C.bad end
  return v
end

-- decode(model, req) -> operation name, input, bucket; or nil, kind, detail, code
function M.decode(model, req)
  local body, headers = M.dechunk(req.body, req.headers)
  if not body then return nil, "malformed", headers, "IncompleteBody" end
  local segs, trailing = R.split_path(req.path)
  local vbucket = M.bucket_from_host(req.host or headers.host)
  if vbucket then table.insert(segs, 1, vbucket) end
  local q = R.parse_query(req.query)
  local route, labels = R.route(model, req.method, segs, trailing, q, headers)
  if not route then return nil, "unknown", "The specified method is not allowed against this resource." end
  local C = V.context("wire", wire)
  local input = R.bind(C, model, route, labels, q, headers)
  if not input then return nil, "type", C.bad end
  local shape = route.op.input and model.shapes[route.op.input]
  local pm, raw = R.payload(model, shape)
  if pm and raw then
    if body ~= "" then input[pm[1]] = body end
  elseif pm and not body:match("^%s*$") then
    local v, kind, detail = read_xml(C, model, pm[2], pm, body, wire(pm))
    if v == nil then return nil, kind, detail end
    input[pm[1]] = v
  elseif not pm and shape and R.has_body_members(shape) and not body:match("^%s*$") then
    local v, kind, detail = read_xml(C, model, route.op.input, {}, body, "")
    if v == nil then return nil, kind, detail end
    for _, m in ipairs(shape[2]) do
      if not m.loc then input[m[1]] = v[m[1]] end
    end
  end
  if shape then
    local missing = V.missing(C, model, route.op.input, input, "")
    if #missing > 0 then
      local w = pm and wire(pm)
      if w and missing[1] == w then return nil, "missing", missing, "MissingRequestBodyError" end
      return nil, "missing", missing, w and missing[1]:sub(1, #w + 1) == w .. "." and "MalformedXML" or nil
    end
  end
  return route.name, input, input.Bucket
end

local function host_id(rid) return sys.b64encode(tostring(rid) .. "/hypd-sandbox") end

-- encode(model, op, name, output, rid, method) -> status, headers, body
function M.encode(model, op, name, output, rid, method)
  local headers = { ["x-amz-request-id"] = rid, ["x-amz-id-2"] = host_id(rid) }
  local status = op.status or 200
  local shape = op.output and model.shapes[op.output]
  if not shape then return status, headers, "" end
  status = R.write_headers(model, shape, output, headers) or status
  local pm, raw = R.payload(model, shape)
  local body = ""
  if pm and raw then
    local x = output[pm[1]]
    body = type(x) == "string" and x or ""
    headers["content-type"] = headers["content-type"] or "binary/octet-stream"
    if name == "GetObject" and S.present(output.ContentRange) and status == 200 then status = 206 end
  elseif name == "GetBucketLocation" then
    body = X.DECL .. '<LocationConstraint xmlns="' .. NS .. '">' ..
      X.esc(type(output.LocationConstraint) == "string" and output.LocationConstraint or "") .. "</LocationConstraint>"
  elseif pm then
    local x = output[pm[1]]
    if S.present(x) then
      local buf = { X.DECL }
      X.write(buf, model, pm[2], { xmlns = NS }, x, pm.name or pm[1])
      body = table.concat(buf)
    end
  elseif R.has_body_members(shape) then
    local buf = { X.DECL }
    X.write(buf, model, op.output, { xmlns = NS }, output, ROOT[name] or op.output:gsub("Output$", "Result"))
    body = table.concat(buf)
  end
  if body ~= "" and not (pm and raw) then headers["content-type"] = "application/xml" end
  if method == "HEAD" then
    body = ""
  elseif headers["content-length"] then
    headers["content-length"] = tostring(#body)
  end
  return status, headers, body
end

-- encode_error(model, err, rid, status, method) -> status, headers, body
function M.encode_error(_, err, rid, status, method)
  local headers = { ["x-amz-request-id"] = rid, ["x-amz-id-2"] = host_id(rid) }
  if method == "HEAD" then return status, headers, "" end
  headers["content-type"] = "application/xml"
  return status, headers, X.DECL .. "<Error>" .. X.leaf("Code", err.code) .. X.leaf("Message", err.message) ..
    Q.fields_xml(err.fields) .. X.leaf("RequestId", rid) .. X.leaf("HostId", host_id(rid)) .. "</Error>"
end

return M
