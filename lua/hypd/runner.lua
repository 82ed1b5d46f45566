-- hypd.runner: where the C host enters Lua (through hx_pcall).
--   init()        once, when a host opens
--   call(req)     runs a tool or playbook to completion on the engine;
--                 req = {name, args, timeout}; returns the result or raises
local errors = require "hypd.errors"
local json = require "hypd.json"
local playbook = require "hypd.playbook"
local sched = require "hypd._sched"

local M = {}

function M.init()
  return true
end

-- Runs the loop until t has finished, then cancels and reaps every task it
-- started that is still running.
local function drain(t)
  sched.run(function() return t:finished() end)
  sched.cancel_tree(t)
  sched.run(function() return sched.settled(t) end)
end

function M.call(req)
  local args = req.args or json.object()
  if type(args) ~= "table" or json.is_array(args) then
    errors.raise("VALIDATION", "arguments must be a JSON object", { field = "args" })
  end
  local t = sched.spawn(function() return playbook.run(req.name, args) end,
    { name = req.name, timeout = req.timeout })
  drain(t)
  if t.status == "done" then
    local r = t.result[1]
    if r == nil then return json.null end
    return r
  end
  if t.status == "failed" then error(t.err, 0) end
  errors.raise("DEADLOCK", req.name .. " waits for something that can never happen")
end

-- invoke{module, fn, args, timeout}: runs a library function as a task
-- (for the CLI's own commands: eks-token, doctor). Not reachable from
-- playbooks or front ends.
function M.invoke(req)
  local t = sched.spawn(function()
    return require(req.module)[req.fn](req.args or {})
  end, { name = req.module .. "." .. req.fn, timeout = req.timeout })
  drain(t)
  if t.status == "done" then return t.result[1] end
  if t.status == "failed" then error(t.err, 0) end
  errors.raise("DEADLOCK", req.module .. "." .. req.fn .. " waits for something that can never happen")
end

return M
