-- hypd.api.mcp: the Model Context Protocol front end. One JSON-RPC 2.0
-- message handler shared by two transports, which require it:
-- hypd.api.mcp_http (Streamable HTTP at /mcp: mcp_http.handle(req, caller),
-- caller = the authenticated {name, scope, ...}) and hypd.api.mcp_stdio
-- (newline-delimited JSON-RPC on stdin/stdout: mcp_stdio.main{api = URL|nil},
-- `hypd mcp [--api URL]`).
--
--   mcp.handle(session, message [, opts]) -> reply | nil
--                                         one message (a JSON text or a decoded table);
--                                         nil for notifications and responses.
--                                         opts.send(msg): where notifications for this
--                                         request go; opts.caller: who asks (else
--                                         session.caller)
--   mcp.session{caller, backend, send} -> session
--   mcp.local_backend() -> backend         the tool registry in this process
--
-- Protocol versions 2025-11-25 and 2025-06-18 are negotiated (the client's
-- when supported, else 2025-11-25). Tools are the registry's (hypd.tool.registry): a tool
-- failure is a result with isError (never a protocol error); an unknown
-- tool is -32602. Prompts are the skills (skills/*/SKILL.md); resources are
-- the active cluster and the recent operations.
--
-- A backend answers for the registry (local, or hypd.api.mcp_remote for
-- `hypd mcp --api URL`):
--   tools() -> { {name, kind, summary, description, status_tool, staged,
--                 input_schema, output_schema}, ... } | nil, err
--   has_tool(name) -> bool
--   find(name) -> {name, kind, toolsets} | nil   (which toolsets hold it)
--   call(name, args, caller) -> result | nil, err
--   operation(id, caller) -> operation view | nil, err (NOT_FOUND)
--   operations(limit, caller) -> { view, ... } | nil, err
local core = require "hypd.core"
local dispatch = require "hypd.tool.dispatch"
local errors = require "hypd.errors"
local json = require "hypd.json"
local log = require "hypd.log"
local op = require "hypd.tool.operations"
local sys = require "hypd.sys"
local tool = require "hypd.tool.registry"
local toolsets = require "hypd.tool.toolsets"

local M = {}

M.LATEST = "2025-11-25"
M.VERSIONS = { ["2025-11-25"] = true, ["2025-06-18"] = true }   -- negotiated at initialize
-- accepted in the MCP-Protocol-Version header: the negotiated ones, and the
-- version the spec says to assume when the header is absent
M.HEADER_VERSIONS = { ["2025-11-25"] = true, ["2025-06-18"] = true, ["2025-03-26"] = true }
M.RECENT_OPERATIONS = 20   -- operations listed as resources
M.ACTIVE_CLUSTER = "hypd://cluster/active"
M.OPERATION_URI = "hypd://operations/"

-- JSON-RPC error codes
M.PARSE_ERROR = -32700
M.INVALID_REQUEST = -32600
M.METHOD_NOT_FOUND = -32601
M.INVALID_PARAMS = -32602
M.INTERNAL_ERROR = -32603
M.RESOURCE_NOT_FOUND = -32002

-- MCP log levels (RFC 5424 order)
M.LEVELS = { debug = 1, info = 2, notice = 3, warning = 4, error = 5, critical = 6, alert = 7, emergency = 8 }

M.INSTRUCTIONS = table.concat({
  "hypd provisions and operates Amazon SageMaker HyperPod clusters on EKS.",
  "Read tools (readOnlyHint) are safe to call at any time.",
  "Mutating tools return an operation_id at once: follow it with the tool's status tool (named in its " ..
    "description) or operation_get until status is succeeded or failed; calling the same tool again for " ..
    "the same target joins the running operation instead of starting a second one.",
  "A result with isError names the problem; a VALIDATION error lists each field and rule to fix.",
  "Parameters marked x-hypd-decision are the person's decision: ask them, never invent a value.",
  "The prompts are hypd's skills, step-by-step guides for whole tasks; the resources are the active " ..
    "cluster (" .. M.ACTIVE_CLUSTER .. ") and recent operations (" .. M.OPERATION_URI .. "{id}).",
}, " ")

local function version()
  local ok, config = pcall(require, "hypd.config")
  return ok and type(config) == "table" and config.version or "0"
end

-- rpc errors ------------------------------------------------------------------------

local function rpc_fail(code, message, data)
  return nil, { code = code, message = message, data = data }
end

-- error_reply(id, code, message [, data]) -> a JSON-RPC error response
function M.error_reply(id, code, message, data)
  if id == nil then id = json.null end
  return { jsonrpc = "2.0", id = id, error = { code = code, message = message, data = data } }
end

-- results ---------------------------------------------------------------------------

-- shape(value, schema): see hypd.tool.shape
M.shape = require("hypd.tool.registry").shape

local function is_object(v)
  if type(v) ~= "table" or v == json.null or json.is_array(v) then return false end
  return json.is_object(v) or next(v) == nil or type(next(v)) == "string"
end

-- tool_result(result, output_schema) -> CallToolResult
function M.tool_result(result, schema)
  if result == nil or result == json.null then result = json.object() end
  result = M.shape(result, schema)
  local ok, text = pcall(json.encode, result)
  if not ok then
    return M.tool_error(errors.new("JSON", "the result cannot be encoded as JSON: " .. tostring(text)))
  end
  local out = { content = { { type = "text", text = text } } }
  if is_object(result) then
    out.structuredContent = next(result) == nil and json.object() or result
  end
  return out
end

-- tool_error(err) -> CallToolResult with isError: the message for the
-- model, {error = {code, message, fields}} for programs
function M.tool_error(err)
  if type(err) ~= "table" then err = errors.new("INTERNAL", tostring(err)) end
  if err.code == "INTERNAL" or err.code == nil then log.error("mcp", "a tool failed: %s", tostring(err.message)) end
  local out = errors.view(err)
  if out.fields then out.fields = json.array(out.fields) end
  return { isError = true, content = { { type = "text", text = out.message } }, structuredContent = { error = out } }
end

-- the local backend ------------------------------------------------------------------

-- describe(def): the registry's one description of a tool (hypd.tool.registry)
M.describe = tool.describe

function M.local_backend()
  local b = {}
  function b.tools()
    local out = {}
    for i, def in ipairs(tool.list()) do out[i] = M.describe(def) end
    return out
  end
  function b.has_tool(name) return tool.get(name) ~= nil end
  function b.find(name) return tool.get(name) end
  function b.call(name, args, caller) return dispatch.call(name, args, caller) end
  function b.operation(id)
    local rec = type(id) == "string" and op.get(id)
    if not rec then return errors.fail("NOT_FOUND", "no operation " .. tostring(id)) end
    return op.view(rec)
  end
  function b.operations(limit)
    local out = {}
    for i, rec in ipairs(op.list { limit = limit }) do out[i] = op.view(rec) end
    return out
  end
  return b
end

-- sessions ---------------------------------------------------------------------------

-- session{caller, backend, send, toolsets} -> session: what one client
-- negotiated (protocol, log_level, client info) and how to reach it;
-- toolsets = {name = true} (hypd.tool.toolsets.parse): the tools it lists
-- and calls (nil: every tool)
function M.session(opts)
  opts = opts or {}
  return { caller = opts.caller, backend = opts.backend or M.local_backend(), send = opts.send,
    toolsets = opts.toolsets, protocol = nil, log_level = nil, initialized = false, client = nil }
end

-- sets_named(sets) -> "cluster, observe": a session's toolsets, for messages
local function sets_named(sets)
  local out = {}
  for _, n in ipairs(toolsets.NAMES) do if sets[n] then out[#out + 1] = n end end
  return table.concat(out, ", ")
end

-- notify(send, method, params): one notification, when there is a channel
local function notify(send, method, params)
  if send then return send { jsonrpc = "2.0", method = method, params = params } end
  return false
end

-- log_to(session, send, level, logger, data): notifications/message when
-- the client asked for this level (logging/setLevel)
function M.log_to(session, send, level, logger, data)
  local min = session.log_level and M.LEVELS[session.log_level]
  if not min or (M.LEVELS[level] or 0) < min then return false end
  return notify(send, "notifications/message", { level = level, logger = logger, data = data })
end

local OP_LEVEL = { ["operation.failed"] = "error", ["operation.cancelled"] = "warning" }
local LOG_LEVEL = { debug = "debug", info = "info", warn = "warning", error = "error" }

-- watch(session, send, opts) -> stop: forwards operation events (and with
-- opts.log_lines, hypd's own log lines) as notifications/message at the
-- session's level
function M.watch(session, send, opts)
  local stops = {}
  stops[1] = op.subscribe(function(ev)
    if ev.kind == "operation.progress" and not ev.message then return end
    M.log_to(session, send, OP_LEVEL[ev.kind] or "info", "hypd.operations", { event = ev.kind,
      operation_id = ev.operation_id, tool = ev.tool, target = ev.target, status = ev.status, phase = ev.phase,
      message = ev.message })
  end)
  if opts and opts.log_lines and log.subscribe then
    local busy = false -- a log line written while sending one is not sent again
    stops[2] = log.subscribe(function(level, component, message)
      if busy then return end
      busy = true
      pcall(M.log_to, session, send, LOG_LEVEL[level] or "info", "hypd." .. tostring(component), message)
      busy = false
    end, "debug")
  end
  return function() for _, stop in ipairs(stops) do stop() end end
end

-- progress_fn(token, send) -> fn(progress, total, message) | nil: sends
-- notifications/progress for the request that carried this token; the
-- progress always increases
local function progress_fn(token, send)
  if token == nil or token == json.null or not send then return nil end
  local last = 0
  return function(progress, total, message)
    progress = tonumber(progress)
    if not progress or progress <= last then progress = last + 1 end
    last = progress
    local params = { progressToken = token, progress = progress, total = tonumber(total) }
    if message ~= nil then params.message = tostring(message) end
    return notify(send, "notifications/progress", params)
  end
end

-- methods ------------------------------------------------------------------------------

local methods = {}
local notifications = {}

methods.initialize = function(req, p)
  local asked = p.protocolVersion
  local chosen = (type(asked) == "string" and M.VERSIONS[asked]) and asked or M.LATEST
  local s = req.session
  s.protocol, s.client, s.client_capabilities = chosen, p.clientInfo, p.capabilities
  return { protocolVersion = chosen,
    capabilities = { tools = { listChanged = true }, prompts = { listChanged = false },
      resources = { subscribe = false, listChanged = false }, logging = json.object() },
    serverInfo = { name = "hypd", title = "hypd", version = version() },
    instructions = s.toolsets and (M.INSTRUCTIONS .. " This session lists the toolsets " .. sets_named(s.toolsets) ..
      "; a skill that needs another names it (hypd mcp --toolsets, /mcp?toolsets=).") or M.INSTRUCTIONS }
end

methods.ping = function() return json.object() end

-- for_agent(schema) -> a copy without the keys of a person's form
-- (x-hypd-label, -help, -group, -order: the web and REST have them): an
-- agent reads each parameter's description, and pays for every byte of
-- tools/list
local FORM_KEYS = { ["x-hypd-label"] = true, ["x-hypd-help"] = true, ["x-hypd-group"] = true,
  ["x-hypd-order"] = true }
local function for_agent(s)
  if type(s) ~= "table" then return s end
  local out = {}
  for k, v in pairs(s) do
    if not FORM_KEYS[k] then out[k] = for_agent(v) end
  end
  return setmetatable(out, getmetatable(s))
end

-- mcp_tool(d) -> the MCP Tool for a backend description
function M.mcp_tool(d)
  local desc = d.description or d.summary or d.name
  if d.staged and d.status_tool then
    desc = desc .. "\n\nMutating: returns an operation_id at once; call " .. d.status_tool .. " every " ..
      op.POLL_AFTER .. " s until status is succeeded/failed."
  end
  local out = { name = d.name, title = d.summary, description = desc, inputSchema = for_agent(d.input_schema),
    annotations = { title = d.summary, readOnlyHint = d.kind == "read", destructiveHint = d.kind == "destructive",
      idempotentHint = d.kind == "read" or d.staged == true, openWorldHint = true } }
  if type(out.inputSchema) ~= "table" then out.inputSchema = { type = "object", properties = json.object() } end
  -- where the tool comes from: built-in, or an operator's playbook (over a built-in one); for a tool
  -- an operator's file is in, every file it loads, and those of them that take the place of built-in
  -- ones (a built-in tool's files and hashes are in hypd tools --json and GET /api/v1/tools: the
  -- agent pays for every byte of tools/list)
  local operator = (d.source or "built-in") ~= "built-in" or d.overridden_by ~= nil
  out._meta = { ["hypd.io/source"] = d.source or "built-in", ["hypd.io/overrides"] = d.overrides,
    ["hypd.io/overridden_by"] = d.overridden_by, ["hypd.io/modules"] = operator and d.modules or nil }
  -- MCP requires an object schema for results; anything else is left out
  if type(d.output_schema) == "table" and d.output_schema.type == "object" then out.outputSchema = d.output_schema end
  return out
end

methods["tools/list"] = function(req)
  local list, err = req.session.backend.tools()
  if not list then return rpc_fail(M.INTERNAL_ERROR, "the tool list is not available: " .. tostring(err and err.message)) end
  local out = json.array()
  for _, d in ipairs(list) do
    if toolsets.has(d, req.session.toolsets) then out[#out + 1] = M.mcp_tool(d) end
  end
  return { tools = out }
end

-- caller_for(req, progress) -> the caller of a tool call: front "mcp", and
-- caller.progress(p, total, message) when the client asked for progress
local function caller_for(req, progress)
  local c = {}
  for k, v in pairs(req.caller or { name = "anonymous", scope = "read" }) do c[k] = v end
  c.front = c.front or "mcp"
  c.progress = progress
  return c
end

methods["tools/call"] = function(req, p)
  local name = p.name
  if type(name) ~= "string" or name == "" then
    return rpc_fail(M.INVALID_PARAMS, "Invalid params: tools/call needs params.name, the name of a tool")
  end
  local backend = req.session.backend
  if not backend.has_tool(name) then return rpc_fail(M.INVALID_PARAMS, "Unknown tool: " .. errors.echo(name, 64)) end
  local sets = req.session.toolsets
  local found = sets and backend.find and backend.find(name)
  if found and not toolsets.has(found, sets) then
    return rpc_fail(M.INVALID_PARAMS, "Unknown tool: " .. name .. " is not in this session's toolsets (" ..
      sets_named(sets) .. "); it is in " .. toolsets.holding(found) .. " (hypd mcp --toolsets, /mcp?toolsets=)")
  end
  local args = p.arguments
  if args == nil or args == json.null then args = json.object() end
  local progress = progress_fn(req.progress_token, req.send)
  local stop
  if progress then
    -- the operation this call starts (or joins) reports its phases as
    -- progress, and so does the one a call is about (operation_get or
    -- operation_list_events with wait_seconds: an agent that follows an
    -- operation hears its waits and its children's as they come)
    local about = type(args) == "table" and type(args.operation_id) == "string" and args.operation_id or nil
    stop = op.subscribe(function(ev)
      local ours = ev.tool == name or (about ~= nil and ev.operation_id == about)
      if ours and ev.kind ~= "operation.progress" then
        progress(nil, nil, ev.operation_id .. " " .. tostring(ev.status) .. ": " .. tostring(ev.phase))
      elseif ours and ev.message then
        progress(nil, nil, ev.operation_id .. ": " .. tostring(ev.message))
      end
    end)
  end
  local ok, result, err = pcall(backend.call, name, args, caller_for(req, progress))
  if stop then stop() end
  if not ok then return M.tool_error(result) end
  if result == nil then return M.tool_error(err or errors.new("INTERNAL", name .. " returned nothing")) end
  return M.tool_result(result)
end

-- skills as prompts -----------------------------------------------------------------------

M.skills_dir = nil -- where skills/<name>/SKILL.md live (default: $HYPD_SKILLS, ./skills, <state>/skills)

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function list_dir(dir)
  return sys.listdir(dir) or {}
end

local function skills_dirs()
  local dirs = {}
  if M.skills_dir then dirs[#dirs + 1] = M.skills_dir end
  if os.getenv("HYPD_SKILLS") then dirs[#dirs + 1] = os.getenv("HYPD_SKILLS") end
  dirs[#dirs + 1] = "skills"
  local ok, config = pcall(require, "hypd.config")
  if ok and type(config) == "table" and config.state_dir then dirs[#dirs + 1] = config.state_dir .. "/skills" end
  return dirs
end

-- parse_skill(text) -> {name, description, body} | nil: YAML-style front
-- matter (`key: value` lines between --- lines), then the Markdown body
function M.parse_skill(text)
  local head, body = text:match("^%-%-%-\r?\n(.-)\r?\n%-%-%-\r?\n(.*)$")
  if not head then return nil end
  local meta = {}
  for line in head:gmatch("[^\r\n]+") do
    local k, v = line:match("^([%w_-]+):%s*(.-)%s*$")
    if k then
      local q = v:match('^"(.*)"$') or v:match("^'(.*)'$")
      meta[k] = q or v
    end
  end
  if type(meta.name) ~= "string" or meta.name == "" then return nil end
  return { name = meta.name, description = meta.description or "", body = (body:gsub("^%s+", "")) }
end

-- the skills compiled into hypd (skills/*/SKILL.md of the source tree)
local function embedded_skills()
  local out = {}
  for _, mod in ipairs(core.embedded_list("skills.")) do
    local s = M.parse_skill(core.embedded(mod) or "")
    if s then
      s.path = mod:gsub("%.", "/"):gsub("/md$", ".md")
      out[#out + 1] = s
    end
  end
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end

-- skills() -> { {name, description, body, path}, ... } from the first skills
-- directory that exists, else the ones built into hypd, by name
function M.skills()
  for _, dir in ipairs(skills_dirs()) do
    local names = list_dir(dir)
    if #names > 0 then
      local out = {}
      for _, n in ipairs(names) do
        local path = dir .. "/" .. n .. "/SKILL.md"
        local text = read_file(path)
        local s = text and M.parse_skill(text)
        if s then
          s.path = path
          out[#out + 1] = s
        elseif text then
          log.warn("mcp", "%s has no front matter with a name; it is not offered as a prompt", path)
        end
      end
      table.sort(out, function(a, b) return a.name < b.name end)
      return out
    end
  end
  return embedded_skills()
end

methods["prompts/list"] = function()
  local out = json.array()
  for i, s in ipairs(M.skills()) do out[i] = { name = s.name, description = s.description } end
  return { prompts = out }
end

methods["prompts/get"] = function(_, p)
  if type(p.name) ~= "string" then return rpc_fail(M.INVALID_PARAMS, "Invalid params: prompts/get needs params.name") end
  for _, s in ipairs(M.skills()) do
    if s.name == p.name then
      return { description = s.description,
        messages = { { role = "user", content = { type = "text", text = s.body } } } }
    end
  end
  return rpc_fail(M.INVALID_PARAMS, "Unknown prompt: " .. errors.echo(p.name, 64) .. " (prompts/list names them)")
end

-- resources ---------------------------------------------------------------------------------

local OP_TEMPLATE = { uriTemplate = M.OPERATION_URI .. "{id}", name = "operation", title = "An operation",
  description = "One hypd operation (a mutating tool call): status, phase, steps with timings, result or error.",
  mimeType = "application/json" }

methods["resources/list"] = function(req)
  local backend, out = req.session.backend, json.array()
  if backend.has_tool("cluster_get_status") then
    out[#out + 1] = { uri = M.ACTIVE_CLUSTER, name = "active-cluster", title = "The active cluster",
      description = "cluster_get_status of the active cluster (see cluster_switch): EKS status, version, " ..
        "add-ons, HyperPod instance groups, running operations.", mimeType = "application/json" }
  end
  local ops, err = backend.operations(M.RECENT_OPERATIONS, req.caller)
  if not ops then log.warn("mcp", "resources/list: no operations: %s", tostring(err and err.message)) end
  for _, v in ipairs(ops or {}) do
    out[#out + 1] = { uri = M.OPERATION_URI .. v.operation_id, name = v.operation_id,
      title = tostring(v.tool) .. " " .. tostring(v.target or "") .. " (" .. tostring(v.status) .. ")",
      description = "operation " .. v.operation_id .. ": " .. tostring(v.tool) .. ", " .. tostring(v.status) ..
        ", phase " .. tostring(v.phase), mimeType = "application/json" }
  end
  return { resources = out }
end

methods["resources/templates/list"] = function()
  return { resourceTemplates = { OP_TEMPLATE } }
end

local function read_failed(uri, err)
  local code = err and err.code
  if code == "NOT_FOUND" or code == "STATE" then
    return rpc_fail(M.RESOURCE_NOT_FOUND, "Resource not found: " .. errors.echo(uri, 80) ..
      (err.message and " (" .. err.message .. ")" or ""), { uri = errors.echo(uri, 256) })
  end
  local msg = err and errors.public(setmetatable(err, getmetatable(err) or errors.mt)).message or "failed"
  return rpc_fail(M.INTERNAL_ERROR, "reading " .. errors.echo(uri, 80) .. " failed: " .. tostring(msg),
    { uri = errors.echo(uri, 256), code = code })
end

methods["resources/read"] = function(req, p)
  local uri = p.uri
  if type(uri) ~= "string" then return rpc_fail(M.INVALID_PARAMS, "Invalid params: resources/read needs params.uri") end
  local backend = req.session.backend
  local value, err
  if uri == M.ACTIVE_CLUSTER and backend.has_tool("cluster_get_status") then
    local ok
    ok, value, err = pcall(backend.call, "cluster_get_status", json.object(), caller_for(req))
    if not ok then value, err = nil, value end
  elseif uri:sub(1, #M.OPERATION_URI) == M.OPERATION_URI then
    local id = uri:sub(#M.OPERATION_URI + 1)
    if #id ~= 19 or not id:match("^op%-%x+$") then
      return read_failed(uri, errors.new("NOT_FOUND", "no operation " .. errors.echo(id, 24)))
    end
    value, err = backend.operation(id, req.caller)
  else
    return rpc_fail(M.RESOURCE_NOT_FOUND, "Resource not found: " .. errors.echo(uri, 80) .. " (resources/list names them)",
      { uri = errors.echo(uri, 256) })
  end
  if value == nil then return read_failed(uri, err) end
  return { contents = { { uri = uri, mimeType = "application/json", text = json.encode(value) } } }
end

methods["logging/setLevel"] = function(req, p)
  if not M.LEVELS[p.level] then
    return rpc_fail(M.INVALID_PARAMS, "Invalid params: level must be one of debug, info, notice, warning, error, " ..
      "critical, alert, emergency")
  end
  req.session.log_level = p.level
  return json.object()
end

notifications["notifications/initialized"] = function(session) session.initialized = true end

-- handling one message ------------------------------------------------------------------------

-- a JSON-RPC id hypd answers to: a string or an integer (1e400, 1.5 and
-- 2^64 are neither; an integral float such as 7.0 is read as 7)
function M.valid_id(id)
  return type(id) == "string" or math.tointeger(id) ~= nil
end
local valid_id = M.valid_id

-- handle(session, message [, opts]) -> reply | nil
function M.handle(session, msg, opts)
  opts = opts or {}
  if type(msg) == "string" then
    local v, err = json.decode(msg)
    if v == nil then return M.error_reply(nil, M.PARSE_ERROR, "Parse error: " .. tostring(err and err.message)) end
    msg = v
  end
  if type(msg) ~= "table" or msg == json.null then
    return M.error_reply(nil, M.INVALID_REQUEST, "Invalid Request: a message is a JSON-RPC object")
  end
  if json.is_array(msg) then
    return M.error_reply(nil, M.INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported (MCP " ..
      "2025-06-18 removed them); send one message per request")
  end
  local id = msg.id
  if id ~= nil and not valid_id(id) then
    return M.error_reply(nil, M.INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
  end
  if type(id) == "number" then id = math.tointeger(id) end
  if msg.jsonrpc ~= "2.0" then
    return M.error_reply(id, M.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"')
  end
  local method = msg.method
  if method == nil then
    if id ~= nil and (msg.result ~= nil or msg.error ~= nil) then return nil end -- a response: hypd asks nothing
    return M.error_reply(id, M.INVALID_REQUEST, "Invalid Request: no method")
  end
  if type(method) ~= "string" then return M.error_reply(id, M.INVALID_REQUEST, "Invalid Request: method must be a string") end
  local params = msg.params
  if params == nil or params == json.null then params = json.object() end
  if type(params) ~= "table" or json.is_array(params) then
    if id == nil then return nil end
    return M.error_reply(id, M.INVALID_PARAMS, "Invalid params: params must be an object")
  end
  if id == nil then
    local fn = notifications[method]
    if fn then
      local ok, err = pcall(fn, session, params)
      if not ok then log.warn("mcp", "%s: %s", method, tostring(err)) end
    end
    return nil
  end
  local fn = methods[method]
  if not fn then return M.error_reply(id, M.METHOD_NOT_FOUND, "Method not found: " .. errors.echo(method, 64)) end
  local meta = type(params._meta) == "table" and params._meta or {}
  local req = { session = session, id = id, send = opts.send or session.send, caller = opts.caller or session.caller,
    progress_token = meta.progressToken }
  local ok, result, err = pcall(fn, req, params)
  if not ok then
    local e = result
    if type(e) == "table" and e.code == "CANCELLED" then error(e, 0) end
    log.error("mcp", "%s failed: %s", method, tostring(type(e) == "table" and (e.message or e.code) or e))
    return M.error_reply(id, M.INTERNAL_ERROR, "Internal error (details are in the hypd log)")
  end
  if result == nil then return M.error_reply(id, err.code, err.message, err.data) end
  return { jsonrpc = "2.0", id = id, result = result }
end

-- notify_all(method, params): tools/list_changed and such to every session
-- that has a channel (registered by the transports)
M.channels = setmetatable({}, { __mode = "k" }) -- session -> send
function M.notify_all(method, params)
  for _, send in pairs(M.channels) do pcall(notify, send, method, params) end
end

local hooked = false
-- hook_registry(): the registry's change hook sends tools/list_changed
-- (chained with any hook already set)
function M.hook_registry()
  if hooked then return end
  hooked = true
  local prev = tool.changed
  tool.changed = function(...)
    if prev then prev(...) end
    M.notify_all("notifications/tools/list_changed")
  end
end

return M
