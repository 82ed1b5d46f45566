-- hypd.api.gateway: `hypd serve`, the one HTTP port of the front ends.
--
--   /api/v1/...  REST (hypd.api.rest)       /metrics  Prometheus (hypd.api.metrics)
--   /mcp         hypd.api.mcp_http.handle(req, caller)
--   /, files     the web UI (hypd.api.web: web/ compiled in, or --web DIR)
--   /ws          hypd.api.ws.handler(req) (it
--                authenticates itself: the Authorization header of the
--                upgrade, or a first message, since browsers cannot set
--                headers on a WebSocket)
--   anything else: 404 JSON
--
-- Every route but GET /api/v1/health needs a bearer token. On the first
-- start with no token, an admin token named "admin" is created and printed
-- once; a non-loopback address is refused until a token exists.
--
--   gateway.handle(req) -> response      the router (a hypd.http_server handler)
--   gateway.start{listen, sandbox, speed, out} -> {srv, url, sandbox, token} | nil, err
--   gateway.main{listen, sandbox, speed} the command: start, serve until
--                                        SIGTERM/SIGINT, stop gracefully
--
-- --sandbox starts the simulated AWS account in this process on
-- 127.0.0.1:0 and points the AWS layer at it the standard way: the
-- AWS_ENDPOINT_URL, AWS_REGION and key variables of the process.
local auth = require "hypd.api.auth"
local config = require "hypd.config"
local core = require "hypd.core"
local errors = require "hypd.errors"
local log = require "hypd.log"
local mcp_http = require "hypd.api.mcp_http"
local metrics = require "hypd.api.metrics"
local op = require "hypd.tool.operations"
local rest = require "hypd.api.rest"
local sched = require "hypd._sched"
local server = require "hypd.http_server"
local statelock = require "hypd.statelock"
local sys = require "hypd.sys"
local task = require "hypd.task"
local web = require "hypd.api.web"
local ws = require "hypd.api.ws"
local loader = require "hypd.tool.loader"
local registry = require "hypd.tool.registry"
local aws = require "hypd.aws"

local M = {}

M.DEFAULT_LISTEN = "127.0.0.1:3099"
M.GRACE = 10 -- seconds running operations get to reach their next phase at shutdown

-- /mcp needs a token like the REST API; its handler gets the caller
local function mcp(req)
  local caller, resp = rest.authenticate(req, "mcp")
  if not caller then return resp end
  return mcp_http.handle(req, caller)
end

local function under(path, prefix)
  return path == prefix or path:sub(1, #prefix + 1) == prefix .. "/"
end

local function route(req)
  local path = req.path
  if under(path, rest.BASE) then return rest.handle(req) end
  if path == "/metrics" then return metrics.handle(req), "/metrics" end
  if under(path, "/mcp") then return mcp(req), "/mcp" end
  -- /ws authenticates itself: browsers cannot set headers on a WebSocket
  if under(path, "/ws") then return ws.handler(req), "/ws" end
  local page = web.handle(req)
  if page then return page, "/web" end
  return rest.error_response(errors.new("NOT_FOUND", "no route " .. errors.echo(path, 80) .. " (the API is under " .. rest.BASE ..
    ")"), 404), "unmatched"
end

-- what every answer carries besides its own headers: nothing may frame or
-- sniff it; an answer that is not a page of the UI may load nothing
local ALWAYS = { ["x-content-type-options"] = "nosniff",
  ["content-security-policy"] = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'" }

function M.handle(req)
  local ok, resp, name = pcall(route, req)
  if not ok then
    local e = resp
    if not errors.is(e) then
      e = type(e) == "table" and e.code and setmetatable(e, errors.mt) or errors.new("INTERNAL", tostring(e))
    end
    log.error("serve", "%s %s failed: %s", req.method, req.path, tostring(e))
    resp, name = rest.error_response(e, 500), "error"
  end
  metrics.request(name or "unmatched", resp.status or 200)
  if resp.headers or resp.status then
    resp.headers = resp.headers or {}
    for k, v in pairs(ALWAYS) do
      if resp.headers[k] == nil then resp.headers[k] = v end
    end
  end
  return resp
end

-- the tools; a file that fails to load is logged loudly (hypd.tool.loader) and
-- listed in GET /api/v1/tools; the others still load
local function load_tools()
  local errs = loader.load()
  if #errs > 0 then
    log.error("serve", "%d playbook file(s) did not load; their tools are missing or keep their previous version",
      #errs)
  end
  for _, def in ipairs(registry.list()) do
    if def.overridden_by then
      log.warn("serve", "tool %s is overridden by %s", def.name, table.concat(def.overridden_by, ", "))
    end
  end
end

-- sandbox_env(sandbox, port) -> the variables that point the AWS layer at
-- the simulator (the module sandbox) on port, set in this process
local function sandbox_env(sandbox, port)
  local env = sandbox.env(port)
  -- nothing may take precedence over the sandbox's endpoint and keys
  sys.setenv("AWS_PROFILE")
  sys.setenv("AWS_SESSION_TOKEN")
  for svc in pairs(aws.SERVICES) do sys.setenv(aws.endpoint_env(svc)) end
  for k, v in pairs(env) do sys.setenv(k, v) end
  return env
end

function M.start(opts)
  opts = opts or {}
  local out = opts.out or io.stdout
  local listen = opts.listen or M.DEFAULT_LISTEN
  local addr = tostring(listen):match("^(%d+%.%d+%.%d+%.%d+):%d+$")
  if not addr then
    return errors.fail("VALIDATION", "--listen must be IPv4-ADDRESS:PORT, e.g. 127.0.0.1:3099; got '" ..
      tostring(listen) .. "'", { field = "listen" })
  end
  local held, lerr = statelock.acquire { command = "hypd serve --listen " .. listen .. (opts.sandbox and
    " --sandbox" or ""), hint = statelock.HINT_SERVE, wait = true }
  if not held then return nil, lerr end
  local loopback = addr:match("^127%.") ~= nil
  local had_tokens = auth.count() > 0
  if not loopback and not had_tokens then
    return errors.fail("VALIDATION", "refusing to listen on " .. listen .. " before a token exists: anyone " ..
      "reaching it would get the first admin token. Create one first, then start again:\n  hypd --state " ..
      config.state_dir .. " token create --scope admin --name admin", { field = "listen" })
  end
  local info = {}
  local sandbox, account
  if opts.sandbox then
    -- the simulator (lua/sandbox/) is loaded only for hypd serve --sandbox
    sandbox, account = require "sandbox", require("sandbox.auth").ACCOUNT
    local ssrv, err = sandbox.start { listen = "127.0.0.1:0", speed = opts.speed }
    if not ssrv then return nil, err end
    info.sandbox = ssrv
    local env = sandbox_env(sandbox, ssrv.port)
    info.sandbox_url = env.AWS_ENDPOINT_URL
  end
  if opts.web then
    local f = io.open(opts.web .. "/index.html", "rb")
    if not f then
      if info.sandbox then info.sandbox:stop() end
      return errors.fail("VALIDATION", "--web " .. opts.web .. ": no index.html there (give the web/ directory " ..
        "of a hypd source tree)", { field = "web" })
    end
    f:close()
    web.dir = opts.web
  end
  load_tools()
  metrics.install()
  local srv, err = server.start { listen = listen, handler = M.handle, max_body = 2 * rest.MAX_BODY,
    max_per_client = opts.max_per_client }
  if not srv then
    if info.sandbox then info.sandbox:stop() end
    return nil, err
  end
  info.srv = srv
  info.url = "http://" .. (addr == "0.0.0.0" and "127.0.0.1" or addr) .. ":" .. srv.port
  local label
  if opts.sandbox then
    -- a loopback demo: a fresh admin token at every start, printed
    auth.replace("sandbox")
    info.token = assert(auth.create { name = "sandbox", scope = "admin" })
    label = "sandbox token (new at every start, scope admin): "
  elseif not had_tokens then
    info.token = assert(auth.create { name = "admin", scope = "admin" })
    label = "admin token (shown once): "
  end
  statelock.advertise(info.url)
  local resumed = assert(op.resume())
  if resumed > 0 then log.info("serve", "resumed %d running operations", resumed) end
  info.login = info.url .. "/#login=" .. auth.login_code { scope = "admin" }
  out:write("hypd serve: listening on ", info.url, "\n",
    "  web UI  ", info.url, "/   (sign in with a token, or once with this link: ", info.login, ")\n",
    "  REST    ", info.url, rest.BASE, "  (OpenAPI: ", info.url, rest.BASE, "/openapi.json)\n",
    "  MCP     ", info.url, "/mcp\n",
    "  metrics ", info.url, "/metrics\n")
  if info.sandbox_url then
    local speed = tonumber(opts.speed) or 1
    out:write("  sandbox: a simulated AWS account (", account, ", ",
      os.getenv("AWS_REGION") or "?", ") at ", info.sandbox_url,
      speed ~= 1 and string.format(", speed %g: simulated AWS durations pass %g times faster", speed, speed) or "",
      "\n",
      "  to reach it from another shell (aws, boto3, hypd doctor, hypd kubeconfig, kubectl), paste:\n",
      sandbox.exports(info.sandbox.port, "    "))
    if info.token then out:write("    export HYPD_TOKEN=", info.token, "\n") end
    -- hypd token and hypd call in that shell then use this server's state
    -- (a token made there is one this server knows; a call finds the server)
    out:write("    export HYPD_STATE=", config.state_dir, "\n")
  end
  out:write("  tokens for this server: hypd --state ", config.state_dir, " token create --scope operate --name NAME\n")
  if info.token then out:write(label, info.token, "\n") end
  out:write("  SIGTERM or Ctrl-C stops it\n")
  out:flush()
  return info
end

-- stop(info, grace): stops accepting, then gives the operations running in
-- this process up to grace seconds to persist their next phase (they
-- resume from their last persisted phase at the next start in any case).
-- Runs on the engine loop (not in a task); a second interrupt ends it.
local function stop(info, grace)
  statelock.stopping(grace) -- a new hypd serve on this state waits for us
  op.halt() -- what an operation raises from now on is the stop's doing: it resumes, never fails
  info.srv:stop()
  local pending, n = {}, 0
  for id in pairs(op.active()) do pending[id], n = true, n + 1 end
  if n > 0 then
    log.info("serve", "stopping: %d operations get up to %g s to reach their next phase", n, grace)
    local unsubscribe = op.subscribe(function(ev)
      if ev.kind ~= "operation.progress" then pending[ev.operation_id] = nil end
    end)
    local timer = sched.spawn(task.sleep, { name = "serve grace", daemon = true }, grace)
    sched.run(function() return next(pending) == nil or timer:finished() or core.interrupted() end)
    unsubscribe()
    timer:cancel()
  end
  if info.sandbox then info.sandbox:stop() end
  log.info("serve", "stopped")
end

-- main{listen, sandbox, speed, grace} -> 0: the `hypd serve` command (an
-- entry point from C, not a task: it drives the engine itself so that a
-- shutdown leaves operations as they were persisted instead of cancelling
-- them)
function M.main(opts)
  opts = opts or {}
  local t = sched.spawn(function()
    local info, err = M.start(opts)
    if not info then error(err, 0) end
    return info
  end, { name = "hypd serve" })
  sched.run(function() return t:finished() or core.interrupted() end)
  if not t:finished() then return 0 end
  if t.status ~= "done" then error(t.err, 0) end
  local info = t.result[1]
  -- SIGHUP re-reads the playbook directory, as POST /api/v1/playbooks/reload does
  local seen = core.hangups()
  local stopping = false
  while true do
    sched.run(function()
      stopping = stopping or core.interrupted()
      return stopping or core.hangups() ~= seen
    end)
    if stopping then break end
    seen = core.hangups()
    local r = sched.spawn(loader.reload, { name = "playbooks reload" },
      { name = "SIGHUP", front = "signal" })
    sched.run(function() return r:finished() or core.interrupted() end)
  end
  core.interrupted(true)
  stop(info, tonumber(opts.grace) or M.GRACE)
  core.interrupted(true)
  return 0
end

return M
