-- hypd.tool.loader: finds the tools. Every built-in tool is a playbook, one file
-- lua/workflows/<area>/<tool>.lua compiled into hypd that returns
-- tool{...}; files whose name starts with "_" are helper modules beside
-- them (require "cluster._pipeline") or above them (require "_params").
-- The operator's playbook directory is read the same way (its top level
-- and one level of area folders): a file that declares a tool with a
-- built-in's name replaces it, and a helper there takes the place of the
-- built-in helper of its name in every tool that loads it. Each tool
-- records every module it loads (hypd.playbook.load: name, file, hash,
-- built-in or operator); its hash covers them all, and a tool any of whose
-- files takes the place of a built-in one is marked overridden by them
-- (overridden_by) wherever tools are shown.
--
--   tools.load() -> errors      once; errors = {{file, message}}, each logged
--   tools.reload() -> {errors, defined, restored, removed}: the playbook
--     directory again; a file that does not load is refused with its error
--     and its tools keep their previous version; a built-in tool whose
--     helpers the directory now adds, changes or removes is loaded again
--     (defined while one of them is the operator's, restored when none is)
--   tools.errors() -> the errors of the last load or reload
--   tools.list_sources() -> {{tool, source, module, hash, overrides, overridden_by, modules, file}}
--   tools.source(name) -> text, about: a tool's file, or a module tools
--     load (hypd playbook show)
--   tools.declared(v) -> v | nil: the tool a file's value declares
local config = require "hypd.config"
local core = require "hypd.core"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local log = require "hypd.log"
local playbook = require "hypd.playbook"
local tool = require "hypd.tool.registry"
local store = require "hypd.store"
local sys = require "hypd.sys"

local M = {}

local loaded = false
local load_errors = {}   -- {file, message} of the last (re)load
local builtin = {}       -- tool name -> {module, file, def}: its built-in file and latest built-in definition
local unloaded = {}      -- built-in tool file -> its module, while it does not load (a broken helper over one it loads)
local from_file = {}     -- playbook file path -> names of the tools it defined
local sources = {}       -- tool name -> {text, origin}

-- a file's top level runs at every load and reload: it declares tools, it
-- does not act (hypd.tool.guard.confine: no AWS call, no Kubernetes verb, no
-- tool call); one that tries fails to load with the guardrail's error
M.LOADING = "the top level of %s (it runs at every load: it may declare, not act)"
local LOADING = M.LOADING

-- tool_hash(modules) -> one content hash over every module a tool loads
local function tool_hash(modules)
  local lines = {}
  for i, m in ipairs(modules) do lines[i] = m.name .. " " .. m.hash .. "\n" end
  table.sort(lines)
  return playbook.hash(table.concat(lines))
end

-- declared(v) -> v when a file's value declares a tool (tool{...}), nil
-- when it declares none (a plain playbook for hypd run); raises for a
-- table with a tool field, which is no tool definition
function M.declared(v)
  if playbook.is_tool(v) then return v end
  if type(v) == "table" and rawget(v, "tool") ~= nil then
    error("it returns {tool = ..., main = ...}: a tool is declared with tool{...} (docs/playbooks.md)", 0)
  end
end

-- define_value(v, origin, modules) -> {names} | nil (v declares no tool)
local function define_value(v, origin, modules)
  if not M.declared(v) then return nil end
  origin.hash, origin.modules = tool_hash(modules), modules
  return { tool.define(v, origin).name }
end

local function failed(file, err)
  local msg = type(err) == "table" and tostring(err.message or err.code) or tostring(err)
  load_errors[#load_errors + 1] = { file = file, message = msg }
  log.error("tools", "%s: %s", file, msg)
end

-- load_builtin(module, file) -> names: a built-in tool's file, with the
-- helpers as they resolve now (the playbook directory's over the built-in)
local function load_builtin(module, file)
  local v, modules = guard.confine(LOADING:format(file), playbook.load, module, { embedded = true })
  local names = define_value(v, { source = "built-in", module = module }, modules)
  if not names then error("it does not return tool{...} (a helper module's name starts with _)", 0) end
  for _, n in ipairs(names) do builtin[n] = { module = module, file = file, def = tool.get(n) } end
  return names
end

-- built-ins: every lua/workflows/<area>/<tool>.lua that is not a helper
local function load_builtins()
  for _, mod in ipairs(core.embedded_list("workflows.")) do
    local name = mod:sub(#"workflows." + 1)
    if not ("." .. name):find("%._") then
      local src, chunk = core.embedded(mod)
      local file = chunk:gsub("^@", "")
      local ok, err = pcall(function()
        for _, n in ipairs(load_builtin(name, file)) do sources[n] = { text = src, origin = file } end
      end)
      if not ok then
        unloaded[file] = name
        failed(file, err)
      end
    end
  end
end

-- stale(def) -> true when a module the tool loaded resolves to another
-- file or text now (a helper added to, changed in or removed from the
-- playbook directory)
local function stale(def)
  for _, m in ipairs(def.modules) do
    local ok, src, chunk = pcall(playbook.source, m.name, m.name == def.module, true)
    if not ok or chunk:gsub("^@", "") ~= m.file or playbook.hash(src) ~= m.hash then return true end
  end
  return false
end

-- refresh_builtin(n, report): the built-in tool n again when a helper it
-- loads changed (defined while one is the operator's, restored when none
-- is), else as it was; one that does not load keeps its previous version
local function refresh_builtin(n, report)
  local b = builtin[n]
  if stale(b.def) then
    local ok, err = pcall(load_builtin, b.module, b.file)
    if ok then
      local list = tool.get(n).overridden_by and report.defined or report.restored
      list[#list + 1] = n
      return
    end
    failed(b.file, err)
  end
  if tool.get(n) ~= b.def then
    b.def = tool.define(b.def, { source = "built-in", module = b.module, hash = b.def.hash, modules = b.def.modules })
    report.restored[#report.restored + 1] = n
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
      local v, modules = guard.confine(LOADING:format(f.path), playbook.load, f.module)
      local names = define_value(v, { source = f.path, module = f.module }, modules)
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
            refresh_builtin(n, report)
            sources[n] = { text = (core.embedded("workflows." .. builtin[n].module)), origin = builtin[n].file }
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
  -- the built-in tools first (the directory's tools then go over them)
  for _, def in ipairs(tool.list()) do
    if builtin[def.name] and def.source == "built-in" and stale(def) then refresh_builtin(def.name, report) end
  end
  for file, module in pairs(unloaded) do
    local ok, names = pcall(load_builtin, module, file)
    if ok then
      unloaded[file] = nil
      for _, n in ipairs(names) do
        sources[n] = { text = (core.embedded("workflows." .. module)), origin = file }
        local list = tool.get(n).overridden_by and report.defined or report.restored
        list[#list + 1] = n
      end
    else
      failed(file, names)
    end
  end
  if config.playbooks_dir then load_dir(config.playbooks_dir, report) end
  report.errors = load_errors
  store.event("audit", nil, { action = "playbooks.reload", caller = who and who.name,
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
    out[#out + 1] = { tool = def.name, source = def.source, module = def.module, hash = def.hash,
      overrides = def.overrides, overridden_by = def.overridden_by, modules = def.modules,
      file = sources[def.name] and sources[def.name].origin }
  end
  return out
end

-- source(name) -> text, about | nil, err. A tool: its file's text, about =
-- {tool, file, source, hash, modules}; a module the tools load (a helper,
-- "cluster._pipeline"): its text, about = {module, file, source, hash,
-- loaded_by = {tool names}, changed = true when the file is no longer
-- the text the tools loaded}
function M.source(name)
  M.load()
  local s, def = sources[name], tool.get(name)
  if s and def then
    return s.text, { tool = name, file = s.origin, source = def.source, hash = def.hash, modules = def.modules,
      overridden_by = def.overridden_by }
  end
  local entry, by = nil, {}
  for _, d in ipairs(tool.list()) do
    for _, m in ipairs(d.modules) do
      if m.name == name then
        entry = entry or m
        by[#by + 1] = d.name
      end
    end
  end
  if not entry then
    return errors.fail("NOT_FOUND", "no tool or module a tool loads is named '" .. errors.echo(name, 64) ..
      "' (hypd playbook list)")
  end
  local text = playbook.source(name, entry.source == "built-in", true)
  return text, { module = name, file = entry.file, source = entry.source, hash = entry.hash, loaded_by = by,
    overrides = entry.overrides, changed = playbook.hash(text) ~= entry.hash or nil }
end

return M
