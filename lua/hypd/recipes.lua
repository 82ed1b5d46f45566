-- hypd.recipes: training recipes. A recipe is a Lua file returning
--   { name, description, params = {<the tools' param specs>},
--     validate = function(p) end (optional: rules across fields),
--     render = function(p, ctx) -> array of Kubernetes objects }
-- kept in recipes/NAME.lua at the repository root (compiled into hypd like
-- the Lua tree). A file <playbook dir>/recipes/NAME.lua replaces the
-- built-in one, or adds a recipe, as a playbook file does a tool. A recipe
-- runs in a playbook's sandbox; `require "_common"` finds recipes/_common.lua
-- (the playbook directory's recipes/_common.lua first). A file that does not
-- compile, run or declare a proper recipe is refused with its error.
--
--   recipes.catalogue(sandbox) -> c: the recipes, each file read with
--     sandbox.read_file(path) and run in sandbox.env(name, require_fn)
--     (hypd.playbook is the sandbox; it passes itself to hypd.playbook_api,
--     which gives playbooks hypd.recipes = a catalogue)
--   c.names() -> every recipe's name, sorted
--   c.list() -> {{name, description, params, source}} sorted by name
--   c.get(name) -> the recipe (a NOT_FOUND naming the known ones)
--   c.validate(name, params) -> params (defaults filled) | raises VALIDATION with fields
--   c.render(name, params [, ctx]) -> validated params, objects
local config = require "hypd.config"
local core = require "hypd.core"
local errors = require "hypd.errors"
local tool = require "hypd.tool.registry"
local guard = require "hypd.tool.guard"
local sys = require "hypd.sys"

local M = {}

local NAME = "^[a-z0-9][a-z0-9-]*$"
local PREFIX = "recipes."
local KEYS = { name = true, description = true, params = true, validate = true, render = true }

-- loose(path): refused when other users may write it (as hypd.tool.loader refuses playbooks)
local function loose(path)
  local st = sys.stat(path)
  if st and st.mode & 18 ~= 0 then
    errors.raise("VALIDATION", string.format("recipe %s is refused: it is writable by other users (mode %04o); " ..
      "fix it with: chmod go-w %s", path, st.mode, path), { field = "recipe" })
  end
end

-- source(sandbox, mod) -> text, chunkname, origin for recipes/<mod>.lua | nil
local function source(sandbox, mod)
  local dir = config.playbooks_dir
  if dir then
    local path = dir .. "/recipes/" .. mod .. ".lua"
    local src = sandbox.read_file(path)
    if src then
      loose(dir .. "/recipes")
      loose(path)
      return src, "@" .. path, path
    end
  end
  local src, chunk = core.embedded(PREFIX .. mod)
  if src then return src, chunk, "built-in" end
end

local function refuse(origin, msg)
  errors.raise("VALIDATION", "recipe " .. origin .. " is refused: " .. msg, { field = "recipe" })
end

-- load_recipe(sandbox, name) -> the recipe table (checked), its origin
local function load_recipe(sandbox, name)
  local src, chunk, origin = source(sandbox, name)
  if not src then return nil end
  local loaded = {}
  local function req(mod)
    if type(mod) ~= "string" or not mod:match("^_[a-z0-9_]+$") then
      errors.raise("SANDBOX", "a recipe requires only recipe helpers (\"_name\"), not '" .. tostring(mod) .. "'")
    end
    if loaded[mod] ~= nil then return loaded[mod] end
    local hsrc, hchunk = source(sandbox, mod)
    if not hsrc then errors.raise("NOT_FOUND", "no recipe helper " .. mod) end
    local fn, err = load(hsrc, hchunk, "t", sandbox.env("recipe " .. mod, req))
    if not fn then error(err, 0) end
    loaded[mod] = false
    local v = fn()
    loaded[mod] = v == nil and true or v
    return loaded[mod]
  end
  local fn, err = load(src, chunk, "t", sandbox.env("recipe " .. name, req))
  if not fn then refuse(origin, "it does not compile: " .. err) end
  -- its top level declares the recipe, it does not act (hypd.tool.guard.confine)
  local ok, r = pcall(guard.confine, "the top level of recipe " .. name, fn)
  if not ok then refuse(origin, "it fails when loaded: " .. tostring(errors.is(r) and r.message or r)) end
  if type(r) ~= "table" then refuse(origin, "it must return a table {name, description, params, render}") end
  for k in pairs(r) do
    if not KEYS[k] then refuse(origin, "unknown key '" .. tostring(k) .. "' (a recipe has description, " ..
      "name, params, render, validate)") end
  end
  if r.name ~= name then refuse(origin, "its name is '" .. tostring(r.name) .. "', not its file's '" .. name .. "'") end
  if type(r.description) ~= "string" then refuse(origin, "description is required (a string)") end
  if type(r.render) ~= "function" then refuse(origin, "render is a function(params, ctx) -> objects") end
  if r.validate ~= nil and type(r.validate) ~= "function" then refuse(origin, "validate is a function(params)") end
  local okp, perr = pcall(tool.check_params, "recipe " .. name, r.params or {})
  if not okp then refuse(origin, tostring(perr)) end
  r.params = r.params or {}
  r.source = origin
  return r
end

-- names() -> every recipe's name: built in, and the playbook directory's
local function names()
  local seen, out = {}, {}
  local function add(n)
    if n:match(NAME) and not seen[n] then seen[n] = true; out[#out + 1] = n end
  end
  for _, m in ipairs(core.embedded_list(PREFIX)) do add(m:sub(#PREFIX + 1)) end
  local dir = config.playbooks_dir
  if dir then
    for _, f in ipairs(sys.listdir(dir .. "/recipes") or {}) do
      local base = f:match("^(.+)%.lua$")
      if base then add(base) end
    end
  end
  table.sort(out)
  return out
end
local function get(sandbox, name)
  if type(name) ~= "string" or not name:match(NAME) then
    errors.refuse("recipe", "pattern", "recipe: must be a recipe name (lowercase letters, digits and '-'); got '" ..
      errors.echo(tostring(name), 40) .. "'", { field_message = "recipe: lowercase letters, digits and '-'" })
  end
  local r = load_recipe(sandbox, name)
  if not r then
    local msg = "recipe: no recipe named '" .. name .. "' (recipes: " .. table.concat(names(), ", ") .. ")"
    errors.refuse("recipe", "unknown", msg)
  end
  return r
end

-- list() -> {{name, description, params (JSON Schema), source}}; a recipe
-- file that is refused is listed with its error instead
local function list(sandbox)
  local out = {}
  for _, n in ipairs(names()) do
    local ok, r = pcall(get, sandbox, n)
    if ok then
      out[#out + 1] = { name = n, description = r.description, source = r.source,
        params = tool.input_schema({ params = r.params }) }
    else
      out[#out + 1] = { name = n, error = tostring(errors.is(r) and r.message or r) }
    end
  end
  return out
end

local function validate(sandbox, name, params)
  local r = get(sandbox, name)
  local p, err = tool.validate({ name = "recipe " .. name, params = r.params, validate = r.validate }, params)
  if not p then error(err, 0) end
  return p, r
end

local function render(sandbox, name, params, ctx)
  local p, r = validate(sandbox, name, params)
  local ok, objs = pcall(r.render, p, ctx or {})
  if not ok then
    if errors.is(objs) then error(objs, 0) end
    errors.raise("INTERNAL", "recipe " .. name .. " (" .. r.source .. ") failed to render: " .. tostring(objs))
  end
  if type(objs) ~= "table" or #objs == 0 then
    errors.raise("INTERNAL", "recipe " .. name .. " rendered no objects (render returns an array of objects)")
  end
  for i, o in ipairs(objs) do
    if type(o) ~= "table" or type(o.apiVersion) ~= "string" or type(o.kind) ~= "string" or
        type(o.metadata) ~= "table" or type(o.metadata.name) ~= "string" then
      errors.raise("INTERNAL", "recipe " .. name .. ": object " .. i .. " lacks apiVersion, kind or metadata.name")
    end
  end
  return p, objs
end

function M.catalogue(sandbox)
  return {
    names = names,
    list = function() return list(sandbox) end,
    get = function(name) return get(sandbox, name) end,
    validate = function(name, params) return validate(sandbox, name, params) end,
    render = function(name, params, ctx) return render(sandbox, name, params, ctx) end,
  }
end

return M
