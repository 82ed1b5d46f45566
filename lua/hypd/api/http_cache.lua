-- hypd.api.http_cache: answers a browser keeps and revalidates (the web
-- UI's files, GET /api/v1/tools), compressed when the client accepts it.
--
--   cache.entity(body) -> {etag, body, gz}   the body's strong validator:
--     '"' .. the first 32 hex digits of its SHA-256 .. '"'; gz, its gzip
--     (sys.gzip, level 9), made the first time a client accepts it and
--     kept with the entity (entities are kept by hash, at most M.KEEP)
--   cache.answer(req, resp [, entity]) -> resp: resp (status 200, a string
--     body) given an ETag and Vary: Accept-Encoding; 304 with no body when
--     req's If-None-Match names it; else its gzip (Content-Encoding:
--     gzip, ETag '"<hash>-gz"') when Accept-Encoding allows gzip and the
--     body is a compressible type of at least M.MIN bytes
--   cache.accepts_gzip(header) -> true | false
--   cache.matches(if_none_match, etag) -> true | false: one of the tags
--     (weak or strong, the identity or the gzip one) is this entity, or "*"
--
-- The headers resp already has (the security headers, Cache-Control)
-- stay on the 304 too: a revalidation answer carries what the 200 did.
local sys = require "hypd.sys"

local M = {}

M.KEEP = 512  -- entities kept (the UI's files, a few versions of the tools list)
M.MIN = 512   -- bytes under which gzip saves too little to be worth a header

local kept, count = {}, 0 -- etag -> entity

local COMPRESSIBLE = { "^text/", "^application/json", "^image/svg%+xml", "^application/javascript" }

function M.entity(body)
  local etag = '"' .. sys.digest("sha256", body, "hex"):sub(1, 32) .. '"'
  local e = kept[etag]
  if e then return e end
  if count >= M.KEEP then kept, count = {}, 0 end
  e = { etag = etag, body = body }
  kept[etag], count = e, count + 1
  return e
end

function M.accepts_gzip(header)
  if type(header) ~= "string" then return false end
  for item in header:lower():gmatch("[^,]+") do
    local name = item:match("^%s*([%w*-]+)")
    local q = tonumber(item:match(";%s*q%s*=%s*([%d.]+)") or "1")
    if (name == "gzip" or name == "x-gzip" or name == "*") and q and q > 0 then return true end
  end
  return false
end

function M.matches(header, etag)
  if type(header) ~= "string" then return false end
  local plain = etag:sub(2, -2)
  for tag in header:gmatch("[^,]+") do
    tag = tag:match("^%s*(.-)%s*$"):gsub("^W/", "")
    if tag == "*" or tag == etag or tag == '"' .. plain .. '-gz"' then return true end
  end
  return false
end

local function compressible(ctype)
  for _, p in ipairs(COMPRESSIBLE) do
    if (ctype or ""):find(p) then return true end
  end
  return false
end

function M.answer(req, resp, e)
  e = e or M.entity(resp.body)
  local h = resp.headers
  h.vary = "Accept-Encoding"
  local headers = req.headers or {}
  local gz = #e.body >= M.MIN and compressible(h["content-type"]) and M.accepts_gzip(headers["accept-encoding"])
  if gz then
    e.gz = e.gz or sys.gzip(e.body, 9)
    gz = #e.gz < #e.body
  end
  h.etag = gz and '"' .. e.etag:sub(2, -2) .. '-gz"' or e.etag
  if M.matches(headers["if-none-match"], e.etag) then
    h["content-type"] = nil
    return { status = 304, headers = h, body = "" }
  end
  if gz then h["content-encoding"] = "gzip" end
  resp.body = req.method == "HEAD" and "" or gz and e.gz or e.body
  return resp
end

return M
