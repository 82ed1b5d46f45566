-- hypd.secrets: the secret parameters of running operations (tokens,
-- passwords). They never enter the store (operation records, events) or the
-- log; they are kept in <state>/secrets/<operation id>.json, readable only by
-- hypd's user (0600 in a 0700 directory), for as long as the operation runs,
-- so a restarted host can resume it, and removed when it ends.
--
-- While it runs its values are held in the log's redaction as operation
-- secrets (core.add_secret(v, "operation"): no number of secrets other
-- callers send pushes them out); drop releases them to the evictable
-- caller-given ones.
local config = require "hypd.config"
local core = require "hypd.core"
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

local held = {} -- operation id -> { values it holds in the redaction }

-- hold(id, values): once per operation in this process
local function hold(id, values)
  if held[id] then return end
  local list = {}
  for _, v in pairs(values) do
    if type(v) == "string" then
      core.add_secret(v, "operation")
      list[#list + 1] = v
    end
  end
  held[id] = list
end

local function path(id)
  assert(tostring(id):match("^op%-%x+$"), "an operation id")
  return (config.state_dir or ".") .. "/secrets/" .. id .. ".json"
end

-- put(id, values): values = {param = secret}; nothing to keep -> no file
function M.put(id, values)
  if next(values) == nil then return true end
  hold(id, values)
  return sys.write_private(path(id), json.encode(values))
end

-- get(id) -> values | nil
function M.get(id)
  local f = io.open(path(id), "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local values = json.decode(text, { bytes = true })
  if type(values) ~= "table" then return nil end
  hold(id, values)
  return values
end

function M.drop(id)
  for _, v in ipairs(held[id] or {}) do core.release_secret(v) end
  held[id] = nil
  return sys.remove(path(id))
end

return M
