-- crash_at(text): this host process kills itself with SIGKILL at the first
-- operation phase that contains text: a crash at a point the test chooses
-- (the phase is persisted, the mutation after it not yet made). Used by the
-- host processes of the crash tests:
--   dofile("tests/tools/crash_at.lua")(os.getenv("CRASH_PHASE"))
local op = require "hypd.op"

return function(crash)
  if not crash then return end
  op.subscribe(function(ev)
    if ev.kind == "operation.phase" and tostring(ev.phase):find(crash, 1, true) then
      local f = io.open("/proc/self/stat")
      local pid = f:read("n")
      f:close()
      io.stdout:write("# crash at ", ev.phase, "\n")
      io.stdout:flush()
      os.execute("kill -9 " .. pid)
    end
  end)
end
