-- sandbox.state: the simulated account's resources, persisted in the
-- store (SQLite) so the sandbox survives restarts. A record is a plain
-- JSON-able table; keys are "sandbox/<scope>/<service>/<kind>/<id>" where
-- scope is a region or "global" (IAM, S3 bucket names).
local json = require "hypd.json"
local store = require "hypd.store"

local M = {}

local function key(scope, service, kind, id)
  return table.concat({ "sandbox", scope, service, kind, id }, "/")
end

-- a view of one scope and service: view:get(kind, id), put, delete, list
local View = {}
View.__index = View

function M.view(scope, service)
  return setmetatable({ scope = scope, service = service }, View)
end

function View:get(kind, id)
  if type(id) ~= "string" or id == "" then return nil end
  return store.get(key(self.scope, self.service, kind, id))
end

function View:put(kind, id, record)
  assert(type(id) == "string" and id ~= "", "a record needs a string id")
  assert(store.put(key(self.scope, self.service, kind, id), record))
  return record
end

function View:delete(kind, id)
  return store.delete(key(self.scope, self.service, kind, id))
end

-- list(kind) -> array of records sorted by id
function View:list(kind)
  local prefix = key(self.scope, self.service, kind, "")
  local all = assert(store.list(prefix))
  local ids = {}
  for k in pairs(all) do ids[#ids + 1] = k end
  table.sort(ids)
  local out = json.array()
  for i, k in ipairs(ids) do out[i] = all[k] end
  return out
end

-- every record of every scope and service (for resuming scheduled work)
function M.all()
  return assert(store.list("sandbox/"))
end

return M
