-- hypd.http: asynchronous HTTP on the engine (libcurl multi underneath).
--
--   local resp, err = http.request{ method = "POST", url = "https://...",
--     headers = { ["content-type"] = "application/json" }, body = "...",
--     timeout = 30, connect_timeout = 5, ca_pem = "...", ca_file = "...",
--     max_body = 1 << 20 }
--
-- fresh_connection = true: a new connection, never a reused one, so the
-- transport cannot resend the request on its own (for unsafe calls).
-- aws = { service, region, profile, sign_body, unsigned_payload, s3_path }
-- signs the request in C with the profile's cached credentials (hypd.aws).
-- eks = { cluster, region, profile, sts_url } adds the EKS bearer token for
-- that cluster, made in C from the cached credentials (hypd.k8s).
-- kubernetes = true: a request to a Kubernetes API server with a token the
-- caller attached (a kubeconfig's; hypd.k8s sets it).
-- Signing happens only behind the guard: a request with any of the three
-- is classified from itself and checked against the running tool's guard
-- before it is signed, and audited once (hypd.tool.guard_request); a refusal is
-- nil, err with code GUARDRAIL and nothing is sent.
-- idle_timeout = seconds: fail with TIMEOUT when the server sends nothing
-- for about that long (libcurl measures below 1 byte/s over a few seconds).
--
-- resp = { status = 200, headers = { ["content-type"] = ... } (lower-case
-- names), body = "...", seconds = 0.01 }. Any HTTP status is a response;
-- only transport failures return nil, err (TIMEOUT, CONNECT: nothing was
-- sent, no connection or a TLS handshake that broke; RESET, TLS: the
-- certificate refused; TOO_LARGE, CANCELLED, HTTP, VALIDATION).
--
-- Streaming (Kubernetes watches, followed logs): the body as it arrives.
--
--   local s, err = http.stream{ url = ".../pods/x/log?follow=true", idle_timeout = 60 }
--   local status, headers = s:headers()   -- waits for them; nil, err on failure
--   for line in s:lines() do ... end      -- complete lines, without "\n"
--   if s.err then ... end                 -- why the lines stopped (nil: clean end)
--   s:close()
--
-- http.stream takes the fields of http.request; it returns as soon as the
-- transfer has started (nil, err only for a request that cannot start).
-- There is no whole-transfer timeout unless `timeout` is given. max_body
-- (default 1 MiB) bounds the bytes received and not yet read: past it the
-- transfer pauses, so the server waits for a slow reader.
--
--   s:read([timeout]) -> chunk          the next bytes, in arrival order
--                     -> nil, nil       the response ended cleanly
--                     -> nil, err       the transfer failed (RESET, TIMEOUT,
--                                       HTTP, TLS, CONNECT, CANCELLED...);
--                                       every later read says the same
--                     -> nil, err       with err.code = "TIMEOUT" and
--                                       err.again = true: nothing came within
--                                       timeout seconds; the stream is still
--                                       open, read again
--   s:headers() -> status, headers | nil, err   (s.status, s.response_headers once
--                  known; a field named headers would hide this method)
--   s:lines()   -> iterator over complete lines; a last line without "\n" is
--                  returned at a clean end; it stops on failure (see s.err)
--   s:close()   cancels the transfer and drops unread bytes (idempotent;
--               `local s <close> = ...` works). Reads after close return
--               nil, err(CANCELLED) unless the response had already ended.
--
-- A stream belongs to the task that opened it: when that task ends (returns,
-- fails or is cancelled) the transfer is cancelled, so nothing leaks; a
-- stream dropped before (nothing references it) is cancelled when it is
-- collected (it owns a C handle, core.http_open, whose __gc cancels). An
-- HTTP error status is a response here too: check s:headers() first.
local core = require "hypd.core"
local errors = require "hypd.errors"
local guard_request = require "hypd.tool.guard_request"
local sched = require "hypd._sched"

local M = {}

local STREAM_BUFFER = 1 << 20 -- default max_body of a stream

local fields = {
  method = "string", url = "string", headers = "table", body = "string",
  timeout = "number", connect_timeout = "number", ca_pem = "string",
  ca_file = "string", max_body = "number", aws = "table", fresh_connection = "boolean",
  idle_timeout = "number", eks = "table", kubernetes = "boolean",
}

-- the fields of aws = {...} and eks = {...}: name, type, required; in the
-- order they are checked (so the error names the first)
local SUB = {
  aws = { { "service", "string", true }, { "region", "string", true }, { "profile", "string" },
    { "sign_body", "boolean" }, { "unsigned_payload", "boolean" }, { "s3_path", "boolean" } },
  eks = { { "cluster", "string", true }, { "region", "string", true }, { "profile", "string" },
    { "sts_url", "string", true } },
}

local function bad(what, field, rule)
  return errors.fail("VALIDATION", what .. ": field '" .. field .. "' " .. rule, { field = field, rule = rule })
end

-- sub(req, name, what) -> true | nil, err: aws or eks, field by field
local function sub(req, name, what)
  local t = req[name]
  if t == nil then return true end
  local known = {}
  for _, spec in ipairs(SUB[name]) do known[spec[1]] = true; known[#known + 1] = spec[1] end
  for k in pairs(t) do
    if type(k) ~= "string" or not known[k] then
      return bad(what, name .. "." .. tostring(k), "is unknown (" .. name .. " has " .. table.concat(known, ", ") .. ")")
    end
  end
  for _, spec in ipairs(SUB[name]) do
    local k, typ, required = spec[1], spec[2], spec[3]
    local v = t[k]
    if v == nil and required then return bad(what, name .. "." .. k, "is required") end
    if v ~= nil and type(v) ~= typ then return bad(what, name .. "." .. k, "must be a " .. typ) end
    if typ == "string" and v ~= nil and (v == "" or v:find("%z")) then
      return bad(what, name .. "." .. k, "must be a non-empty string without NUL")
    end
  end
  return true
end

-- a finite number at least 0 (and an integer when integral)
local function amount(v, integral)
  return v == v and v >= 0 and v < math.huge and (not integral or math.type(v) == "integer" or v % 1 == 0)
end

-- check(req, what) -> true | nil, err (VALIDATION naming the field): every
-- argument the C binding reads, so none of them can make it raise
local function check(req, what)
  if type(req) ~= "table" then
    return errors.fail("VALIDATION", what .. " needs a table")
  end
  for k, v in pairs(req) do
    if not fields[k] then
      return errors.fail("VALIDATION", what .. ": unknown field '" .. tostring(k) .. "'", { field = tostring(k) })
    end
    if type(v) ~= fields[k] then
      return errors.fail("VALIDATION", what .. ": field '" .. k .. "' must be a " .. fields[k], { field = k })
    end
  end
  if not req.url then
    return errors.fail("VALIDATION", what .. ": field 'url' is required", { field = "url" })
  end
  if not req.url:match("^[%a][%w+.-]*://[^%s%c]+$") then
    return bad(what, "url", "must be scheme://host/path without spaces or control characters")
  end
  if req.method and not req.method:match("^[A-Za-z]+$") then
    return bad(what, "method", "must be letters only (GET, POST, ...)")
  end
  local idle = req.idle_timeout
  if idle and not (idle >= 0 and idle <= 86400) then
    return errors.fail("VALIDATION", what .. ": field 'idle_timeout' must be 0 to 86400 seconds",
      { field = "idle_timeout" })
  end
  for _, k in ipairs { "timeout", "connect_timeout" } do
    if req[k] and not amount(req[k]) then return bad(what, k, "must be a finite number of seconds, 0 or more") end
  end
  if req.max_body and not (amount(req.max_body, true) and req.max_body <= math.maxinteger) then
    return bad(what, "max_body", "must be a whole number of bytes, 0 or more")
  end
  local seen = {}
  for k, v in pairs(req.headers or {}) do
    if type(k) ~= "string" or not k:match("^[%w!#$%%&'*+.^_`|~-]+$") then
      return bad(what, "headers", "names must be HTTP tokens (letters, digits, -)")
    end
    if (type(v) ~= "string" and type(v) ~= "number") or tostring(v):find("[%z\r\n]") then
      return bad(what, "headers." .. k, "must be a string without CR, LF or NUL")
    end
    if seen[k:lower()] then return bad(what, "headers." .. k, "is given twice (names are case-insensitive)") end
    seen[k:lower()] = true
  end
  if req.aws and req.eks then
    return bad(what, "eks", "cannot go with aws (a request is AWS-signed or carries an EKS token, not both)")
  end
  local ok, err = sub(req, "aws", what)
  if not ok then return nil, err end
  return sub(req, "eks", what)
end

-- send(kind, req, ...) -> sched.await(kind, req, ...) behind the guard when
-- the request is signed: checked first, audited once when it ends
local function send(kind, req, ...)
  if not guard_request.signed(req) then return sched.await(kind, req, ...) end
  local pending, gerr = guard_request.check(req)
  if not pending then return nil, gerr end
  local r = table.pack(pcall(sched.await, kind, req, ...))
  if not r[1] then
    guard_request.done(pending, nil, r[2])
    error(r[2], 0)
  end
  local resp = r[2]
  if kind == "http_stream" and resp then resp = { started = true } end -- its status comes later
  guard_request.done(pending, resp, r[3])
  return table.unpack(r, 2, r.n)
end

function M.request(req)
  local ok, err = check(req, "http.request")
  if not ok then return nil, err end
  return send("http", req)
end

function M.get(url, opts)
  local req = { url = url }
  for k, v in pairs(opts or {}) do req[k] = v end
  return M.request(req)
end

-- streams

-- (its __index a read-only view: stream.__index reaches no table every tool shares)
local Stream = require("hypd._readonly").class {}

-- called by the scheduler (never yields): the transfer started; h is its
-- C handle (core.http_open), which this stream owns
function Stream:_open(h, id)
  self._h, self._id = h, id
end

-- called by the scheduler (never yields): new bytes, and the first time the
-- status and headers
function Stream:_data(ev)
  if ev.headers then self.status, self.response_headers = ev.status, ev.headers end
  if #ev.data > 0 then
    self._tail = self._tail + 1
    self._chunks[self._tail] = ev.data
    self._buffered = self._buffered + #ev.data
    if self._buffered > self._limit and not self._held then
      self._held = true
      self._h:pause(true)
    end
  end
  self._sig:fire()
end

-- called by the scheduler: the transfer ended (ev.err, or a clean end)
function Stream:_done(ev)
  self._ended = true
  self._h:close() -- nothing left to cancel: this only marks the handle closed
  if ev.err then
    self.err = ev.err
  elseif not self.status then
    self.status, self.response_headers = ev.status, ev.headers
  end
  self._sig:fire()
end

-- pops the oldest unread chunk; lets a held transfer run once half is read
local function pop(self)
  local chunk = self._chunks[self._head]
  self._chunks[self._head] = nil
  self._head = self._head + 1
  self._buffered = self._buffered - #chunk
  if self._held and self._buffered <= self._limit // 2 then
    self._held = false
    if self._h:isopen() then self._h:pause(false) end
  end
  return chunk
end

function Stream:read(timeout)
  if timeout ~= nil and (type(timeout) ~= "number" or timeout ~= timeout or timeout < 0) then
    error("stream:read: timeout must be a non-negative number", 2)
  end
  local deadline = timeout and core.now() + timeout
  while true do
    if self._head <= self._tail then return pop(self) end
    if self._ended then return nil, self.err end
    local left = deadline and deadline - core.now()
    if left and left <= 0 then
      return errors.fail("TIMEOUT", string.format("no data within %gs", timeout), { again = true })
    end
    self._sig:wait(left)
  end
end

function Stream:headers()
  while not self.status do
    if self._ended then return nil, self.err end
    self._sig:wait()
  end
  return self.status, self.response_headers
end

function Stream:lines()
  local buf, pos = "", 1
  return function()
    while true do
      local nl = buf:find("\n", pos, true)
      if nl then
        local line = buf:sub(pos, nl - 1)
        pos = nl + 1
        return line
      end
      local chunk = self:read()
      if not chunk then
        local rest = buf:sub(pos)
        buf, pos = "", 1
        if rest ~= "" and not self.err then return rest end
        return nil
      end
      -- keep only the unconsumed tail, so a long stream does not grow buf
      buf, pos = buf:sub(pos) .. chunk, 1
    end
  end
end

function Stream:close()
  if self._closed then return end
  self._closed = true
  sched.close_stream(self._id) -- calls _done with CANCELLED unless it ended
  self._h:close() -- cancels the transfer unless that did
  self._chunks, self._head, self._tail, self._buffered = {}, 1, 0, 0
end

Stream.__close = Stream.close

function Stream:__tostring()
  return "hypd.http stream " .. self._id .. (self._closed and " (closed)" or self._ended and " (ended)" or "")
end

function M.stream(req)
  local ok, err = check(req, "http.stream")
  if not ok then return nil, err end
  local r = {}
  for k, v in pairs(req) do r[k] = v end
  r.stream = true
  r.max_body = r.max_body or STREAM_BUFFER
  local s = setmetatable({
    _chunks = {}, _head = 1, _tail = 0, _buffered = 0, _limit = r.max_body,
    _sig = sched.signal(), _ended = false, _held = false, _closed = false,
  }, Stream)
  local id, start_err = send("http_stream", r, s)
  if not id then return nil, start_err end
  return s
end

return M
