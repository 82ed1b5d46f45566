-- hypd.tools: finds the tools. Every built-in tool is a playbook, one file
-- lua/workflows/<area>/<tool>.lua compiled into hypd that returns
-- tool{...}; files whose name starts with "_" are helper modules beside
-- them (require "cluster._network"). The operator's playbook directory is
-- read the same way (its top level and one level of area folders): a file
-- that declares a tool with a built-in's name replaces it, marked
-- overridden wherever tools are shown. The older form
--   return { tool = {name, summary, description, kind, params}, main = fn }
-- keeps working.
--
--   tools.load() -> errors      once; errors = {{file, message}}, each logged
--   tools.reload() -> {errors, defined, restored, removed}: the playbook
--     directory again; a file that does not load is refused with its error
--     and its tools keep their previous version
--   tools.errors() -> the errors of the last load or reload
--   tools.list_sources() -> {{tool, source, module, hash, overrides}}
--   tools.source(name) -> text, origin: a tool's file (hypd playbook show)
--   tools.check(path) -> report: compiles a file, checks its definition
local config = require "hypd.config"
local core = require "hypd.core"
local errors = require "hypd.errors"
local guard = require "hypd.guard"
local log = require "hypd.log"
local playbook = require "hypd.playbook"
local sys = require "hypd.sys"
local tool = require "hypd.tool"

local M = {}

M.FIELDS = { name = true, summary = true, description = true, kind = true, params = true, result = true }

local loaded = false
local load_errors = {}   -- {file, message} of the last (re)load
local builtin = {}       -- tool name -> its built-in definition
local from_file = {}     -- playbook file path -> names of the tools it defined
local sources = {}       -- tool name -> {text, origin}

-- a file's top level runs at every load and reload: it declares tools, it
-- does not act (hypd.guard.confine: no AWS call, no Kubernetes verb, no
-- tool call); one that tries fails to load with the guardrail's error
M.LOADING = "the top level of %s (it runs at every load: it may declare, not act)"
local LOADING = M.LOADING

local function hash(src) return "sha256:" .. sys.digest("sha256", src, "hex") end

-- playbook_def(pname, mod) -> the definition of the older {tool, main} form
function M.playbook_def(pname, mod)
  local spec = mod.tool
  for k in pairs(spec) do
    if not M.FIELDS[k] then error(string.format("playbook %s: tool.%s is not a tool field", pname, tostring(k)), 0) end
  end
  if type(mod.main) ~= "function" then error("playbook " .. pname .. ": a tool needs main(params)", 0) end
  local def = { name = spec.name, summary = spec.summary, description = spec.description, kind = spec.kind,
    params = spec.params, result = spec.result }
  if spec.kind == "read" then
    def.run = function(_, params) return mod.main(params) end
  else
    -- a mutating playbook runs as a one-step operation, one at a time per tool and arguments
    def.status_tool = "operation_get"
    def.target = function(params) return "playbook/" .. pname .. "/" .. require("hypd.json").encode(params) end
    def.steps = { { name = "run", run = function(ctx)
      ctx:phase("running playbook " .. pname)
      ctx.state.result = mod.main(ctx.params)
    end } }
  end
  return def
end

-- define_playbook(pname, mod, origin) -> def: registers the older form
function M.define_playbook(pname, mod, origin) return tool.define(M.playbook_def(pname, mod), origin) end

-- define_value(v, module, origin) -> {names} | nil (v declares no tool)
local function define_value(v, module, origin)
  if playbook.is_tool(v) then return { tool.define(v, origin).name } end
  if type(v) == "table" and type(v.tool) == "table" then
    return { M.define_playbook(module:match("[^.]+$"), v, origin).name }
  end
end

local function failed(file, err)
  local msg = type(err) == "table" and tostring(err.message or err.code) or tostring(err)
  load_errors[#load_errors + 1] = { file = file, message = msg }
  log.error("tools", "%s: %s", file, msg)
end

-- built-ins: every lua/workflows/<area>/<tool>.lua that is not a helper
local function load_builtins()
  for _, mod in ipairs(core.embedded_list("workflows.")) do
    local name = mod:sub(#"workflows." + 1)
    if not ("." .. name):find("%._") then
      local src, chunk = core.embedded(mod)
      local file = chunk:gsub("^@", "")
      local ok, err = pcall(function()
        local v = guard.confine(LOADING:format(file), playbook.load, name, { embedded = true })
        local names = define_value(v, name, { source = "built-in", module = name, hash = hash(src) })
        if not names then error("it does not return tool{...} (a helper module's name starts with _)", 0) end
        for _, n in ipairs(names) do
          builtin[n] = tool.get(n)
          sources[n] = { text = src, origin = file }
        end
      end)
      if not ok then failed(file, err) end
    end
  end
end

-- loose(path, st) -> a refusal message when other users may write it
local function loose(path, st)
  if st and st.mode & 18 ~= 0 then -- 022: group or others may write
    return string.format("%s is writable by other users (mode %04o): hypd does not load tools from it; fix it " ..
      "with: chmod go-w %s", path, st.mode, path)
  end
end

-- playbook_files(dir) -> {{path, module}} | nil, refusal
local function playbook_files(dir)
  local st = sys.stat(dir)
  if not st then return {} end
  local why = loose(dir, st)
  if why then return nil, why end
  local out = {}
  local function scan(sub, prefix)
    for _, f in ipairs(sys.listdir(sub) or {}) do
      local path = sub .. "/" .. f
      local fst = sys.stat(path)
      local base = f:match("^([%w_%-]+)%.lua$")
      if fst and fst.type == "file" and base and base:sub(1, 1) ~= "_" then
        out[#out + 1] = { path = path, module = prefix .. base, st = fst }
      elseif fst and fst.type == "dir" and prefix == "" and f:match("^[%w_%-]+$") and f:sub(1, 1) ~= "_" and
          f ~= "recipes" then -- recipes/ holds training recipes (hypd.recipes), not tools
        if loose(path, fst) then return nil, loose(path, fst) end
        scan(path, f .. ".")
      end
    end
  end
  scan(dir, "")
  return out
end

-- load_dir(dir, report): the playbook directory's tools over the built-ins
local function load_dir(dir, report)
  local files, refusal = playbook_files(dir)
  if not files then
    failed(dir, refusal)
    return
  end
  local seen = {}
  for _, f in ipairs(files) do
    seen[f.path] = true
    local ok, err = pcall(function()
      local why = loose(f.path, f.st)
      if why then error(why, 0) end
      local src = assert(io.open(f.path, "rb")):read("a")
      local v = guard.confine(LOADING:format(f.path), playbook.load, f.module)
      local names = define_value(v, f.module, { source = f.path, module = f.module, hash = hash(src) })
      for _, n in ipairs(names or {}) do
        sources[n] = { text = src, origin = f.path }
        report.defined[#report.defined + 1] = n
        if tool.get(n).overrides then log.info("tools", "%s overrides the built-in tool %s", f.path, n) end
      end
      from_file[f.path] = names
    end)
    if not ok then failed(f.path, err) end
  end
  -- a file that is gone: its tools go back to the built-in, or go
  for path, names in pairs(from_file) do
    if not seen[path] then
      for _, n in ipairs(names) do
        local def = tool.get(n)
        if def and def.source == path then
          if builtin[n] then
            local b = builtin[n]
            tool.define(b, { source = "built-in", module = b.module, hash = b.hash })
            sources[n] = { text = (core.embedded("workflows." .. b.module)), origin = "built-in" }
            report.restored[#report.restored + 1] = n
          else
            tool.remove(n)
            sources[n] = nil
            report.removed[#report.removed + 1] = n
          end
        end
      end
      from_file[path] = nil
    end
  end
end

local function new_report() return { defined = {}, restored = {}, removed = {} } end

function M.load()
  if loaded then return load_errors end
  loaded = true
  load_errors = {}
  load_builtins()
  if config.playbooks_dir then
    local report = new_report()
    load_dir(config.playbooks_dir, report)
    if #report.defined > 0 then
      log.info("tools", "%d tools from playbooks in %s", #report.defined, config.playbooks_dir)
    end
  end
  return load_errors
end

-- reload(who) -> report: who = {name, front} (the audit log names them)
function M.reload(who)
  M.load()
  load_errors = {}
  local report = new_report()
  if config.playbooks_dir then load_dir(config.playbooks_dir, report) end
  report.errors = load_errors
  require("hypd.store").event("audit", nil, { action = "playbooks.reload", caller = who and who.name,
    front = who and who.front, defined = report.defined, restored = report.restored, removed = report.removed,
    errors = #load_errors })
  log.info("tools", "playbooks reloaded from %s: %d defined, %d restored, %d removed, %d refused",
    tostring(config.playbooks_dir), #report.defined, #report.restored, #report.removed, #load_errors)
  return report
end

function M.errors() return load_errors end

function M.list_sources()
  local out = {}
  for _, def in ipairs(tool.list()) do
    out[#out + 1] = { tool = def.name, source = def.source or "built-in", module = def.module, hash = def.hash,
      overrides = def.overrides, file = sources[def.name] and sources[def.name].origin }
  end
  return out
end

function M.source(name)
  M.load()
  local s = sources[name]
  if not s then return errors.fail("NOT_FOUND", "no tool named '" .. errors.echo(name, 64) .. "' (hypd playbook list)") end
  return s.text, s.origin
end

return M
