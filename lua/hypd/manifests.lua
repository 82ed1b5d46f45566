-- hypd.manifests: Kubernetes manifests kept as YAML in the Lua tree
-- (lua/manifests/<name>.yaml, compiled into hypd like the Lua files), read
-- by playbooks as objects to apply (server-side) with hypd.k8s. They are
-- written as `kubectl apply -f` takes them, so they can be read against the
-- Helm charts they render and tried by hand. A file
-- <playbook dir>/manifests/<name>.yaml replaces the built-in one, as a
-- playbook file replaces a built-in tool.
--
--   manifests.load(name [, vars]) -> array of objects: every document of the
--     file in order (empty ones skipped), after each ${key} in the text is
--     replaced by vars[key] (text, inserted as is: the YAML quotes it where
--     needed); a ${key} vars lacks is a VALIDATION error naming it
--   manifests.text(name) -> the YAML text, and where it came from
--     ("built-in" or the file's path)
--   manifests.list() -> the names of the built-in manifests, sorted
local config = require "hypd.config"
local core = require "hypd.core"
local errors = require "hypd.errors"
local yaml = require "hypd.yaml"

local M = {}

local NAME = "^[a-z0-9][a-z0-9-]*$"
local PREFIX, SUFFIX = "manifests.", ".yaml"

local function check_name(name)
  if type(name) ~= "string" or not name:match(NAME) then
    errors.raise("VALIDATION", "manifest name '" .. tostring(name) .. "': lowercase letters, digits and '-'",
      { field = "name" })
  end
end

function M.list()
  local out = {}
  for _, m in ipairs(core.embedded_list(PREFIX)) do
    if m:sub(-#SUFFIX) == SUFFIX then out[#out + 1] = m:sub(#PREFIX + 1, -#SUFFIX - 1) end
  end
  table.sort(out)
  return out
end

function M.text(name)
  check_name(name)
  local dir = config.playbooks_dir
  if dir then
    local path = dir .. "/manifests/" .. name .. SUFFIX
    local f = io.open(path, "rb")
    if f then
      local text = f:read("a")
      f:close()
      return text, path
    end
  end
  local src = core.embedded(PREFIX .. name .. SUFFIX)
  if not src then
    errors.raise("NOT_FOUND", "no manifest named '" .. name .. "' (built in: " .. table.concat(M.list(), ", ") .. ")")
  end
  return src, "built-in"
end

function M.load(name, vars)
  local text, from = M.text(name)
  local missing
  text = text:gsub("%${([%w_]+)}", function(k)
    local v = (vars or {})[k]
    if v == nil then missing = missing or k return "" end
    return tostring(v)
  end)
  if missing then
    errors.raise("VALIDATION", "manifest " .. name .. " needs the value ${" .. missing .. "}", { field = missing })
  end
  local docs, err = yaml.decode_all(text)
  if not docs then
    errors.raise("VALIDATION", "manifest " .. name .. " (" .. from .. ") is not valid YAML: " .. tostring(err))
  end
  local out = {}
  for _, d in ipairs(docs) do
    if type(d) == "table" and next(d) ~= nil then out[#out + 1] = d end
  end
  return out
end

return M
