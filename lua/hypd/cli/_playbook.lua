-- hypd.cli._playbook: `hypd playbook list|show|check` and `hypd iam-policy`,
-- the commands that show operators the playbooks behind the tools.
--   list{json}        each tool's source: built-in or a file, whether it
--                     overrides a built-in one, how many files it loads and
--                     which of them take the place of built-in ones
--   show{name}        the source of a tool's file or of a module tools load
--                     (a helper: cluster._pipeline), to copy into the
--                     playbook directory and edit, with the files it loads
--                     or the tools that load it
--   check{file, json} compiles a playbook, checks its tool definition,
--                     reports the globals it uses that playbooks do not have
--                     and the AWS actions it declares (with their class)
--   iam_policy{tools, kind}  the IAM policy document the tools need
local aws = require "hypd.aws"
local json = require "hypd.json"
local playbook = require "hypd.playbook"
local tool = require "hypd.tool.registry"
local tools = require "hypd.tool.loader"

local M = {}

local out = require "hypd.cli._out"
local guard = require "hypd.tool.guard"
local lua_globals = require "hypd.lua_globals"
local iam_policy = require "hypd.iam_policy"
local say, warn, fail = out.say, out.warn, out.fail

function M.list(o)
  tools.load()
  local rows = tools.list_sources()
  if o.json then
    local list = json.array()
    for i, r in ipairs(rows) do list[i] = r end
    say(json.encode({ tools = list, errors = json.array(tools.errors()) }, { pretty = true }), "\n")
    return 0
  end
  local wn = 4
  for _, r in ipairs(rows) do wn = math.max(wn, #r.tool) end
  local f = "%-" .. wn .. "s  %-9s  %5s  %s\n"
  say(string.format(f, "TOOL", "OVERRIDES", "FILES", "SOURCE"))
  for _, r in ipairs(rows) do
    say(string.format(f, r.tool, r.overrides and "built-in" or "-", #r.modules,
      r.source == "built-in" and ("built-in " .. tostring(r.file)) or r.source))
    if r.overridden_by then say("  overridden by ", table.concat(r.overridden_by, ", "), "\n") end
  end
  for _, e in ipairs(tools.errors()) do warn("hypd: ", e.file, ": ", e.message, "\n") end
  return #tools.errors() == 0 and 0 or 1
end

-- files(modules): the files a tool loads, one a line: module, source, file, hash
local function files(modules)
  local wn = 6
  for _, m in ipairs(modules) do wn = math.max(wn, #m.name) end
  for _, m in ipairs(modules) do
    warn(string.format("  %-" .. wn .. "s  %-8s  %s  %s%s\n", m.name, m.source, m.file, m.hash,
      m.overrides and "  (overrides the built-in one)" or ""))
  end
end

-- show{name}: a tool's file or a module tools load on stdout; on stderr
-- where it is from, the files the tool loads or the tools that load the
-- module, and how to change it
function M.show(o)
  local text, about = tools.source(o.name)
  if not text then return fail(about) end
  say(text)
  local save = function(module)
    return "save this as <playbook dir>/" .. module:gsub("%.", "/") .. ".lua (hypd --playbooks DIR), edit it, " ..
      "and reload (SIGHUP or POST /api/v1/playbooks/reload)"
  end
  if about.tool then
    local def = tool.get(o.name)
    warn("hypd: ", o.name, " comes from ", about.file, " (", about.hash, "); it loads ", #about.modules,
      " file(s):\n")
    files(about.modules)
    if about.overridden_by then warn("hypd: overridden by ", table.concat(about.overridden_by, ", "), "\n") end
    warn("hypd: to change it, ", save(def.module or o.name), "\n")
  else
    warn("hypd: module ", o.name, " comes from ", about.file, " (", about.source, ", ", about.hash, ")",
      about.overrides and ", over the built-in one" or "", about.changed and
      "; the file changed since the tools loaded it (reload)" or "", "\n")
    warn("hypd: ", #about.loaded_by, " tool(s) load it: ", table.concat(about.loaded_by, ", "), "\n")
    warn("hypd: to change it, ", save(o.name), ": every tool that loads it is then marked overridden by it\n")
  end
  return 0
end

-- allowed() -> the set of globals a playbook has
local function allowed()
  local env = playbook.env("check", function() end)
  local set = {}
  for k in next, env do set[k] = true end
  return set
end

-- classes(action) -> "read" | "mutating" | "deleting" | "read 12, mutating 3" for a wildcard | "unknown"
-- IAM permissions that are no API operation (AWS checks them inside another call)
local PERMISSIONS = { ["iam:PassRole"] = true }

local function classes(action)
  if PERMISSIONS[action] then return "a permission, not an operation" end
  local service, op = action:match("^([%w-]+):(.+)$")
  local ok, model = pcall(aws.model, service)
  if not ok then return "unknown service" end
  if not op:find("[%*%?]") then
    return model.operations[op] and aws.class(service, op) or "unknown operation (counts as deleting)"
  end
  local n = { read = 0, mutating = 0, deleting = 0 }
  for name in pairs(model.operations) do
    if guard.matches({ action }, service .. ":" .. name) then
      local c = aws.class(service, name)
      n[c] = n[c] + 1
    end
  end
  local parts = {}
  for _, c in ipairs { "read", "mutating", "deleting" } do
    if n[c] > 0 then parts[#parts + 1] = c .. " " .. n[c] end
  end
  return #parts > 0 and table.concat(parts, ", ") or "matches no operation"
end

-- check_file(path) -> report {file, ok, tool, kind, aws, k8s, params, unknown_globals, errors}
function M.check_file(path)
  local r = { file = path, ok = true, errors = json.array(), unknown_globals = json.array(), aws = json.array() }
  local function bad(msg) r.ok = false; r.errors[#r.errors + 1] = msg end
  local f = io.open(path, "rb")
  if not f then bad("cannot read " .. path) return r end
  local text = f:read("a")
  f:close()
  local fn, cerr = load(text, "@" .. path, "t")
  if not fn then bad("does not compile: " .. tostring(cerr)) return r end
  local globals, gerr = lua_globals.unknown(text, allowed())
  if not globals then bad(gerr) else
    for _, g in ipairs(globals) do
      r.unknown_globals[#r.unknown_globals + 1] = { name = g.name, line = g.line, write = g.write }
      bad(string.format("line %d: %s the global '%s', which playbooks do not have%s", g.line,
        g.write and "assigns" or "reads", g.name, g.write and " (declare it local)" or ""))
    end
  end
  local ok, v = pcall(guard.confine, tools.LOADING:format(path), playbook.load, path)
  if not ok then bad("does not load: " .. tostring(type(v) == "table" and v.message or v)) return r end
  local okd, def = pcall(tools.declared, v)
  if not okd then bad(tostring(def)) return r end
  if not def then
    r.tool = json.null
    return r -- a plain playbook (hypd run), no tool
  end
  local okc, why = pcall(tool.check_def, def)
  if not okc then bad(tostring(type(why) == "table" and why.message or why)) end
  r.tool, r.kind, r.k8s = def.name, def.kind, def.k8s and json.array(def.k8s) or json.array()
  local ceiling = ({ read = { read = true }, mutating = { read = true, mutating = true } })[def.kind]
  for _, a in ipairs(def.aws or {}) do
    local c = classes(a)
    r.aws[#r.aws + 1] = { action = a, class = c }
    for cls in c:gmatch("%a+") do
      if ceiling and (cls == "read" or cls == "mutating" or cls == "deleting") and not ceiling[cls] then
        bad(string.format("a %s tool declares %s (%s): its guardrail refuses every %s call", def.kind, a, c, cls))
        break
      end
    end
  end
  r.params = json.array()
  for k in pairs(def.params or {}) do r.params[#r.params + 1] = k end
  table.sort(r.params)
  local prev = tool.get(def.name)
  r.overrides = prev and prev.source == "built-in" and "built-in" or nil
  local weaker = prev and tool.weaker(def, prev.source == "built-in" and prev or prev.overridden)
  if weaker then bad(weaker) end
  return r
end

function M.check(o)
  tools.load()
  local r = M.check_file(o.file)
  if o.json then
    say(json.encode(r, { pretty = true }), "\n")
  else
    say(r.file, ": ", r.ok and "ok" or "problems", "\n")
    if r.tool and r.tool ~= json.null then
      say("  tool      ", r.tool, " (", tostring(r.kind), ")", r.overrides and
        ", a built-in tool's name: in the playbook directory it replaces that tool" or "", "\n")
      for _, a in ipairs(r.aws) do say("  aws       ", a.action, "  (", a.class, ")\n") end
      if #r.k8s > 0 then say("  k8s       ", table.concat(r.k8s, ", "), "\n") end
      if r.params and #r.params > 0 then say("  params    ", table.concat(r.params, ", "), "\n") end
    elseif r.tool == json.null then
      say("  a playbook without a tool (hypd run ", r.file, ")\n")
    end
    for _, e in ipairs(r.errors) do say("  error     ", e, "\n") end
  end
  return r.ok and 0 or 1
end

function M.iam_policy(o)
  local names
  if o.tools then
    names = {}
    for n in tostring(o.tools):gmatch("[^,%s]+") do names[#names + 1] = n end
  end
  local arns
  if o.resources then
    arns = {}
    for a in tostring(o.resources):gmatch("[^,%s]+") do arns[#arns + 1] = a end
  end
  local doc, from = iam_policy.document { tools = names, kind = o.kind, resources = arns }
  if not doc then return fail(from) end
  say(json.encode(doc, { pretty = true }), "\n")
  warn("hypd: the policy of ", #from, " tool(s): ", table.concat(from, ", "), "\n")
  for _, u in ipairs(iam_policy.unscoped(doc)) do
    warn("hypd: Resource \"*\" for ", table.concat(u.actions, ", "), ": ", u.why, "\n")
  end
  return 0
end

return M
