-- hypd.api.web: the web UI's static files (web/ in the source tree),
-- compiled into the binary like the Lua tree, or read from a directory
-- (hypd serve --web DIR, for working on the UI without rebuilding).
--
--   web.handle(req) -> response | nil   nil: not a file of the UI (the
--                                       router answers 404)
--   web.dir                             the directory to serve instead, or nil
--   web.HEADERS                         what every UI response carries
--
-- A path is a file only when every segment is a plain name (letters,
-- digits, '.', '-', '_'; not '.' or '..'; no empty segment) after
-- percent-decoding, so no request reaches a file outside web/; "/" is
-- index.html. Every response carries a strict Content-Security-Policy (no
-- inline scripts or styles, nothing from another origin), nosniff and
-- frame-ancestors 'none'. Every file has a strong ETag (its content's
-- hash, computed once for the compiled-in files), is revalidated at each
-- use (Cache-Control: no-cache; If-None-Match -> 304 without a body) and is
-- gzipped when the client accepts it (hypd.api.http_cache).
local cache = require "hypd.api.http_cache"
local core = require "hypd.core"

local M = {}

M.dir = nil

M.CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " ..
  "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
M.HEADERS = { ["content-security-policy"] = M.CSP, ["x-content-type-options"] = "nosniff",
  ["referrer-policy"] = "no-referrer", ["x-frame-options"] = "DENY",
  ["cross-origin-opener-policy"] = "same-origin", ["cross-origin-resource-policy"] = "same-origin" }

local TYPES = { html = "text/html; charset=utf-8", js = "text/javascript; charset=utf-8",
  mjs = "text/javascript; charset=utf-8", css = "text/css; charset=utf-8", svg = "image/svg+xml",
  png = "image/png", ico = "image/x-icon", json = "application/json", txt = "text/plain; charset=utf-8",
  woff2 = "font/woff2", map = "application/json" }

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- clean(path) -> "lib/api.js" | nil: the file a request path names, or nil
function M.clean(path)
  if type(path) ~= "string" then return nil end
  if path == "/" then return "index.html" end
  local p = unescape(path)
  if p:sub(1, 1) ~= "/" or #p > 256 then return nil end
  local parts = {}
  for seg in (p:sub(2) .. "/"):gmatch("([^/]*)/") do
    if seg == "" or seg == "." or seg == ".." or not seg:match("^[%w][%w._-]*$") then return nil end
    parts[#parts + 1] = seg
  end
  if #parts == 0 then return nil end
  return table.concat(parts, "/")
end

-- read(file) -> bytes | nil
local function read(file)
  if M.dir then
    local f = io.open(M.dir .. "/" .. file, "rb")
    if not f then return nil end
    local ok, data = pcall(f.read, f, "a")
    f:close()
    return ok and data or nil -- a directory reads as an error
  end
  return (core.embedded("web." .. file:gsub("/", ".")))
end

local embedded = {} -- file -> its entity (hypd.api.http_cache), made once: the binary's files do not change

function M.handle(req)
  if req.method ~= "GET" and req.method ~= "HEAD" then return nil end
  local file = M.clean(req.path)
  if not file then return nil end
  local ext = file:match("%.([%w]+)$")
  local ctype = ext and TYPES[ext]
  if not ctype then return nil end
  local e = not M.dir and embedded[file]
  if not e then
    local body = read(file)
    if not body then return nil end
    e = cache.entity(body)
    if not M.dir then embedded[file] = e end
  end
  -- revalidated at every use (ETag, 304): module imports carry no version in
  -- their URLs, so no name may be kept unasked
  local h = { ["content-type"] = ctype, ["cache-control"] = "no-cache" }
  for k, v in pairs(M.HEADERS) do h[k] = v end
  return cache.answer(req, { status = 200, headers = h, body = e.body }, e)
end

return M
