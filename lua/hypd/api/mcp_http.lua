-- hypd.api.mcp_http: MCP's Streamable HTTP transport at /mcp (use it
-- through mcp_http.handle(req, caller); the router authenticates).
--
--   POST   one JSON-RPC message. A request gets 200 application/json; a
--          tools/call that carries a progressToken (or in a session with a
--          log level set) from a client that accepts text/event-stream gets
--          an SSE stream: its notifications, then the response. A
--          notification or response gets 202 without a body.
--   GET    with Accept: text/event-stream and the session id: a standalone
--          SSE stream of the session's notifications (operation events and
--          log messages at the session's level, tools/list_changed), kept
--          alive with comments until the client leaves
--   DELETE ends the session: 204
--
-- Toolsets: /mcp?toolsets=cluster,observe on the initialize request
-- chooses the tools the session lists and calls (hypd.tool.toolsets; an
-- unknown set is 400 naming the sets); without it, every tool (a client
-- of /mcp chooses; `hypd mcp` gives the default set).
--
-- Sessions: initialize issues Mcp-Session-Id; every later request must
-- carry it (400 without, 404 when unknown, expired, or another caller's).
-- Sessions idle for M.IDLE seconds expire; at most M.MAX_SESSIONS live.
--
-- DNS rebinding: a request whose Origin is not loopback (localhost,
-- 127.0.0.1, [::1], any port) or listed in M.allowed_origins gets 403. So
-- does one whose Host is not loopback or in M.allowed_hosts, unless it
-- carries an Authorization header (an explicit credential, which a
-- rebinding page cannot send). MCP-Protocol-Version, when present, must be
-- a version hypd knows (400).
local core = require "hypd.core"
local json = require "hypd.json"
local mcp = require "hypd.api.mcp"
local sys = require "hypd.sys"
local task = require "hypd.task"
local tool = require "hypd.tool.registry"
local toolsets = require "hypd.tool.toolsets"

local M = {}

M.IDLE = 3600           -- seconds a session lives without a request
M.MAX_SESSIONS = 1000   -- live sessions in all; beyond, new ones are refused (503)
M.MAX_PER_TOKEN = 32    -- sessions per token; beyond, that token's least recently used goes
M.MAX_BODY = 4 << 20    -- bytes of one POST
M.allowed_origins = {}  -- origin ("https://ui.example.com") or host name -> true
M.allowed_hosts = {}    -- Host names (no port) accepted besides loopback -> true
M.backend = nil         -- the backend of new sessions (nil: mcp.local_backend())

local LOOPBACK = { localhost = true, ["127.0.0.1"] = true, ["[::1]"] = true, ["::1"] = true }

local sessions = {}     -- id -> {session, owner, used}
local nsessions = 0

local function now() return core.mono and core.mono() or core.now() end

-- host_of("http://Host:1234/x") -> "host" (lower case, without the port)
local function host_of(s)
  s = s:lower():gsub("^%a[%w+.-]*://", ""):gsub("[/?#].*$", ""):gsub("^.*@", "")
  if s:sub(1, 1) == "[" then return s:match("^(%[[^%]]*%])") or s end
  return (s:gsub(":%d*$", ""))
end

local BASE = { ["content-type"] = "application/json", ["cache-control"] = "no-store" }

local function respond(status, body, extra)
  local headers = {}
  for k, v in pairs(BASE) do headers[k] = v end
  for k, v in pairs(extra or {}) do headers[k] = v end
  if body == nil then headers["content-type"] = nil end
  return { status = status, headers = headers, body = body and (json.encode(body) .. "\n") or "" }
end

-- an HTTP error with a JSON-RPC error body without id
local function refuse(status, message, code, extra)
  return respond(status, mcp.error_reply(nil, code or -32000, message), extra)
end

local function origin_allowed(origin)
  if M.allowed_origins[origin] or M.allowed_origins[origin:lower()] then return true end
  local h = host_of(origin)
  return LOOPBACK[h] or M.allowed_origins[h] or false
end

local function check_headers(req)
  local h = req.headers
  if h.origin and not origin_allowed(h.origin) then
    return refuse(403, "Forbidden: Origin " .. h.origin .. " is not allowed (DNS rebinding protection)")
  end
  if h.host and not h.authorization then
    local host = host_of(h.host)
    if not (LOOPBACK[host] or M.allowed_hosts[host]) then
      return refuse(403, "Forbidden: Host " .. h.host .. " is not allowed (DNS rebinding protection)")
    end
  end
  local v = h["mcp-protocol-version"]
  if v and not mcp.HEADER_VERSIONS[v] then
    return refuse(400, "Bad Request: unsupported MCP-Protocol-Version " .. v .. " (supported: 2025-11-25, " ..
      "2025-06-18)")
  end
end

-- sessions -------------------------------------------------------------------------------

local function drop(id)
  if sessions[id] then
    mcp.channels[sessions[id].session] = nil
    sessions[id], nsessions = nil, nsessions - 1
  end
end

local function expire()
  local t = now()
  for id, s in pairs(sessions) do
    if t - s.used > M.IDLE then drop(id) end
  end
end

local function owner(caller) return caller and (caller.token_id or caller.name) or "anonymous" end

-- new_session(caller) -> id, entry | nil, response: a token holds at most
-- MAX_PER_TOKEN sessions (beyond that its own least recently used one
-- goes); another token's sessions are never dropped to make room: a full
-- table refuses new sessions until some expire
local function new_session(caller, sets)
  expire()
  local who, mine, oldest, at = owner(caller), 0, nil, nil
  for id, s in pairs(sessions) do
    if s.owner == who then
      mine = mine + 1
      if not at or s.used < at then oldest, at = id, s.used end
    end
  end
  if mine >= M.MAX_PER_TOKEN then
    drop(oldest)
  elseif nsessions >= M.MAX_SESSIONS then
    return nil, refuse(503, "Service Unavailable: the server holds " .. M.MAX_SESSIONS .. " MCP sessions; " ..
      "end unused ones (DELETE /mcp) or retry later", nil, { ["retry-after"] = "60" })
  end
  local id = sys.random_bytes(16):gsub(".", function(c) return string.format("%02x", c:byte()) end)
  local s = { session = mcp.session { caller = caller, backend = M.backend, toolsets = sets }, owner = who,
    used = now() }
  sessions[id], nsessions = s, nsessions + 1
  return id, s
end

-- find(req, caller) -> id, entry | nil, response
local function find(req, caller)
  local id = req.headers["mcp-session-id"]
  if not id or id == "" then
    return nil, refuse(400, "Bad Request: Mcp-Session-Id header is required (initialize first)")
  end
  local s = sessions[id]
  if s and now() - s.used > M.IDLE then drop(id); s = nil end
  if not s or s.owner ~= owner(caller) then
    return nil, refuse(404, "Session not found: initialize again", -32001)
  end
  s.used = now()
  return id, s
end

-- sessions_count() -> number of live sessions (tests, metrics)
function M.sessions_count() return nsessions end

-- the transport ----------------------------------------------------------------------------

local function accepts(req, what)
  local a = (req.headers.accept or ""):lower()
  return a:find(what, 1, true) ~= nil
end

-- sse_sender(w [, gone]) -> send(message) -> bool, is_open(): writes
-- JSON-RPC messages as SSE events on stream w; fires gone (a task.signal)
-- when the client has left
local function sse_sender(w, gone)
  local open = true
  local function send(m)
    if not open then return false end
    local ok, text = pcall(json.encode, m)
    if not ok then return false end
    open = w:write("event: message\ndata: " .. text .. "\n\n")
    if not open and gone then gone:fire() end
    return open
  end
  return send, function() return open end
end

-- handle(s, msg, opts) -> reply: one request as a task of its own, which a
-- notifications/cancelled for its id stops (the reply is then -32800)
local function handle(s, msg, opts)
  local k = json.encode(msg.id)
  s.inflight = s.inflight or {}
  local child = task.spawn(mcp.handle, { name = "mcp request " .. k }, s.session, msg, opts)
  s.inflight[k] = child
  local ok, reply = child:wait()
  if s.inflight[k] == child then s.inflight[k] = nil end
  if ok then return reply end
  if type(reply) == "table" and reply.code == "CANCELLED" then
    return mcp.error_reply(msg.id, -32800, "Request cancelled")
  end
  error(reply, 0)
end

-- cancel(s, params): notifications/cancelled {requestId, reason}
local function cancel(s, params)
  local k = type(params) == "table" and params.requestId ~= nil and json.encode(params.requestId)
  local child = k and s.inflight and s.inflight[k]
  if child then child:cancel("the client cancelled request " .. k .. (params.reason and ": " .. params.reason or "")) end
end

local function sse(sid, s, msg, caller)
  local session = s.session
  return { status = 200, headers = { ["content-type"] = "text/event-stream", ["cache-control"] = "no-cache",
    ["mcp-session-id"] = sid }, stream = function(w)
    local send = sse_sender(w)
    local stop = mcp.watch(session, send)
    local ok, reply = pcall(handle, s, msg, { send = send, caller = caller })
    stop()
    if not ok then error(reply, 0) end
    if reply then send(reply) end
  end }
end

M.KEEPALIVE = 15 -- seconds between SSE comments on an idle GET stream

-- the open GET streams hear when the registry changes
local streams = {}
local chained = tool.changed
tool.changed = function()
  for send in pairs(streams) do send { jsonrpc = "2.0", method = "notifications/tools/list_changed" } end
  if chained then chained() end
end

-- get(req, caller): the standalone stream of server-to-client messages
local function get(req, caller)
  if not accepts(req, "text/event-stream") then
    return refuse(405, "Method Not Allowed: GET opens an SSE stream; send Accept: text/event-stream", nil,
      { allow = "GET, POST, DELETE" })
  end
  local sid, s = find(req, caller)
  if not sid then return s end
  local session = s.session
  return { status = 200, headers = { ["content-type"] = "text/event-stream", ["cache-control"] = "no-cache",
    ["mcp-session-id"] = sid }, stream = function(w)
    local wake = task.signal()
    local send, is_open = sse_sender(w, wake)
    local stop = mcp.watch(session, send)
    streams[send] = true
    while is_open() do
      -- under the virtual clock a timer would run time forward for ever: a
      -- departed client is then noticed at the next message instead
      if not wake:wait(not core.virtual() and M.KEEPALIVE or nil) and not w:write(": keepalive\n\n") then
        break
      end
    end
    streams[send] = nil
    stop()
  end }
end

-- toolsets_of(req) -> the sets ?toolsets= names (nil: every tool) | nil, VALIDATION err
local function toolsets_of(req)
  local raw = ("&" .. (req.query or "")):match("&toolsets=([^&]*)")
  if raw == nil then return false end
  raw = raw:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
  return toolsets.parse(raw)
end

local function post(req, caller)
  local ctype = (req.headers["content-type"] or "application/json"):lower():match("^%s*([^;%s]+)")
  if ctype ~= "application/json" then
    return refuse(415, "Unsupported Media Type: the body must be application/json")
  end
  if req.headers.accept and not (accepts(req, "application/json") or accepts(req, "text/event-stream") or
      accepts(req, "*/*") or accepts(req, "application/*")) then
    return refuse(406, "Not Acceptable: the client must accept application/json or text/event-stream")
  end
  local body = req.body or ""
  if #body > M.MAX_BODY then return refuse(413, "Payload Too Large: at most " .. M.MAX_BODY .. " bytes") end
  local msg, err = json.decode(body)
  if msg == nil then
    return respond(400, mcp.error_reply(nil, mcp.PARSE_ERROR, "Parse error: " .. tostring(err and err.message)))
  end
  if type(msg) ~= "table" or msg == json.null or json.is_array(msg) or (msg.id ~= nil and not mcp.valid_id(msg.id)) then
    return respond(400, mcp.handle(mcp.session { caller = caller }, msg))
  end
  if msg.method == "initialize" and msg.id ~= nil then
    local sets, serr = toolsets_of(req)
    if sets == nil then return respond(400, mcp.error_reply(msg.id, mcp.INVALID_PARAMS, serr.message)) end
    local sid, s = new_session(caller, sets or nil)
    if not sid then return s end
    local reply = mcp.handle(s.session, msg, { caller = caller })
    if not (reply and reply.result) then
      drop(sid)
      return respond(400, reply)
    end
    return respond(200, reply, { ["mcp-session-id"] = sid })
  end
  local sid, s = find(req, caller)
  if not sid then return s end
  local session = s.session
  if msg.method == "notifications/cancelled" then cancel(s, msg.params) end
  if msg.id == nil or msg.method == nil then
    local reply = mcp.handle(session, msg, { caller = caller })
    if reply then return respond(400, reply, { ["mcp-session-id"] = sid }) end
    return respond(202, nil, { ["mcp-session-id"] = sid })
  end
  local params = type(msg.params) == "table" and msg.params or {}
  local token = type(params._meta) == "table" and params._meta.progressToken or nil
  if msg.method == "tools/call" and accepts(req, "text/event-stream") and (token ~= nil or session.log_level) then
    return sse(sid, s, msg, caller)
  end
  local reply = handle(s, msg, { caller = caller })
  return respond(200, reply, { ["mcp-session-id"] = sid })
end

-- handle(req, caller) -> response
function M.handle(req, caller)
  local refused = check_headers(req)
  if refused then return refused end
  local c = {}
  for k, v in pairs(caller or { name = "anonymous", scope = "read" }) do c[k] = v end
  c.front = "mcp"
  if req.method == "POST" then return post(req, c) end
  if req.method == "GET" then return get(req, c) end
  if req.method == "DELETE" then
    local sid, s = find(req, c)
    if not sid then return s end
    drop(sid)
    return respond(204, nil)
  end
  return refuse(405, "Method Not Allowed: POST JSON-RPC messages, GET an SSE stream, DELETE a session", nil,
    { allow = "GET, POST, DELETE" })
end

return M
