-- hypd.cli._registry: the commands `hypd tools`, `hypd call`, `hypd token`
-- and `hypd mcp`, after hypd.cli has parsed their options (and what
-- hypd.cli.tools, .call, .token and .mcp run). Each returns the exit status:
-- 0, 1 for a failed call (the error on stderr), 2 for a usage error;
-- results go to stdout as JSON.
--
-- These entry points are not tasks: they drive the engine themselves
-- (run below), so that `hypd call --detach` can leave an operation it
-- started as persisted (running, resumed by the next `hypd serve` on the
-- same state) instead of cancelling it.
local auth = require "hypd.api.auth"
local core = require "hypd.core"
local sys = require "hypd.sys"
local errors = require "hypd.errors"
local http = require "hypd.http"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local progress = require "hypd.cli_progress"
local sched = require "hypd._sched"
local statelock = require "hypd.statelock"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local say_for = require "hypd.cli._words"
local loader = require "hypd.tool.loader"

local M = {}

M.API = "/api/v1" -- where a server's REST API is (the CLI is its client over --api)

-- seconds an event poll is held open for news (wait_seconds): short, so
-- that the follower wakes to tick its progress (a terminal's clock every
-- second, a pipe's "still waiting" line) while no event comes
M.WAIT, M.WAIT_TTY = 5, 1

local function say(...) io.stdout:write(...) io.stdout:flush() end
local function warn(...) io.stderr:write(...) io.stderr:flush() end

local function usage(msg)
  warn("hypd: ", msg, "\n")
  return 2
end

-- show_error(e [, props, name]) -> 1: the error on stderr; a VALIDATION
-- error said for a person when props (tool name's parameters) are known
local function show_error(e, props, name)
  if type(e) ~= "table" then e = errors.new("INTERNAL", tostring(e)) end
  if props then e = say_for.explain(e, props, name) end
  local pe = errors.public(setmetatable(e, getmetatable(e) or errors.mt))
  warn("hypd: ", tostring(pe.code or "ERROR"), ": ", tostring(pe.message or ""), "\n")
  return 1
end

local function print_json(v)
  say(json.encode(v, { pretty = true }), "\n")
end

-- run(fn, ...) -> fn's results | nil, err: runs fn as a task and drives the
-- engine until it is done or the process is interrupted (err CANCELLED);
-- tasks fn started are left as they are
local function run(fn, ...)
  local t = sched.spawn(fn, { name = "hypd cli" }, ...)
  sched.run(function() return t:finished() or core.interrupted() end)
  if not t:finished() then
    core.interrupted(true)
    return nil, errors.new("CANCELLED", "interrupted")
  end
  if t.status == "failed" then return nil, t.err end
  return table.unpack(t.result, 1, t.result.n)
end

local function load_tools()
  loader.load()
end

-- tools ----------------------------------------------------------------------------

-- tools{json, markdown} -> 0: the registry, as a table, (json) with its
-- schemas or (markdown) as the tool reference docs/tools.md
function M.tools(opts)
  local ok, err = run(load_tools)
  if ok == nil and err then return show_error(err) end
  if opts and opts.json then
    print_json { tools = tool.registry_view() }
    return 0
  end
  if opts and opts.markdown then
    say(require("hypd.cli._tools_markdown").render(tool.list()))
    for _, e in ipairs(loader.errors()) do warn("hypd: ", e.file, ": ", e.message, "\n") end
    return 0
  end
  local defs, wn, wk = tool.list(), 4, 4
  for _, d in ipairs(defs) do wn, wk = math.max(wn, #d.name), math.max(wk, #d.kind) end
  local f = "%-" .. wn .. "s  %-" .. wk .. "s  %s\n"
  say(string.format(f, "NAME", "KIND", "SUMMARY"))
  for _, d in ipairs(defs) do
    local by = d.overridden_by and "  [overridden by " .. table.concat(d.overridden_by, ", ") .. "]" or ""
    say(string.format(f, d.name, d.kind, d.summary .. by))
  end
  for _, e in ipairs(loader.errors()) do warn("hypd: ", e.file, ": ", e.message, "\n") end
  return 0
end

-- skills{name, json} -> exit status: the skills (hypd.api.mcp.skills), or one of them
function M.skills(opts)
  local list = require("hypd.api.mcp").skills()
  if opts.name then
    for _, s in ipairs(list) do
      if s.name == opts.name then
        if opts.json then print_json { name = s.name, description = s.description, body = s.body } else say(s.body) end
        return 0
      end
    end
    local names = {}
    for i, s in ipairs(list) do names[i] = s.name end
    warn("hypd: no skill ", opts.name, " (the skills: ", table.concat(names, ", "), ")\n")
    return 1
  end
  if opts.json then
    local out = json.array()
    for i, s in ipairs(list) do out[i] = { name = s.name, description = s.description } end
    print_json { skills = out }
    return 0
  end
  local wn = 4
  for _, s in ipairs(list) do wn = math.max(wn, #s.name) end
  say(string.format("%-" .. wn .. "s  %s\n", "NAME", "DESCRIPTION"))
  for _, s in ipairs(list) do say(string.format("%-" .. wn .. "s  %s\n", s.name, s.description)) end
  return 0
end

-- call -----------------------------------------------------------------------------

-- args_from(params, words, base) -> args | nil, message: key=value words
-- read by the schema (params: name -> spec with type/items), key:=json
-- taken as JSON
local function args_from(params, words, base)
  local args = base or json.object()
  for _, w in ipairs(words or {}) do
    local k, v = w:match("^([%w_]+):=(.*)$")
    if k then
      local val, err = json.decode(v)
      if val == nil then return nil, "argument '" .. w .. "' has a value that is not JSON: " .. err.message end
      args[k] = val
    else
      k, v = w:match("^([%w_]+)=(.*)$")
      if not k then return nil, say_for.argument(w, params) end
      args[k] = tool.coerce(params, k, v)
    end
  end
  return args
end

M.args_from = args_from -- for tests/fuzz/lua_targets.lua

local function is_accepted(r)
  return type(r) == "table" and type(r.operation_id) == "string" and r.status_tool ~= nil
end

local function finished(view)
  if view.status == "succeeded" then return 0 end
  local e = type(view.error) == "table" and view.error or {}
  warn("hypd: operation ", tostring(view.operation_id), " ", tostring(view.status), ": ",
    tostring(e.code or view.status), ": ", tostring(e.message or ""), "\n")
  return 1
end

-- follow(p, fetch) -> true | nil, err: shows an operation's events, read
-- with fetch(after, wait) -> {events, next, status} | nil, err, until it
-- has ended; the same for an operation in this process and on a server, so
-- both show the same phases and notes (its children's too: hypd.tool.operations relays
-- them to the parent), and the same ticks between them
local function follow(p, fetch)
  local after = 0
  while true do
    local r, err = fetch(after, p.tty and M.WAIT_TTY or M.WAIT)
    if not r then return nil, err end
    for _, ev in ipairs(r.events or {}) do p:event(ev) end
    p:tick()
    after = math.tointeger(r.next) or after
    if r.status ~= "running" and #(r.events or {}) == 0 then return true end
  end
end

-- follows an operation started in this process until it ends (or until
-- its task here stops without ending it: the host was interrupted)
local function follow_local(id, show_phases)
  if not show_phases then return run(op.wait, id) end
  local p = progress.new(io.stderr, id, sys.isatty(2))
  local ok, err = run(follow, p, function(after, wait)
    local r, ferr = op.events(id, after, 200, wait)
    if r and r.status == "running" and #r.events == 0 and not op.active()[id] then r.status = "interrupted" end
    return r, ferr
  end)
  local view = ok and op.view(op.get(id))
  if view and view.status == "running" then view, err = nil, errors.new("CANCELLED", "interrupted") end
  p:finish(view and view.status or "interrupted")
  return view, err
end

local call_remote

-- forward(opts, base, herr) -> exit status: a mutating call made beside the
-- server that owns the state directory goes to that server, whose URL the
-- lock records (hypd.statelock), with the token in HYPD_TOKEN; without a
-- token, the refusal says which command works
local function forward(opts, base, herr)
  local token = os.getenv("HYPD_TOKEN")
  if not token or token == "" then
    herr.message = herr.message .. " Set HYPD_TOKEN to a token of that server (make run prints an export line " ..
      "for it; hypd --state " .. tostring(herr.dir) .. " token create --scope operate --name cli makes one) and " ..
      "the call goes there."
    return show_error(herr)
  end
  warn("hypd: ", statelock.describe(herr.holder), " owns ", tostring(herr.dir), ": calling ", opts.tool,
    " there (hypd call --api ", herr.holder.url, " ", opts.tool, " ...)\n")
  opts.api, opts.stay = herr.holder.url, not opts.detach
  return call_remote(opts, base)
end

local function tool_names(defs)
  local names = {}
  for _, d in ipairs(defs) do names[#names + 1] = d.name end
  return names
end

local function call_local(opts, base)
  local ok, lerr = run(load_tools)
  if ok == nil and lerr then return show_error(lerr) end
  local def = tool.get(opts.tool)
  if not def then return show_error(errors.new("NOT_FOUND", say_for.unknown_tool(opts.tool, tool_names(tool.list())))) end
  local args, uerr = args_from(def.params, opts.words, base)
  if not args then return usage(uerr) end
  -- only the state directory's owner mutates (hypd.statelock); a plan
  -- changes nothing, so it runs here beside the owner
  if def.kind ~= "read" and not (def.steps and args.plan == true) then
    local held, herr = statelock.acquire { command = "hypd call " .. opts.tool, hint = "Call the tool through " ..
      "it: hypd call --api URL " .. opts.tool .. " ... (token in HYPD_TOKEN)." }
    if not held then
      if herr.code == "LOCKED" and type(herr.holder) == "table" and herr.holder.url then
        return forward(opts, base, herr)
      end
      return show_error(herr)
    end
  end
  local caller = { name = "cli:" .. (os.getenv("USER") or "local"), scope = "admin", front = "cli" }
  local r, err = run(dispatch.call, opts.tool, args, caller)
  if r == nil and err then return show_error(err, def.params, def.name) end
  if r == nil then r = json.object() end
  if not (def and def.steps and is_accepted(r)) then
    print_json(r)
    return 0
  end
  local id = r.operation_id
  local ours = op.active()[id] ~= nil
  if opts.detach or (not ours and not opts.wait) then
    print_json(r)
    warn("hypd: operation ", id, ours and " is left as persisted; " or " runs elsewhere; ",
      "the next `hypd serve` on this state resumes it if it is still running\n")
    return 0
  end
  if not opts.wait then
    print_json(r)
    warn("hypd: waiting for operation ", id, " (", opts.tool, ") to finish; --detach would leave it running\n")
  end
  local view, werr = follow_local(id, opts.wait)
  if not view then
    if werr and werr.code == "CANCELLED" then
      warn("hypd: interrupted; operation ", id, " stays running and resumes at the next `hypd serve` on this state\n")
      return 130
    end
    return show_error(werr)
  end
  if opts.wait then print_json(view) end
  return finished(view)
end

-- remote: the REST API of a running server

local function api_request(base, token, method, path, body)
  local resp, err = http.request { method = method, url = base .. M.API .. path, timeout = 120,
    headers = { authorization = "Bearer " .. token, ["content-type"] = body and "application/json" or nil,
      accept = "application/json" }, body = body }
  if not resp then return nil, err end
  local v = json.decode(resp.body)
  if resp.status >= 400 then
    local e = type(v) == "table" and type(v.error) == "table" and v.error or
      { code = "HTTP", message = "HTTP " .. resp.status .. " from " .. base }
    return nil, errors.new(tostring(e.code), tostring(e.message), { fields = e.fields, status = resp.status })
  end
  if v == nil then return nil, errors.new("JSON", "the server answered something that is not JSON") end
  return v, nil, resp.status
end

-- follows an operation on a server through its events, then fetches its
-- final view
local function follow_remote(base, token, id)
  local p = progress.new(io.stderr, id, sys.isatty(2))
  local ok, err = follow(p, function(after, wait)
    return api_request(base, token, "GET", "/operations/" .. id .. "/events?after=" .. after ..
      "&wait_seconds=" .. wait)
  end)
  if not ok then return nil, err end
  local view, verr = api_request(base, token, "GET", "/operations/" .. id)
  if not view then return nil, verr end
  p:finish(view.status)
  return view
end

function call_remote(opts, base)
  local token = os.getenv("HYPD_TOKEN")
  if not token or token == "" then
    return usage("--api needs a token in HYPD_TOKEN (hypd token create --scope operate --name NAME on the server)")
  end
  core.add_secret(token)
  local url = opts.api:gsub("/+$", ""):gsub("/api/v1$", "")
  if not url:match("^https?://[^/]+$") then return usage("--api must be http(s)://HOST:PORT, not '" .. opts.api .. "'") end
  local props
  local v, err = run(function()
    local d, derr = api_request(url, token, "GET", "/tools/" .. opts.tool)
    if not d and derr and derr.code == "NOT_FOUND" then
      local list = api_request(url, token, "GET", "/tools")
      derr.message = say_for.unknown_tool(opts.tool, tool_names(type(list) == "table" and list.tools or {}))
    end
    if not d then return nil, derr end
    props = type(d.input_schema) == "table" and d.input_schema.properties or nil
    local args, uerr = args_from(props, opts.words, base)
    if not args then return nil, errors.new("USAGE", uerr) end
    local r, cerr, status = api_request(url, token, "POST", "/tools/" .. opts.tool, json.encode(args))
    if not r then return nil, cerr end
    if status ~= 202 or not is_accepted(r) then return { result = r } end
    if not opts.wait then
      if not opts.stay then return { result = r } end
      -- forwarded from an in-process call: it stays until the operation
      -- ends, as in-process (unless --detach)
      print_json(r)
      warn("hypd: waiting for operation ", r.operation_id, " (", opts.tool, ") to finish; --detach would leave " ..
        "it running\n")
      local view = r
      while view.status == "running" do
        local verr
        view, verr = api_request(url, token, "GET", "/operations/" .. r.operation_id .. "?wait_seconds=" .. M.WAIT)
        if not view then return nil, verr end
      end
      return { view = view }
    end
    local view, ferr = follow_remote(url, token, r.operation_id)
    if not view then return nil, ferr end
    return { result = view, view = view }
  end)
  if not v then
    if err and err.code == "USAGE" then return usage(err.message) end
    if err and err.code == "CANCELLED" then
      warn("hypd: interrupted; the operation runs on in the server\n")
      return 130
    end
    if err and err.code == "CONNECT" then err.message = say_for.unreachable(url, err) end
    return show_error(err, props, opts.tool)
  end
  if v.result then print_json(v.result) end
  if v.view then return finished(v.view) end
  return 0
end

-- call{tool, words, json, api, wait, detach} -> exit status
function M.call(opts)
  if type(opts.tool) ~= "string" or opts.tool == "" then return usage("call needs a TOOL (see hypd tools)") end
  if opts.wait and opts.detach then return usage("--wait and --detach cannot be combined") end
  local base = json.object()
  if opts.json then
    local v, err = json.decode(opts.json)
    if type(v) ~= "table" or json.is_array(v) then
      return usage("--json must be a JSON object" .. (err and ": " .. err.message or ""))
    end
    base = v
  end
  if opts.api then return call_remote(opts, base) end
  return call_local(opts, base)
end

-- token ----------------------------------------------------------------------------

local function date(t)
  if type(t) ~= "number" then return "-" end
  return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t))
end

-- token{action = "create"|"list"|"revoke", name, scope, which, json} -> exit status
function M.token(opts)
  if opts.action == "create" then
    if not opts.scope or not opts.name then return usage("token create needs --scope read|operate|admin and --name NAME") end
    local token, info = auth.create { name = opts.name, scope = opts.scope }
    if not token then
      if info.code == "VALIDATION" then return usage(info.message) end
      return show_error(info)
    end
    say(token, "\n")
    warn("hypd: token ", info.name, " (scope ", info.scope, ", id ", info.id,
      ") created; it is shown only this once. Use it as Authorization: Bearer <token> or HYPD_TOKEN.\n")
    return 0
  elseif opts.action == "list" then
    local list = auth.list()
    if opts.json then
      local out = json.array()
      for i, t in ipairs(list) do out[i] = t end
      print_json { tokens = out }
      return 0
    end
    local wn = 4
    for _, t in ipairs(list) do wn = math.max(wn, #t.name) end
    local f = "%-8s  %-" .. wn .. "s  %-7s  %-20s  %-20s  %s\n"
    say(string.format(f, "ID", "NAME", "SCOPE", "CREATED", "LAST USED", "EXPIRES"))
    for _, t in ipairs(list) do
      say(string.format(f, t.id, t.name, t.scope, date(t.created_at), date(t.last_used_at),
        type(t.expires_at) == "number" and date(t.expires_at) or "never"))
    end
    return 0
  elseif opts.action == "revoke" then
    if not opts.which then return usage("token revoke needs a NAME or ID (see hypd token list)") end
    local info, err = auth.revoke(opts.which)
    if not info then return show_error(err) end
    warn("hypd: token ", info.name, " (id ", info.id, ") revoked\n")
    return 0
  end
  return usage("token needs create, list or revoke (see hypd token --help)")
end

-- mcp ------------------------------------------------------------------------------

-- mcp{api, toolsets} -> exit status: MCP over stdio (hypd.api.mcp_stdio.main);
-- toolsets "a,b" (hypd.tool.toolsets; default: the default set)
function M.mcp(opts)
  local sets, serr = require("hypd.tool.toolsets").parse(opts and opts.toolsets or "default")
  if not sets then return usage(serr.message) end
  if not (opts and opts.api) then -- in-process: mutating tools only with the state directory's lock
    local held, herr = statelock.acquire { command = "hypd mcp" }
    if not held and herr.code ~= "LOCKED" then return show_error(herr) end
    if not held then
      statelock.read_only("Read tools work in this hypd mcp; for the others run hypd mcp --api URL (token " ..
        "in HYPD_TOKEN).", herr.holder)
      warn("hypd: mcp serves read tools only: ", statelock.describe(herr.holder), " owns ", tostring(herr.dir),
        "; for mutating and destructive tools use hypd mcp --api ", herr.holder.url or "URL", "\n")
    end
  end
  local ok, mod = pcall(require, "hypd.api.mcp_stdio")
  if not ok or type(mod) ~= "table" or type(mod.main) ~= "function" then
    local why = not ok and tostring(type(mod) == "table" and mod.message or mod):match("^[^\n]*") or ""
    if why:find("not found", 1, true) then why = "" end
    warn("hypd: MCP over stdio is not available in this build (no hypd.api.mcp_stdio.main",
      why ~= "" and ": " .. why or "", ")\n")
    return 1
  end
  local rc = mod.main { api = opts and opts.api, toolsets = sets }
  return math.tointeger(rc) or 0
end

return M
