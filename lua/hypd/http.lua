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
--
-- resp = { status = 200, headers = { ["content-type"] = ... } (lower-case
-- names), body = "...", seconds = 0.01 }. Any HTTP status is a response;
-- only transport failures return nil, err (TIMEOUT, CONNECT, RESET, TLS,
-- TOO_LARGE, CANCELLED, HTTP, VALIDATION).
local errors = require "hypd.errors"
local sched = require "hypd._sched"

local M = {}

local fields = {
  method = "string", url = "string", headers = "table", body = "string",
  timeout = "number", connect_timeout = "number", ca_pem = "string",
  ca_file = "string", max_body = "number", aws = "table", fresh_connection = "boolean",
}

function M.request(req)
  if type(req) ~= "table" then
    return errors.fail("VALIDATION", "http.request needs a table")
  end
  for k, v in pairs(req) do
    if not fields[k] then
      return errors.fail("VALIDATION", "http.request: unknown field '" .. tostring(k) .. "'", { field = k })
    end
    if type(v) ~= fields[k] then
      return errors.fail("VALIDATION", "http.request: field '" .. k .. "' must be a " .. fields[k], { field = k })
    end
  end
  if not req.url then
    return errors.fail("VALIDATION", "http.request: field 'url' is required", { field = "url" })
  end
  return sched.await("http", req)
end

function M.get(url, opts)
  local req = { url = url }
  for k, v in pairs(opts or {}) do req[k] = v end
  return M.request(req)
end

return M
