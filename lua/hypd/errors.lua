-- hypd.errors: the error tables every module returns or raises.
--
-- Two channels (STYLE.md): misuse raises; failures of the world return
-- `nil, err`. An error is a table {code = "NOT_FOUND", message = "...", ...}
-- with context fields (op, status, request_id, retryable, field, ...).
-- `error(err, 0)` passes it through untouched, so `assert(x, err)` keeps it.
--
-- Codes in use: VALIDATION (bad input; names the field and the rule),
-- NOT_FOUND, EXISTS, CONFLICT, TIMEOUT, CANCELLED, THROTTLED, CONNECT, TLS,
-- TOO_LARGE, HTTP, JSON, STORE, SANDBOX (a playbook broke a sandbox rule),
-- CPU (a task used its CPU budget without waiting: hypd._sched),
-- DEADLOCK, STATE (the target or the host is not in a state that allows the
-- call: a known condition its message explains, with the call that fixes
-- it; REST answers 409, not 500), LOCKED (another
-- process owns the state directory: hypd.statelock), CLOSED (a websocket
-- that ended; a server, websocket or stream handle used after its stop or
-- close: the message names it), INTERNAL (a bug).
local core = require "hypd.core"

local M = {}
local mt = core.error_mt

-- new(code, message [, fields]) -> error table
function M.new(code, message, fields)
  local e = {}
  if fields then
    for k, v in pairs(fields) do e[k] = v end
  end
  e.code, e.message = code, message
  return setmetatable(e, mt)
end

-- raise(code, message [, fields]): raises a new error table
function M.raise(code, message, fields)
  error(M.new(code, message, fields), 0)
end

-- fail(code, message [, fields]) -> nil, err (for `return errors.fail(...)`)
function M.fail(code, message, fields)
  return nil, M.new(code, message, fields)
end

-- refuse(field, rule, message [, extra]): raises a call's refusal naming
-- one field: VALIDATION (extra.code for another: CONFLICT, STATE,
-- NOT_FOUND) with message and fields = {{field, rule, message}}. The
-- field's message is message, or with extra.prefix = "field" the field's
-- name, ": " and message (the registry's own form), or extra.field_message;
-- with extra.prefix = "message" the error's message starts with the field's
-- name instead. Any other key of extra is context the error carries.
function M.refuse(field, rule, message, extra)
  local e, code, fmsg = {}, "VALIDATION", message
  for k, v in pairs(extra or {}) do e[k] = v end
  if e.prefix == "field" then fmsg = field .. ": " .. message end
  if e.prefix == "message" then message = field .. ": " .. message end
  code, fmsg = e.code or code, e.field_message or fmsg
  e.code, e.prefix, e.field_message = nil, nil, nil
  e.fields = { { field = field, rule = rule, message = fmsg } }
  M.raise(code, message, e)
end

-- refuse_all(fields, message [, extra]): raises VALIDATION naming several
-- fields ({{field, rule, message}, ...}: what a rule across fields found)
function M.refuse_all(fields, message, extra)
  local e = {}
  for k, v in pairs(extra or {}) do e[k] = v end
  e.fields = fields
  M.raise("VALIDATION", message, e)
end

-- is(v [, code]) -> true when v is an error table (with that code)
function M.is(v, code)
  return type(v) == "table" and getmetatable(v) == mt and (code == nil or v.code == code)
end

-- try(fn, ...) -> results, or nil, err when fn raises (the pcall twin)
function M.try(fn, ...)
  local r = table.pack(pcall(fn, ...))
  if r[1] then return table.unpack(r, 2, r.n) end
  local e = r[2]
  if type(e) ~= "table" then e = M.new("INTERNAL", tostring(e)) end
  if getmetatable(e) == nil then setmetatable(e, mt) end
  return nil, e
end

-- public(err) -> a copy fit for callers: no traceback, secrets redacted
function M.public(err)
  local out = {}
  for k, v in pairs(err) do
    if k ~= "traceback" then
      out[k] = type(v) == "string" and core.redact(v) or v
    end
  end
  return setmetatable(out, mt)
end

-- view(err) -> {code, message, fields, retry_after, reason, service, operation,
-- request_id, status}: what every front end (REST, MCP, the CLI) shows of
-- an error, the same everywhere. An INTERNAL error shows its code only
-- (the details go to the log).
function M.view(err)
  if type(err) ~= "table" then err = M.new("INTERNAL", tostring(err)) end
  local e = M.public(err)
  local out = { code = tostring(e.code or "INTERNAL") }
  out.message = out.code == "INTERNAL" and "internal error (details are in the hypd log)" or
    (type(e.message) == "string" and e.message or out.code)
  if type(e.fields) == "table" then
    out.fields = {}
    for i, f in ipairs(e.fields) do
      out.fields[i] = { field = tostring(f.field or ""), rule = tostring(f.rule or ""),
        message = tostring(f.message or "") }
    end
  elseif type(e.field) == "string" then
    out.fields = { { field = e.field, rule = out.code:lower(), message = out.message } }
  end
  if e.service or e.request_id then
    -- an AWS error: which call, and the request id AWS support asks for
    out.service, out.operation, out.request_id = e.service, e.operation, e.request_id
    out.status = math.tointeger(tonumber(e.status))
  end
  out.retry_after = e.retry_after
  out.reason = type(e.reason) == "string" and e.reason or nil
  return out
end

-- echo(v [, max]) -> text fit to quote input back in a message: at most
-- max characters (default 60; longer input is cut with its length said),
-- control characters and bytes that are not UTF-8 shown as '?', so an answer
-- never repeats input at length or carries bytes that break its JSON
function M.echo(v, max)
  max = max or 60
  local s = tostring(v)
  local n = #s
  if utf8.len(s) == nil then
    s = s:gsub("[\128-\255]", "?")
  end
  s = s:gsub("%c", "?")
  if utf8.len(s) > max then
    s = s:sub(1, utf8.offset(s, max + 1) - 1) .. "... (" .. n .. " bytes)"
  end
  return s
end

M.mt = mt
return M
