-- hypd.task: coroutines on the engine.
--   task.sleep(seconds)        yields until the time passes (virtual or real)
--   task.now()                 seconds since the epoch (the engine's clock)
--   task.spawn(fn, opts, ...)  starts fn(...) as a task; opts: name, timeout,
--                              steady (the host's interrupt does not strike it
--                              or what it starts: the in-process sandbox)
--   t:wait()                   -> true, results... | false, err
--   t:cancel([reason])         stops t at its next wait (CANCELLED)
--   task.checkpoint()          lets other tasks run (for long loops)
--   task.forever()             yields until the task is cancelled (a
--                              server's main task)
--   task.signal()              a condition: sig:wait([timeout]) -> true when
--                              fired, false on timeout; sig:fire() wakes all
local core = require "hypd.core"
local sched = require "hypd._sched"

local M = {}

function M.sleep(seconds)
  if type(seconds) ~= "number" or seconds ~= seconds or seconds < 0 then
    error("task.sleep: seconds must be a non-negative number", 2)
  end
  sched.await("sleep", seconds)
end

function M.checkpoint() sched.await("yield") end

function M.forever() sched.await("forever") end

M.now = core.now
M.spawn = sched.spawn
M.current = sched.current
M.stats = sched.stats
M.signal = sched.signal

return M
