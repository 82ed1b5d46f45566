-- hypd.api.mcp_stdio: MCP over stdio (`hypd mcp [--api URL]`; use it
-- through mcp_stdio.main). Newline-delimited JSON-RPC: one message
-- per line on stdin, one per line on stdout, nothing else on stdout (the
-- log goes to stderr).
--
--   main{api = URL|nil, token = T, toolsets = {set = true}|nil, read = fn, write = fn} -> 0
--
-- toolsets: the tools listed and callable (hypd.tool.toolsets; nil: every
-- tool; `hypd mcp` gives the default set unless --toolsets names others).
--
-- Without api the registry runs in this process, as caller {name = "stdio",
-- scope = "admin", front = "mcp-stdio"} (whoever can start the process owns
-- its state directory). With api every tool, operation and resource is the
-- hypd server's at URL, through its REST API with Authorization: Bearer
-- $HYPD_TOKEN (or opts.token; hypd.api.mcp_remote); the prompts are the
-- local skills.
--
-- Standard input is read on a worker (sys.stdin_line), so tool calls that
-- wait on AWS or HTTP keep running; each request runs as its own task and
-- answers when done, in any order. notifications/cancelled stops the
-- request it names, which then gets no answer. At the end of input the
-- requests still running finish; operations started in this process then
-- run to their end (SIGTERM or Ctrl-C leaves them as persisted: the next
-- `hypd serve` on the same state resumes them).
--
-- read() -> line | nil (end) | nil, err | false (a line too long, dropped);
-- write(text) -> bool. Both default to the process's stdin and stdout
-- (tests pass their own).
local core = require "hypd.core"
local errors = require "hypd.errors"
local json = require "hypd.json"
local log = require "hypd.log"
local mcp = require "hypd.api.mcp"
local op = require "hypd.tool.operations"
local sched = require "hypd._sched"
local sys = require "hypd.sys"
local task = require "hypd.task"
local loader = require "hypd.tool.loader"
local mcp_remote = require "hypd.api.mcp_remote"

local M = {}

M.CALLER = { name = "stdio", scope = "admin", front = "mcp-stdio" }

-- read_stdin() -> line | nil | nil, err | false
function M.read_stdin()
  while true do
    local id, err = sys.stdin_line()
    if not id then return nil, err end
    sched.open_job(id) -- a client may say nothing for long: the virtual clock runs on meanwhile
    local r = sched.await("job", id)
    if r.line then return r.line end
    if r.eof then return nil end
    if r.err then return nil, r.err end
    if r.too_long then return false end
  end
end

function M.write_stdout(text)
  local ok = io.stdout:write(text, "\n")
  if ok then ok = io.stdout:flush() end
  return ok ~= nil
end

local function load_tools()
  local ok, err = pcall(function() loader.load() end)
  if not ok then
    log.error("mcp", "the tools did not all load: %s", tostring(type(err) == "table" and err.message or err))
  end
end

local function key(id) return type(id) .. ":" .. tostring(id) end

-- serve(opts) -> 0: the loop, inside a task
local function serve(opts)
  local backend
  if opts.api then
    local token = opts.token or os.getenv("HYPD_TOKEN")
    if not token or token == "" then
      log.warn("mcp", "HYPD_TOKEN is not set: the server at %s will refuse every call", opts.api)
    end
    backend = mcp_remote.new(opts.api, token)
  else
    load_tools()
    backend = mcp.local_backend()
  end
  local write, read = opts.write or M.write_stdout, opts.read or M.read_stdin
  local closed = false
  local function send(msg)
    if closed then return false end
    local ok, text = pcall(json.encode, msg)
    if not ok then
      log.error("mcp", "a message cannot be encoded as JSON: %s", tostring(text))
      return false
    end
    if not write(text) then closed = true end
    return not closed
  end
  local session = mcp.session { caller = M.CALLER, backend = backend, send = send, toolsets = opts.toolsets }
  mcp.channels[session] = send
  mcp.hook_registry()
  local unwatch = mcp.watch(session, send, { log_lines = true })
  local running, cancelled, n = {}, {}, 0
  local idle = task.signal()

  local function request(msg)
    local k = key(msg.id)
    n = n + 1
    running[k] = task.spawn(function()
      local ok, reply = pcall(mcp.handle, session, msg)
      if not ok then
        reply = mcp.error_reply(msg.id, mcp.INTERNAL_ERROR, "Internal error: " ..
          tostring(errors.is(reply) and reply.code or reply))
      end
      running[k], n = nil, n - 1
      if reply and not cancelled[k] then send(reply) end
      cancelled[k] = nil
      if n == 0 then idle:fire() end
    end, { name = "mcp " .. tostring(msg.method), daemon = true })
  end

  while true do
    local line, err = read()
    if line == false then
      send(mcp.error_reply(nil, mcp.INVALID_REQUEST, "Invalid Request: the message is too large"))
    elseif line == nil then
      if err then log.error("mcp", "standard input: %s", tostring(err.message or err)) end
      break
    elseif line:find("%S") then
      local msg, jerr = json.decode(line)
      if msg == nil then
        send(mcp.error_reply(nil, mcp.PARSE_ERROR, "Parse error: " .. tostring(jerr and jerr.message)))
      elseif type(msg) == "table" and not json.is_array(msg) and msg.method ~= nil and msg.id ~= nil and
          mcp.valid_id(msg.id) then
        request(msg)
      elseif type(msg) == "table" and msg.method == "notifications/cancelled" then
        local p = type(msg.params) == "table" and msg.params or {}
        local k = p.requestId ~= nil and key(p.requestId)
        if k and running[k] then
          cancelled[k] = true
          running[k]:cancel("the client cancelled request " .. tostring(p.requestId))
        end
      else
        local reply = mcp.handle(session, msg)
        if reply then send(reply) end
      end
    end
  end
  while n > 0 do idle:wait(5) end
  unwatch()
  mcp.channels[session] = nil
  local left = 0
  for _ in pairs(op.active()) do left = left + 1 end
  if left > 0 and not opts.api then
    log.warn("mcp", "the client left; %d operation(s) started here run on to their end (SIGTERM or Ctrl-C " ..
      "stops hypd; the next hypd serve on this state resumes them)", left)
    while next(op.active()) do task.sleep(1) end
  end
  return 0
end

-- main(opts) -> 0. An entry point from C (it drives the engine, like hypd
-- serve, so an interrupt leaves operations as persisted), or a plain call
-- from inside a task.
function M.main(opts)
  opts = opts or {}
  if sched.current() then return serve(opts) end
  local t = sched.spawn(serve, { name = "hypd mcp" }, opts)
  sched.run(function() return t:finished() or core.interrupted() end)
  if not t:finished() then
    core.interrupted(true)
    return 0
  end
  if t.status ~= "done" then error(t.err, 0) end
  return t.result[1] or 0
end

return M
