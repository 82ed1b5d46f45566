-- hypd.api.rest: the REST front end, /api/v1 on the server of `hypd serve`.
-- Every route but GET /api/v1/health needs a bearer token (hypd.api.auth);
-- tools run through hypd.tool.dispatch.call with the caller {name = token name,
-- scope, front = "rest"}, so validation, scopes and the audit log are the
-- registry's own.
--
--   GET  /api/v1/health                  {ok, version, tools, operations_running} (no token)
--   POST /api/v1/auth/login {code}       a sign-in link's one-time code for a token (no token)
--   GET  /api/v1/auth/whoami             {name, scope, id} of the caller's token
--   POST /api/v1/auth/logout             Sign out: revokes the caller's token if a sign-in made it
--   GET  /api/v1/tools                   (ETag, 304, gzip) {tools = [{name, kind, scope, summary, description,
--                                          status_tool, staged, input_schema, output_schema, source,
--                                          hash, overrides, overridden_by, modules}]}
--   GET  /api/v1/tools/{name}            one of those
--   POST /api/v1/tools/{name}            JSON params -> 200 result | 202 accepted operation
--   GET  /api/v1/operations              ?status=&tool=&limit= (operation_list)
--   GET  /api/v1/operations/{id}         operation_get (?wait_seconds=)
--   GET  /api/v1/operations/{id}/events  operation_list_events (?after=&wait_seconds=&limit=)
--   POST /api/v1/operations/{id}/cancel  operation_cancel (scope operate)
--   GET  /api/v1/openapi.json            OpenAPI 3.1 (hypd.api.openapi)
--   POST /api/v1/playbooks/reload        re-read the playbook directory (scope admin; also SIGHUP)
--
-- Errors are {error = {code, message, fields}} with 400 (VALIDATION, bad
-- JSON, not an object), 401 (UNAUTHORIZED, with WWW-Authenticate), 403
-- (FORBIDDEN), 404 (NOT_FOUND), 405, 409 (CONFLICT; STATE: the target or the host is not in a state
-- that allows the call, a known condition the message explains), 413 (TOO_LARGE), 415,
-- 429 (THROTTLED, with Retry-After), 500 (the code only; the message goes
-- to the log), 502/504 (AWS or the network failed; an AWS 4xx keeps its
-- status).
local auth = require "hypd.api.auth"
local cache = require "hypd.api.http_cache"
local config = require "hypd.config"
local dispatch = require "hypd.tool.dispatch"
local errors = require "hypd.errors"
local json = require "hypd.json"
local loader = require "hypd.tool.loader"
local log = require "hypd.log"
local op = require "hypd.tool.operations"
local openapi = require "hypd.api.openapi"
local tool = require "hypd.tool.registry"

local M = {}

M.BASE = "/api/v1"
M.MAX_BODY = 1 << 20 -- bytes of a request body

local STATUS = {
  VALIDATION = 400, UNAUTHORIZED = 401, FORBIDDEN = 403, GUARDRAIL = 403, LOCKED = 409, NOT_FOUND = 404,
  METHOD_NOT_ALLOWED = 405,
  CONFLICT = 409, EXISTS = 409, STATE = 409, TOO_LARGE = 413, UNSUPPORTED_MEDIA_TYPE = 415, THROTTLED = 429,
  CONNECT = 502, TLS = 502, RESET = 502, HTTP = 502, TIMEOUT = 504,
}
M.STATUS = STATUS

local HEADERS = { ["content-type"] = "application/json", ["cache-control"] = "no-store",
  ["x-content-type-options"] = "nosniff" }

-- responses ------------------------------------------------------------------------

-- json_response(status, value [, headers]) -> response
function M.json_response(status, value, extra)
  local ok, body = pcall(json.encode, value)
  if not ok then
    log.error("rest", "a response cannot be encoded as JSON: %s", tostring(body))
    status, body = 500, '{"error":{"code":"JSON","message":"the result cannot be encoded as JSON"}}'
  end
  local headers = {}
  for k, v in pairs(HEADERS) do headers[k] = v end
  for k, v in pairs(extra or {}) do headers[k] = v end
  return { status = status, headers = headers, body = body .. "\n" }
end

-- status_for(err) -> the HTTP status of an error
function M.status_for(err)
  local s = STATUS[err.code]
  if s then return s end
  local st = math.tointeger(tonumber(err.status))
  -- an upstream (AWS, Kubernetes) answer: its 4xx, except 401/407, which
  -- would read as hypd's own authentication
  if st and st >= 400 and st < 500 and st ~= 401 and st ~= 407 then return st end
  if st or err.service then return 502 end
  return 500
end

-- error_body(err, status) -> {error = {code, message, fields, ...}}
function M.error_body(err, status)
  local out = errors.view(err)
  if status >= 500 and status < 502 then
    out.message = "internal error " .. out.code .. " (details are in the server log)"
  end
  if out.fields then out.fields = json.array(out.fields) end
  return { error = out }
end

-- error_response(err [, status]) -> response
function M.error_response(err, status)
  if not errors.is(err) then
    err = type(err) == "table" and err.code and setmetatable(err, errors.mt) or errors.new("INTERNAL", tostring(err))
  end
  status = status or M.status_for(err)
  if status == 500 then
    log.error("rest", "%s: %s", tostring(err.code), tostring(err.message))
  elseif status > 500 then
    log.warn("rest", "%s: %s", tostring(err.code), tostring(err.message))
  end
  local headers = {}
  if status == 401 then headers["www-authenticate"] = 'Bearer realm="hypd"' end
  if status == 405 and err.allow then headers["allow"] = err.allow end
  if status == 429 then headers["retry-after"] = tostring(math.tointeger(err.retry_after) or 5) end
  return M.json_response(status, M.error_body(err, status), headers)
end

local function fail(status, code, message, extra)
  return M.error_response(errors.new(code, message, extra), status)
end

-- request parsing --------------------------------------------------------------------

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- query(raw) -> {name = value} (the last of repeated names wins)
function M.query(raw)
  local out = {}
  for pair in (raw or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    k, v = unescape(k:gsub("+", " ")), unescape(v:gsub("+", " "))
    if k ~= "" then out[k] = v end
  end
  return out
end

-- coerce(def, name, text): see hypd.tool.coerce
function M.coerce(def, name, text) return tool.coerce(def and def.params, name, text) end

-- body(req) -> the JSON object of a request body | nil, response
function M.body(req)
  local body = req.body or ""
  if #body > M.MAX_BODY then
    return nil, fail(413, "TOO_LARGE", "the request body is over " .. M.MAX_BODY .. " bytes")
  end
  if not body:find("%S") then return json.object() end
  local ctype = (req.headers["content-type"] or ""):lower():match("^%s*([^;%s]+)")
  if ctype ~= "application/json" then
    return nil, fail(415, "UNSUPPORTED_MEDIA_TYPE", "the request body must be JSON (Content-Type: " ..
      "application/json), not " .. tostring(ctype or "untyped"))
  end
  local v, err = json.decode(body)
  if v == nil then
    return nil, fail(400, "VALIDATION", "the request body is not valid JSON: " .. tostring(err and err.message),
      { fields = { { field = "", rule = "json", message = "not valid JSON" } } })
  end
  if type(v) ~= "table" or json.is_array(v) then
    return nil, fail(400, "VALIDATION", "the request body must be a JSON object of parameters",
      { fields = { { field = "", rule = "type", message = "must be a JSON object" } } })
  end
  return v
end

-- authenticate(req, front) -> caller | nil, error response (401 or 429)
function M.authenticate(req, front)
  local who, err = auth.check(req.headers.authorization, req.peer)
  if not who then return nil, M.error_response(err) end
  return { name = who.name, scope = who.scope, token_id = who.id, token_key = who.key, front = front or "rest" }
end

-- the registry -----------------------------------------------------------------------

M.describe = tool.describe
M.registry = tool.registry_view

local function running_count()
  return #op.list { status = "running" }
end

-- routes -------------------------------------------------------------------------------

local function call(name, args, caller)
  local def = tool.get(name)
  local result, err = dispatch.call(name, args, caller)
  if result == nil then return M.error_response(err) end
  if def and def.steps and type(result) == "table" and result.operation_id then
    return M.json_response(202, result, { location = M.BASE .. "/operations/" .. result.operation_id })
  end
  return M.json_response(200, result)
end

local handlers = {}

local function no_tool(name)
  return fail(404, "NOT_FOUND", "no tool named '" .. errors.echo(name, 64) .. "' (GET /api/v1/tools lists them)")
end

function handlers.health()
  return M.json_response(200, { ok = true, version = config.version, tools = #tool.list(),
    operations_running = running_count() })
end

-- POST /auth/login {code}: the one-time code of a sign-in link for a token
function handlers.login(req)
  local body, berr = M.body(req)
  if not body then return berr end
  local token, info = auth.exchange(type(body) == "table" and body.code or nil, req.peer)
  if not token then return M.error_response(info) end
  return M.json_response(200, { token = token, name = info.name, scope = info.scope })
end

-- POST /auth/logout: the caller's token is revoked when a sign-in link
-- made it (any scope may end its own); a created token is kept
function handlers.logout(_, caller)
  local info, revoked = auth.sign_out(caller.token_key)
  if not info then return M.error_response(revoked) end
  return M.json_response(200, { name = info.name, id = info.id, revoked = revoked })
end

-- GET /auth/whoami: the caller's token (its name and scope)
function handlers.whoami(_, caller)
  return M.json_response(200, { name = caller.name, scope = caller.scope, id = caller.token_id })
end

-- GET /tools: the same for every caller, so kept and revalidated by its
-- hash (ETag; If-None-Match -> 304) and gzipped when accepted
-- (hypd.api.http_cache): a reload or a playbook change changes the hash
function handlers.tools(req)
  local errs = json.array()
  for i, e in ipairs(loader.errors()) do errs[i] = { file = e.file, message = e.message } end
  local resp = M.json_response(200, { tools = M.registry(), errors = errs },
    { ["cache-control"] = "private, no-cache" })
  if resp.status ~= 200 then return resp end
  return cache.answer(req, resp)
end

function handlers.tool_get(_, _, name)
  local def = tool.get(name)
  if not def then return no_tool(name) end
  return M.json_response(200, M.describe(def))
end

function handlers.tool_call(req, caller, name)
  if not tool.get(name) then return no_tool(name) end
  local args, resp = M.body(req)
  if not args then return resp end
  return call(name, args, caller)
end

function handlers.operations(req, caller)
  local def = tool.get("operation_list")
  local args = json.object()
  for k, v in pairs(M.query(req.query)) do args[k] = M.coerce(def, k, v) end
  return call("operation_list", args, caller)
end

local function op_id(id)
  if #id ~= 19 or not id:match("^op%-%x+$") then
    return nil, fail(404, "NOT_FOUND", "no operation '" .. errors.echo(id, 24) .. "' (an id is op- and 16 hex " ..
      "digits)", { field = "operation_id" })
  end
  return id
end

-- an operation route: the tool, with the id from the path and the rest
-- from the query string (wait_seconds, after, limit)
local function op_tool(name)
  return function(req, caller, id)
    local ok, resp = op_id(id)
    if not ok then return resp end
    local def = tool.get(name)
    local args = json.object()
    for k, v in pairs(M.query(req.query)) do args[k] = M.coerce(def, k, v) end
    args.operation_id = id
    return call(name, args, caller)
  end
end

handlers.operation = op_tool("operation_get")
handlers.events = op_tool("operation_list_events")

function handlers.cancel(_, caller, id)
  local ok, resp = op_id(id)
  if not ok then return resp end
  return call("operation_cancel", { operation_id = id }, caller)
end

-- POST /playbooks/reload (admin): the playbook directory read again; a
-- file that does not load is refused with its error, its tools keep their
-- previous version
function handlers.reload(_, caller)
  if caller.scope ~= "admin" then
    return fail(403, "FORBIDDEN", "reloading the playbooks needs a token with scope admin; this one has " ..
      tostring(caller.scope))
  end
  local r = loader.reload(caller)
  local errs = json.array()
  for i, e in ipairs(r.errors) do errs[i] = { file = e.file, message = e.message } end
  return M.json_response(200, { defined = json.array(r.defined), restored = json.array(r.restored),
    removed = json.array(r.removed), errors = errs })
end

function handlers.openapi()
  return M.json_response(200, openapi.document())
end

local ROUTES = {
  { "^/health$", "/health", GET = handlers.health, public = true },
  { "^/auth/login$", "/auth/login", POST = handlers.login, public = true },
  { "^/auth/whoami$", "/auth/whoami", GET = handlers.whoami },
  { "^/auth/logout$", "/auth/logout", POST = handlers.logout },
  { "^/tools$", "/tools", GET = handlers.tools },
  { "^/tools/([^/]+)$", "/tools/{name}", GET = handlers.tool_get, POST = handlers.tool_call },
  { "^/operations$", "/operations", GET = handlers.operations },
  { "^/operations/([^/]+)$", "/operations/{id}", GET = handlers.operation },
  { "^/operations/([^/]+)/events$", "/operations/{id}/events", GET = handlers.events },
  { "^/operations/([^/]+)/cancel$", "/operations/{id}/cancel", POST = handlers.cancel },
  { "^/openapi%.json$", "/openapi.json", GET = handlers.openapi },
  { "^/playbooks/reload$", "/playbooks/reload", POST = handlers.reload },
}

local function match(path)
  for _, r in ipairs(ROUTES) do
    local caps = table.pack(path:match(r[1]))
    if caps[1] ~= nil then
      if r[1]:find("%(") == nil then caps = { n = 0 } end
      for i = 1, caps.n do caps[i] = unescape(caps[i]) end
      return r, caps
    end
  end
end

-- handle(req) -> response, route (the route's template for metrics, e.g.
-- "/api/v1/tools/{name}"; "unmatched" when none matched)
function M.handle(req)
  local path = req.path:sub(#M.BASE + 1)
  if #path > 1 then path = path:gsub("/+$", "") end
  local r, caps = match(path)
  local route = r and M.BASE .. r[2] or "unmatched"
  local caller
  if not (r and r.public) then
    local resp
    caller, resp = M.authenticate(req, "rest")
    if not caller then return resp, route end
  end
  if not r then
    return fail(404, "NOT_FOUND", "no route " .. errors.echo(req.method, 10) .. " " .. errors.echo(req.path, 80) ..
      " (see " .. M.BASE ..
      "/openapi.json)"), route
  end
  local fn = r[req.method]
  if not fn then
    local allow = {}
    for _, m in ipairs { "GET", "POST" } do if r[m] then allow[#allow + 1] = m end end
    return fail(405, "METHOD_NOT_ALLOWED", errors.echo(req.method, 10) .. " is not allowed on " .. M.BASE .. r[2] ..
      " (allowed: " .. table.concat(allow, ", ") .. ")", { allow = table.concat(allow, ", ") }), route
  end
  return fn(req, caller, table.unpack(caps, 1, caps.n)), route
end

return M
