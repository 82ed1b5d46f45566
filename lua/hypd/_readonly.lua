-- hypd._readonly: read-only views of the tables hypd hands every playbook
-- (the `hypd` table and its parts, a tool's definition and caller on ctx,
-- the method tables of the classes behind ctx and the other objects a
-- playbook holds). One Lua state runs every tool, so a table two tools
-- can reach is a way for one to change what the other is: a view reads
-- through to the table, refuses every assignment (SANDBOX, naming the
-- field) and hides its metatable; pairs, ipairs and # work as on the table.
--
--   view(t, name [, deep]) -> the view of t (one per table: a second call
--     gives the same view); deep: the tables inside are given as views
--     too. name says what it is in the refusal ("hypd.aws", "ctx.tool").
--   class(C) -> C, its __index a view of C: obj.__index, the usual way
--     from an object to its class, reaches only the view (the class table
--     itself stays the host's, which adds methods to it)
local errors = require "hypd.errors"

local M = {}

-- table -> its view, one cache for shallow views and one for deep ones
local views = { [false] = setmetatable({}, { __mode = "k" }), [true] = setmetatable({}, { __mode = "k" }) }

function M.view(t, name, deep)
  deep = deep and true or false
  local v = views[deep][t]
  if v then return v end
  local function wrap(k, x)
    if deep and type(x) == "table" then return M.view(x, name .. "." .. tostring(k), true) end
    return x
  end
  v = setmetatable({}, {
    __index = function(_, k) return wrap(k, t[k]) end,
    __newindex = function(_, k)
      errors.raise("SANDBOX", name .. "." .. tostring(k) .. " is read-only: hypd's tables are shared by every " ..
        "tool, so a playbook reads them and changes none")
    end,
    __pairs = function()
      return function(_, k)
        local nk, nv = next(t, k)
        if nk ~= nil then return nk, wrap(nk, nv) end
      end, v, nil
    end,
    __len = function() return #t end,
    __metatable = "locked",
  })
  views[deep][t] = v
  return v
end

function M.class(C)
  C.__index = M.view(C, "the methods of " .. tostring(C.__name or "a hypd object"))
  return C
end

return M
