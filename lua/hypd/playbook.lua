-- hypd.playbook: finds playbooks and runs them in a sandbox.
--
-- A playbook is a Lua text chunk that returns a table with a `main(args)`
-- function (or returns main itself). It is looked up by name in the
-- playbook directory (--playbooks DIR, HYPD_PLAYBOOKS), then among the
-- playbooks compiled into hypd (lua/playbooks/); a name ending in .lua is a
-- file path (hypd run FILE; require takes module names only). The
-- directory overrides and extends the built-in ones.
--
-- Each playbook gets a fresh _ENV: safe base functions, private copies of
-- string/table/math/utf8, a small os, and `hypd` (sleep, http, json, log,
-- errors, state). Reading or writing an unknown global raises SANDBOX; the
-- environment's metatable is locked; there is no io, os.execute, os.exit,
-- debug, package, loadlib, binary chunks or raw access to the host's
-- modules. pcall cannot swallow the engine's cancellation or deadline.
local config = require "hypd.config"
local core = require "hypd.core"
local errors = require "hypd.errors"
local json = require "hypd.json"
local log = require "hypd.log"
local lua_globals = require "hypd.lua_globals"
local registry = require "hypd.tool.registry"
local sched = require "hypd._sched"
local sys = require "hypd.sys"

local M = {}

local SAFE = {
  "assert", "error", "ipairs", "next", "pairs", "select", "tonumber",
  "tostring", "type", "rawequal", "rawlen", "rawget", "_VERSION",
}

-- metatables the host shares between all code: a playbook may not reach them
local HIDDEN = {
  [getmetatable("")] = true,
  [errors.mt] = true,
  [getmetatable(json.object())] = true,
  [getmetatable(json.array())] = true,
}

local playbook_api = require "hypd.playbook_api"
local copy = playbook_api.copy

local function where(level)
  local info = debug.getinfo(level + 1, "Sl")
  if info and info.currentline and info.currentline > 0 then
    return info.short_src .. ":" .. info.currentline .. ": "
  end
  return ""
end

-- which load set a metatable (setmetatable in a playbook): mt -> the load's
-- token. A playbook sees and changes only the metatables its own load set;
-- every other one (hypd's classes, another tool's) reads as "locked", so no
-- tool reaches a class it shares with others
local OWNER = setmetatable({}, { __mode = "k" })

local function safe_getmetatable(owner)
  return function(v)
    local mt = getmetatable(v)
    if type(mt) ~= "table" then return mt end -- nil, or a __metatable's text
    if HIDDEN[mt] or OWNER[mt] ~= owner then return "locked" end
    return mt
  end
end

local function safe_setmetatable(owner)
  return function(t, mt)
    local cur = getmetatable(t)
    -- (a protected one, whose __metatable is text, Lua refuses itself)
    if type(cur) == "table" and OWNER[cur] ~= owner then
      errors.raise("SANDBOX", where(2) .. "setmetatable: this table's metatable is hypd's (or another " ..
        "playbook's); a playbook changes only the metatables it set")
    end
    -- a finalizer would run the tool's code whenever the collector runs:
    -- in another tool's task (under its guard) or in none at all
    if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
      errors.raise("SANDBOX", where(2) .. "setmetatable: playbooks have no finalizers (__gc): they would run " ..
        "outside the tool, under another tool's guardrail or none")
    end
    local r = setmetatable(t, mt)
    if type(mt) == "table" and OWNER[mt] == nil then OWNER[mt] = owner end
    return r
  end
end

-- pcall/xpcall that let cancellation and deadlines through
-- (and the refusals of hypd.playbook_api's inert guard, marked final)
local function is_abort(e) return type(e) == "table" and (e.abort == true or e.final == true) end

local function rethrow(ok, ...)
  if not ok and is_abort((...)) then error((...), 0) end
  return ok, ...
end

local function safe_pcall(f, ...) return rethrow(pcall(f, ...)) end

local function safe_xpcall(f, handler, ...)
  return rethrow(xpcall(f, function(e)
    if is_abort(e) then return e end
    return handler(e)
  end, ...))
end

-- coroutines inside a playbook pass engine requests up to the task, and
-- the engine's preemption of them (core.preemptible) as a checkpoint; the
-- engine's cancellation and CPU errors go through, as through pcall
local function pass(co, ok, ...)
  if coroutine.status(co) == "suspended" then
    if ok and (...) == sched.REQUEST then
      return pass(co, coroutine.resume(co, coroutine.yield(...)))
    end
    if ok and select("#", ...) == 0 and core.preempted() then
      if coroutine.isyieldable() then coroutine.yield(sched.REQUEST, "yield") end
      return pass(co, coroutine.resume(co))
    end
  end
  if not ok and is_abort((...)) then error((...), 0) end
  return ok, ...
end

local sandbox_coroutine = {
  status = coroutine.status, running = coroutine.running,
  isyieldable = coroutine.isyieldable, yield = coroutine.yield, close = coroutine.close,
}
function sandbox_coroutine.create(f)
  local co = coroutine.create(f)
  core.preemptible(co)
  return co
end
function sandbox_coroutine.resume(co, ...) return pass(co, coroutine.resume(co, ...)) end
function sandbox_coroutine.wrap(f)
  local co = sandbox_coroutine.create(f)
  return function(...)
    local r = table.pack(sandbox_coroutine.resume(co, ...))
    if not r[1] then error(r[2], 0) end
    return table.unpack(r, 2, r.n)
  end
end

local NAME = "^[%w_%-]+[%w_%-%.]*$"

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local src = f:read("a")
  f:close()
  return src
end
M.read_file = read_file -- read_file(path) -> its text | nil (hypd.recipes reads its files so)

-- M.source(name [, embedded [, module]]) -> source, chunkname, playbook
-- name, origin ("operator": a file of the playbook directory or a path;
-- "built-in": compiled into hypd); with embedded, only what is compiled
-- into hypd (a built-in tool's own file); with module, name is a module
-- name (require's): never a path, so a playbook loads only from the Lua
-- tree and the playbook directory
function M.source(name, embedded, module)
  if type(name) ~= "string" or name == "" then
    errors.raise("VALIDATION", "playbook: a name or a .lua path is required", { field = "name" })
  end
  if module and (not name:match(NAME) or name:find("..", 1, true)) then
    errors.raise("SANDBOX", "require '" .. errors.echo(name, 80) .. "': a module name (letters, digits, '_', " ..
      "'-' and '.'), found in the Lua tree or the playbook directory; never a path")
  end
  if not module and name:sub(-4) == ".lua" then
    local src = read_file(name)
    if not src then errors.raise("NOT_FOUND", "playbook file " .. name .. " cannot be read") end
    return src, "@" .. name, (name:match("([^/]+)%.lua$")), "operator"
  end
  if not name:match(NAME) or name:find("..", 1, true) then
    errors.raise("VALIDATION", "playbook name '" .. name ..
      "' may hold only letters, digits, '_', '-' and '.'", { field = "name" })
  end
  local dir = not embedded and config.playbooks_dir
  if dir then
    local path = dir .. "/" .. name:gsub("%.", "/") .. ".lua"
    local src = read_file(path)
    if src then return src, "@" .. path, name, "operator" end
  end
  local src, chunkname = core.embedded("playbooks." .. name)
  if src then return src, chunkname, name, "built-in" end
  src, chunkname = core.embedded("workflows." .. name)
  if src then return src, chunkname, name, "built-in" end
  local known = {}
  for _, m in ipairs(core.embedded_list("playbooks.")) do known[#known + 1] = m:sub(11) end
  errors.raise("NOT_FOUND", string.format("no playbook named '%s' (looked in %s; built in: %s)",
    name, dir or "no playbook directory", table.concat(known, ", ")))
end

-- a library table whose missing fields raise instead of reading as nil
local function strict(libname, t)
  return setmetatable(t, {
    __index = function(_, k)
      errors.raise("SANDBOX", where(2) .. libname .. "." .. tostring(k) .. " is not available to playbooks")
    end,
    __metatable = "locked",
  })
end

-- tool{...} in a playbook: a tool's definition. Unknown keys are refused
-- here, at the line that wrote them; the registry checks the rest when
-- the file is loaded (hypd.tool.loader).
local TOOL = setmetatable({}, { __mode = "k" })

function M.tool(def)
  if type(def) ~= "table" then errors.raise("VALIDATION", where(2) .. "tool{...} takes a table") end
  local keys = registry.DEF_KEYS
  for k in pairs(def) do
    if not keys[k] then
      local names = {}
      for key in pairs(keys) do names[#names + 1] = key end
      table.sort(names)
      errors.raise("VALIDATION", where(2) .. "tool{}: unknown key '" .. tostring(k) .. "' (a tool has " ..
        table.concat(names, ", ") .. ")")
    end
  end
  TOOL[def] = true
  return def
end

-- is_tool(v) -> true when v was made by tool{...}
function M.is_tool(v) return type(v) == "table" and TOOL[v] == true end

-- M.env(name, require_fn [, owner]) -> a fresh, locked environment. owner:
-- the token of the load it belongs to (the modules of one load see each
-- other's metatables; default: its own)
function M.env(name, require_fn, owner)
  owner = owner or {}
  local env = {}
  for _, k in ipairs(SAFE) do env[k] = _G[k] end
  for _, lib in ipairs { "string", "table", "math", "utf8" } do env[lib] = copy(_G[lib]) end
  env.string.dump = nil -- bytecode stays out of playbooks (the host drops it from string too: hypd.core)
  env.os = strict("os", { time = os.time, clock = os.clock, date = os.date, difftime = os.difftime })
  env.pcall, env.xpcall = safe_pcall, safe_xpcall
  env.getmetatable, env.setmetatable = safe_getmetatable(owner), safe_setmetatable(owner)
  env.coroutine = copy(sandbox_coroutine)
  env.require = require_fn
  env.hypd = playbook_api.build(name, M)
  env.tool = M.tool
  env.print = function(...)
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    log.info("playbook " .. name, table.concat(parts, "\t", 1, parts.n))
  end
  env.load = function(chunk, chunkname, mode, e)
    if mode ~= nil and mode ~= "t" then
      errors.raise("SANDBOX", where(2) .. "playbooks may load text chunks only (mode 't')")
    end
    return load(chunk, chunkname, "t", e or env)
  end
  env._G = env
  return setmetatable(env, {
    __index = function(_, k)
      errors.raise("SANDBOX", where(2) .. "undefined global '" .. tostring(k) .. "'")
    end,
    __newindex = function(_, k)
      errors.raise("SANDBOX", where(2) .. "assignment to undefined global '" .. tostring(k) ..
        "' (declare it local)")
    end,
    __metatable = "locked",
  })
end

-- M.hash(src) -> "sha256:<hex>", the content hash of a module's text
function M.hash(src) return "sha256:" .. sys.digest("sha256", src, "hex") end

-- resolve(modname, embedded, module) -> the module's text and where it is
-- from: {name, file, hash, source = "built-in" | "operator", overrides =
-- "built-in" when an operator's file takes the place of a module compiled
-- into hypd, src, chunkname, pname}
local function resolve(modname, embedded, module)
  local src, chunkname, pname, origin = M.source(modname, embedded, module)
  local shadows = origin == "operator" and
    (core.embedded("playbooks." .. modname) or core.embedded("workflows." .. modname)) ~= nil
  return { name = modname, file = (chunkname:gsub("^@", "")), hash = M.hash(src), source = origin,
    overrides = shadows and "built-in" or nil, src = src, chunkname = chunkname, pname = pname }
end

-- a module text's hash -> the names its require calls give (read once per text)
local REQUIRES = {}

-- M.load(name [, opts]) -> the playbook's module value, and the modules
-- of the load: {{name, file, hash, source, overrides}} (resolve), the top
-- one first. Modules it requires are playbooks too, loaded once per
-- top-level run. Every module a loaded one names in a require call
-- (require "x" at its top level or inside a function, run later or never)
-- is found when the load is (its text, not run), so the list is all the
-- load can run, and a require inside a function runs the text listed,
-- whatever the directory holds by then; a require whose name is computed
-- finds its module when it runs (the list does not have it).
-- opts.embedded: the top module is the one compiled into hypd even when
-- the playbook directory has a file of that name.
function M.load(name, opts)
  local loaded = {}
  local owner = {} -- this load's token (safe_getmetatable)
  local top = opts and opts.embedded and name
  local found, modules = {}, {} -- modname -> resolve()'s entry; the entries in the order found
  local function find(modname, required)
    local m = found[modname]
    if not m then
      m = resolve(modname, modname == top, required)
      found[modname] = m
      modules[#modules + 1] = m
    end
    return m
  end
  local load_module
  -- what the playbook's require does: a module name, never a path
  local function require_module(modname)
    if type(modname) ~= "string" then
      errors.raise("SANDBOX", where(2) .. "require takes a module name (a string)")
    end
    return load_module(modname, true)
  end
  -- A module is loaded once per top-level load, and that load's functions
  -- may require lazily from several tasks (the parts a stage runs side by
  -- side): a task that asks for a module another task is loading (its code
  -- preempted halfway, hypd._sched) waits for it; only a require cycle in
  -- one task sees false instead of recursing.
  local loading = {} -- modname -> { by = task, done = signal }
  function load_module(modname, required)
    local busy = loading[modname]
    while busy and busy.by ~= sched.current() do
      busy.done:wait()
      busy = loading[modname]
    end
    if loaded[modname] ~= nil then return loaded[modname] end
    local m = find(modname, required)
    local fn, err = load(m.src, m.chunkname, "t", M.env(m.pname, require_module, owner))
    if not fn then
      errors.raise("VALIDATION", "playbook " .. modname .. " does not compile: " .. err)
    end
    core.playbook_chunk(m.chunkname) -- its code may be preempted (hypd._sched)
    loaded[modname] = false
    local me = sched.current() and { by = sched.current(), done = sched.signal() }
    loading[modname] = me
    local ok, v = pcall(fn)
    loading[modname] = nil
    if me then me.done:fire() end
    if not ok then
      loaded[modname] = nil
      error(v, 0)
    end
    if v == nil then v = true end
    loaded[modname] = v
    return v
  end
  local v = load_module(name)
  -- the modules named in require calls that have not run yet: found now
  -- (one that does not resolve fails when its require runs, as it would)
  local i = 1
  while modules[i] do
    local m = modules[i]
    REQUIRES[m.hash] = REQUIRES[m.hash] or lua_globals.requires(m.src) or {}
    for _, r in ipairs(REQUIRES[m.hash]) do
      if not found[r] then pcall(find, r, true) end
    end
    i = i + 1
  end
  local list = {}
  for k, m in ipairs(modules) do
    list[k] = { name = m.name, file = m.file, hash = m.hash, source = m.source, overrides = m.overrides }
  end
  return v, list
end

-- M.run(name, args) -> the result of the playbook's main(args)
function M.run(name, args)
  local mod = M.load(name)
  local main = type(mod) == "function" and mod or type(mod) == "table" and mod.main
  if type(main) ~= "function" then
    errors.raise("VALIDATION", "playbook " .. name ..
      " must return a table with a main function, or main itself")
  end
  return main(args)
end

return M
