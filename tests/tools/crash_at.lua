-- crash_at(text [, from, list]): this host process kills itself with
-- SIGKILL at the first operation phase that contains text or, with from
-- and list (a file of phases, one per line, in the order an uninterrupted
-- run recorded them), at the first phase it records that comes at or after
-- line `from` of that run: a crash at a point the test chooses (the phase
-- is persisted, the mutation after it not yet made), past the phases a
-- resumed step records again. Resource ids in phases (nat-0abc..., i-...)
-- are compared as <id>, since each sandbox makes its own. Used by the host
-- processes of the crash tests:
--   dofile("tests/tools/crash_at.lua")(os.getenv("CRASH_PHASE"), tonumber(os.getenv("CRASH_FROM")),
--     os.getenv("CRASH_LIST"))
local op = require "hypd.tool.operations"

local function norm(s) return (tostring(s):gsub("%f[%w]%a+%-%x%x%x%x%x%x%x%x+", "<id>")) end

return function(crash, from, list)
  if not crash and not from then return end
  local pos = {}
  if from then
    local i = 0
    for line in io.lines(list) do
      i = i + 1
      local k = norm(line)
      pos[k] = pos[k] or i
    end
  end
  op.subscribe(function(ev)
    if ev.kind ~= "operation.phase" then return end
    local hit
    if crash then hit = tostring(ev.phase):find(crash, 1, true) ~= nil
    else hit = (pos[norm(ev.phase)] or 0) >= from end
    if hit then
      local f = io.open("/proc/self/stat")
      local pid = f:read("n")
      f:close()
      io.stdout:write("# crash at ", ev.phase, "\n")
      io.stdout:flush()
      os.execute("kill -9 " .. pid)
    end
  end)
end
