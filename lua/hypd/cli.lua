-- hypd.cli: the command line. host/main.c hands argv (the words after
-- `hypd`) to this module twice:
--
--   plan(argv)  in a bare Lua state, before any host exists: parses the
--               whole command line; answers --help, help, version and usage
--               errors itself and returns {exit = status}; otherwise returns
--               what hypd_open needs, {host = {state_dir, playbooks_dir,
--               log_level, region, profile}, signals = bool}
--   main(argv)  in the host main.c opened with those options: parses again
--               (the same words, the same result) and runs the command;
--               returns its exit status
--
-- Exit statuses: 0 ok, 1 failure (the error on stderr), 2 usage error (one
-- line on stderr). The commands are the entries of hypd.cli.commands; the
-- global options below go before or after the command. A command that runs
-- without a host (host = false) gets them as run's second argument.
local commands = require "hypd.cli.commands"
local errors = require "hypd.errors"

local M = {}

-- global option -> the hypd_open field it sets
M.GLOBAL = {
  state = { "DIR", "state_dir" },
  playbooks = { "DIR", "playbooks_dir" },
  ["log-level"] = { "LEVEL", "log_level" },
  region = { "REGION", "region" },
  profile = { "PROFILE", "profile" },
}

-- check(o) returns this to have the command's usage printed on stderr (exit 2)
M.USAGE = commands.USAGE

local by_name = {}
for _, c in ipairs(commands) do
  assert(type(c.name) == "string" and type(c.usage) == "string" and type(c.run) == "function",
    "hypd.cli.commands: an entry needs name, usage and run")
  assert(not by_name[c.name], "hypd.cli.commands: two commands named " .. c.name)
  for name in pairs(c.options or {}) do
    assert(not M.GLOBAL[name], "hypd.cli.commands: " .. c.name .. " redefines the global option --" .. name)
  end
  by_name[c.name] = c
end

-- command(name) -> its entry, or nil
function M.command(name) return by_name[name] end

local function key(name) return (name:gsub("%-", "_")) end

-- option(word) -> name, inline value (--name=value) | nil
local function option(word)
  local name, value = word:match("^%-%-([%w][%w%-]*)=(.*)$")
  if name then return name, value end
  return word:match("^%-%-([%w][%w%-]*)$")
end

-- value(argv, i, name, inline) -> the option's value, the next index | nil, message
local function value(argv, i, name, inline)
  if inline then return inline, i + 1 end
  local v = argv[i + 1]
  if v == nil or v:sub(1, 2) == "--" then return nil, "--" .. name .. " needs a value" end
  return v, i + 2
end

-- parse(argv) -> one of
--   {command = entry, opts = o, host = {state_dir, ...}}  o: the command's
--     options by name ("--virtual-clock" is o.virtual_clock; flags are true)
--     and its positional words in o[1], o[2], ...
--   {help = text}    (stdout, exit 0)
--   {error = line}   (stderr as "hypd: line", exit 2)
--   {usage = text}   (stderr, exit 2)
-- Nothing is printed; pure, so tests call it directly.
function M.parse(argv)
  local host, i = {}, 1
  while argv[i] and argv[i]:sub(1, 1) == "-" do
    local w = argv[i]
    if w == "--help" or w == "-h" then return { help = commands.usage() } end
    if w == "--version" then return { command = by_name.version, opts = {}, host = host } end
    local name, inline = option(w)
    local g = name and M.GLOBAL[name]
    if not g then return { error = "unknown option '" .. w .. "' (see hypd --help)" } end
    local v, nexti = value(argv, i, name, inline)
    if not v then return { error = nexti } end
    host[g[2]], i = v, nexti
  end
  local cname = argv[i]
  if not cname then return { usage = commands.usage() } end
  local c = by_name[cname]
  if not c then return { error = "unknown command '" .. cname .. "' (see hypd help)" } end
  for j = i + 1, #argv do
    if argv[j] == "--help" or argv[j] == "-h" then return { help = c.usage } end
  end
  local o, spec = {}, c.options or {}
  local see = " for " .. cname .. " (see hypd " .. cname .. " --help)"
  i = i + 1
  while argv[i] do
    local w = argv[i]
    local name, inline = option(w)
    if name then
      local g, s = M.GLOBAL[name], spec[name]
      if not g and s == nil then return { error = "unknown option '" .. w .. "'" .. see } end
      if s == true then
        if inline then return { error = "--" .. name .. " takes no value" } end
        o[key(name)], i = true, i + 1
      else
        local v, nexti = value(argv, i, name, inline)
        if not v then return { error = nexti } end
        if g then host[g[2]] = v else o[key(name)] = v end
        i = nexti
      end
    elseif w:sub(1, 2) == "--" then
      return { error = "unknown option '" .. w .. "'" .. see }
    elseif c.args then
      o[#o + 1], i = w, i + 1
    else
      return { error = "unexpected argument '" .. w .. "'" .. see }
    end
  end
  if c.check then
    local msg = c.check(o)
    if msg == M.USAGE then return { usage = c.usage } end
    if msg then return { error = msg } end
  end
  if c.quiet and not host.log_level and (os.getenv("HYPD_LOG_LEVEL") or "") == "" then
    host.log_level = "warn" -- a command's output is its result, not the log
  end
  return { command = c, opts = o, host = host }
end

local function say(fd, text) fd:write(text) fd:flush() end

-- answers what parse answered without a command; nil when there is one
local function answer(p)
  if p.help then say(io.stdout, p.help) return 0 end
  if p.usage then say(io.stderr, p.usage) return 2 end
  if p.error then say(io.stderr, "hypd: " .. p.error .. "\n") return 2 end
end

-- runs the command: its status, or 1 after printing what it raised (0 when
-- it was interrupted: serve, tools and the others stop that way)
local function run(c, o, host)
  local ok, rc = xpcall(c.run, function(e)
    if type(e) ~= "table" then e = { code = "INTERNAL", message = tostring(e) } end
    if e.traceback == nil then e.traceback = debug.traceback(nil, 2) end
    return e
  end, o, host)
  if ok then return math.tointeger(rc) or 0 end
  if rc.code == "CANCELLED" then return 0 end
  local e = errors.public(rc)
  io.stderr:write("hypd: ", tostring(e.code or "ERROR"), ": ", tostring(e.message or ""), "\n")
  if c.traceback then io.stderr:write(tostring(rc.traceback), "\n") end
  io.stderr:flush()
  return 1
end

-- plan(argv) -> {exit = status} | {host = options for hypd_open, signals}
function M.plan(argv)
  local p = M.parse(argv)
  local rc = answer(p)
  if rc then return { exit = rc } end
  if p.command.host == false then return { exit = run(p.command, p.opts, p.host) } end
  return { host = p.host, signals = p.command.signals == true }
end

-- main(argv) -> exit status: runs the command in the open host
function M.main(argv)
  local p = M.parse(argv)
  return answer(p) or run(p.command, p.opts)
end

return M
