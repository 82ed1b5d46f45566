-- sandbox.k8s.spdy: the SPDY/3.1 framing a Kubernetes streaming session
-- speaks (draft-mbelshe-httpbis-spdy-00 as moby/spdystream implements it),
-- the server's side: frames read from a byte stream, frames written, and
-- the zlib stream every header block of a session shares.
--
--   local s = spdy.session()
--   s:push(bytes)          -- what the peer sent (any split)
--   s:next() -> frame | nil (more bytes needed) | false, why (malformed)
--     control: { control = true, type = "SYN_STREAM" | ..., flags, stream,
--                headers = { [lower name] = value } (SYN_STREAM, SYN_REPLY,
--                HEADERS), code (RST_STREAM, GOAWAY), id (PING), ... }
--     data:    { stream, flags, data }
--   s:syn_reply(stream [, headers]), s:data(stream, bytes [, fin]),
--   s:rst(stream, code), s:ping(id), s:goaway(last) -> the frame's bytes
--
-- The header blocks the peer sends are inflated with the SPDY/3 preset
-- dictionary; the ones written here are zlib stored blocks (valid zlib that
-- needs no compressor; spdystream reads either), each ended by a sync flush.
local inflate = require "sandbox.k8s.inflate"

local M = {}

M.FIN, M.UNIDIRECTIONAL = 0x01, 0x02
local TYPES = { "SYN_STREAM", "SYN_REPLY", "RST_STREAM", "SETTINGS", nil, "PING", "GOAWAY", "HEADERS",
  "WINDOW_UPDATE" }
local CODE = {}
for n, name in pairs(TYPES) do CODE[name] = n end
M.MAX_FRAME = 1 << 24

-- the SPDY/3 header dictionary (section 2.6.10.1): length-prefixed names,
-- then status codes and phrases, dates and common values
M.DICTIONARY = (function()
  local names = { "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset",
    "accept-encoding", "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control",
    "connection", "content-base", "content-encoding", "content-language", "content-length", "content-location",
    "content-md5", "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie",
    "keep-alive", "origin" }
  local parts = {}
  for i, n in ipairs(names) do parts[i] = string.pack(">s4", n) end
  parts[#parts + 1] = "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505" ..
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized" ..
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable" ..
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT" ..
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain," ..
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
  return table.concat(parts)
end)()

-- adler32(s) -> zlib's checksum of s
function M.adler32(s)
  local a, b = 1, 0
  for i = 1, #s do
    a = (a + s:byte(i)) % 65521
    b = (b + a) % 65521
  end
  return (b << 16) | a
end

local Session = {}
Session.__index = Session

function M.session()
  return setmetatable({ buf = "", zin = nil, zout_started = false }, Session)
end

function Session:push(bytes) self.buf = self.buf .. bytes end

-- the peer's header block: the shared zlib stream's next piece
function Session:inflate_headers(block)
  if not self.zin then
    if #block < 2 then return nil, "the header block has no zlib header" end
    local cmf, flg = block:byte(1, 2)
    if cmf & 0x0f ~= 8 or ((cmf << 8) | flg) % 31 ~= 0 then return nil, "the header block is not a zlib stream" end
    local at = 3
    if flg & 0x20 ~= 0 then
      if #block < 6 then return nil, "the zlib dictionary id is cut short" end
      if string.unpack(">I4", block, 3) ~= M.adler32(M.DICTIONARY) then
        return nil, "the header block uses another dictionary than SPDY/3's"
      end
      at = 7
    end
    self.zin = inflate.new(M.DICTIONARY)
    block = block:sub(at)
  end
  local plain, why = self.zin:feed(block)
  if not plain then return nil, why end
  if #plain < 4 then return nil, "the header block is empty" end
  local count, at = string.unpack(">I4", plain)
  local h = {}
  for _ = 1, count do
    if at + 3 > #plain then return nil, "the header block is cut short" end
    local name, value
    name, at = string.unpack(">s4", plain, at)
    if at + 3 > #plain then return nil, "the header block is cut short" end
    value, at = string.unpack(">s4", plain, at)
    h[name:lower()] = value
  end
  return h
end

-- next() -> the next whole frame | nil | false, why
function Session:next()
  local buf = self.buf
  if #buf < 8 then return nil end
  local w1, flags, len = string.unpack(">I4 B I3", buf)
  if #buf < 8 + len then return nil end
  local body = buf:sub(9, 8 + len)
  self.buf = buf:sub(9 + len)
  if w1 & 0x80000000 == 0 then return { stream = w1, flags = flags, data = body } end
  local version, ctype = (w1 >> 16) & 0x7fff, w1 & 0xffff
  if version ~= 3 then return false, "SPDY version " .. version .. " (3 is spoken)" end
  local f = { control = true, type = TYPES[ctype] or ("type " .. ctype), flags = flags }
  local need = { SYN_STREAM = 10, SYN_REPLY = 4, RST_STREAM = 8, SETTINGS = 4, PING = 4, GOAWAY = 8, HEADERS = 4,
    WINDOW_UPDATE = 8 }
  if need[f.type] and len < need[f.type] then return false, f.type .. " frame is cut short" end
  local why
  if f.type == "SYN_STREAM" then
    local assoc
    f.stream, assoc = string.unpack(">I4 I4", body)
    f.stream, f.associated, f.priority = f.stream & 0x7fffffff, assoc & 0x7fffffff, body:byte(9) >> 5
    f.headers, why = self:inflate_headers(body:sub(11))
  elseif f.type == "SYN_REPLY" or f.type == "HEADERS" then
    f.stream = string.unpack(">I4", body) & 0x7fffffff
    f.headers, why = self:inflate_headers(body:sub(5))
  elseif f.type == "RST_STREAM" then
    f.stream, f.code = string.unpack(">I4 I4", body)
    f.stream = f.stream & 0x7fffffff
  elseif f.type == "PING" then
    f.id = string.unpack(">I4", body)
  elseif f.type == "GOAWAY" then
    f.last, f.code = string.unpack(">I4 I4", body)
  elseif f.type == "WINDOW_UPDATE" then
    f.stream, f.delta = string.unpack(">I4 I4", body)
  end
  if why then return false, f.type .. ": " .. why end
  return f
end

local function control(ctype, flags, body)
  return string.pack(">I2 I2 B I3", 0x8003, CODE[ctype], flags, #body) .. body
end

-- the header block of headers, as a zlib stored block of the session's stream
function Session:deflate_headers(headers)
  local names = {}
  for k in pairs(headers or {}) do names[#names + 1] = k end
  table.sort(names)
  local parts = { string.pack(">I4", #names) }
  for _, k in ipairs(names) do parts[#parts + 1] = string.pack(">s4 s4", k:lower(), headers[k]) end
  local plain = table.concat(parts)
  local head = ""
  if not self.zout_started then head, self.zout_started = "\x78\x01", true end
  -- the data, then an empty stored block (a sync flush, as a compressor's
  -- Flush ends every block): a reader hands out what it holds when it
  -- meets one, and reads nothing past it
  return head .. string.pack("<B I2 I2", 0, #plain, ~#plain & 0xffff) .. plain .. "\0\0\0\xff\xff"
end

function Session:syn_reply(stream, headers)
  return control("SYN_REPLY", 0, string.pack(">I4", stream) .. self:deflate_headers(headers))
end

-- data(stream, bytes [, fin]) -> data frames of at most 32 KiB each
function Session.data(_, stream, bytes, fin)
  local out, at = {}, 1
  repeat
    local piece = bytes:sub(at, at + 32767)
    at = at + #piece
    local last = at > #bytes
    out[#out + 1] = string.pack(">I4 B I3", stream & 0x7fffffff, (last and fin) and M.FIN or 0, #piece) .. piece
  until last
  return table.concat(out)
end

-- (no header block: these need nothing of the session; methods for one calling style)
function Session.rst(_, stream, code) return control("RST_STREAM", 0, string.pack(">I4 I4", stream, code)) end
function Session.ping(_, id) return control("PING", 0, string.pack(">I4", id)) end
function Session.goaway(_, last) return control("GOAWAY", 0, string.pack(">I4 I4", last, 0)) end

return M
