-- sandbox.k8s.http_text: HTTP/1.1 as bytes on a forwarded connection
-- (sandbox.k8s.portforward): requests read from what a client wrote, the
-- simulated program's answers written back.
--
--   request(bytes) -> req, rest | nil (incomplete) | nil, nil, why
--     req = { method, path, query, headers = {[lower] = value}, body,
--             close (the client asked to close after the answer) }
--   response(out, close) -> the bytes of out = {status, headers, body}
local core = require "hypd.core"

local M = {}

local MAX_HEAD = 64 * 1024

local REASON = { [200] = "OK", [201] = "Created", [202] = "Accepted", [204] = "No Content",
  [301] = "Moved Permanently", [302] = "Found", [304] = "Not Modified", [400] = "Bad Request",
  [401] = "Unauthorized", [403] = "Forbidden", [404] = "Not Found", [405] = "Method Not Allowed",
  [408] = "Request Timeout", [413] = "Content Too Large", [422] = "Unprocessable Entity",
  [429] = "Too Many Requests", [500] = "Internal Server Error", [501] = "Not Implemented",
  [502] = "Bad Gateway", [503] = "Service Unavailable", [504] = "Gateway Timeout" }

-- chunked(s, at) -> body, the index after it | nil (incomplete) | nil, why
local function chunked(s, at)
  local parts = {}
  while true do
    local line_end = s:find("\r\n", at, true)
    if not line_end then return nil end
    local size = tonumber((s:sub(at, line_end - 1):match("^(%x+)")) or "", 16)
    if not size then return nil, "a chunk size is not hexadecimal" end
    at = line_end + 2
    if size == 0 then
      local trailer_end = s:find("\r\n", at, true) -- no trailers are read: the empty line ends it
      if not trailer_end then return nil end
      return table.concat(parts), trailer_end + 2
    end
    if #s < at + size + 1 then return nil end
    parts[#parts + 1] = s:sub(at, at + size - 1)
    if s:sub(at + size, at + size + 1) ~= "\r\n" then return nil, "a chunk does not end with CRLF" end
    at = at + size + 2
  end
end

function M.request(s)
  s = s:gsub("^\r\n", "") -- a CRLF between requests is ignored (RFC 9112 2.2)
  local head_end = s:find("\r\n\r\n", 1, true)
  if not head_end then
    if #s > MAX_HEAD then return nil, nil, "the request head is too large" end
    return nil
  end
  local lines = {}
  for line in s:sub(1, head_end - 1):gmatch("[^\r\n]+") do lines[#lines + 1] = line end
  local method, target, version = (lines[1] or ""):match("^(%u+) (%S+) HTTP/(%d%.%d)$")
  if not method then return nil, nil, "a malformed request line" end
  local headers = {}
  for i = 2, #lines do
    local k, v = lines[i]:match("^([^:%s]+):%s*(.-)%s*$")
    if not k then return nil, nil, "a malformed header line" end
    k = k:lower()
    headers[k] = headers[k] and (headers[k] .. ", " .. v) or v
  end
  local body, rest_at = "", head_end + 4
  if (headers["transfer-encoding"] or ""):lower():find("chunked", 1, true) then
    local b, after = chunked(s, rest_at)
    if not b then return nil, nil, after end
    body, rest_at = b, after
  elseif headers["content-length"] then
    local n = tonumber(headers["content-length"]:match("^%d+$"))
    if not n then return nil, nil, "Content-Length is not a number" end
    if #s < rest_at + n - 1 then return nil end
    body, rest_at = s:sub(rest_at, rest_at + n - 1), rest_at + n
  end
  local path, query = target:match("^([^?]*)%??(.*)$")
  local conn = (headers.connection or ""):lower()
  local close = conn:find("close", 1, true) ~= nil or (version == "1.0" and not conn:find("keep-alive", 1, true))
  return { method = method, path = path, query = query, headers = headers, body = body, close = close },
    s:sub(rest_at)
end

function M.response(out, close)
  local status, body = out.status or 200, out.body or ""
  local lines = { string.format("HTTP/1.1 %d %s", status, REASON[status] or "Status") }
  for k, v in pairs(out.headers or {}) do
    local lk = k:lower()
    if lk ~= "content-length" and lk ~= "transfer-encoding" and lk ~= "connection" then
      lines[#lines + 1] = k .. ": " .. tostring(v)
    end
  end
  lines[#lines + 1] = "Date: " .. os.date("!%a, %d %b %Y %H:%M:%S GMT", math.floor(core.now())) -- the simulated clock
  lines[#lines + 1] = "Content-Length: " .. #body
  if close then lines[#lines + 1] = "Connection: close" end
  return table.concat(lines, "\r\n") .. "\r\n\r\n" .. body
end

return M
