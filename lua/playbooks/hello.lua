-- hello: the playbook `make run` starts. It shows the engine at work:
-- the store (a run counter that survives restarts), the clock, a sleep on
-- the engine, and two concurrent tasks.
local function main(args)
  local who = args.name or "operator"
  local runs = (hypd.state.get("runs") or 0) + 1
  hypd.state.put("runs", runs)

  local started = hypd.now()
  local a = hypd.spawn(function() hypd.sleep(0.2); return "checked the store" end)
  local b = hypd.spawn(function() hypd.sleep(0.2); return "checked the clock" end)
  local _, first = a:wait()
  local _, second = b:wait()
  hypd.log.info("hello %s, run number %d", who, runs)
  return {
    greeting = "hello, " .. who,
    hypd_version = hypd.version,
    runs = runs,
    tasks = { first, second },
    -- both tasks slept 0.2 s at the same time
    elapsed_seconds = math.floor((hypd.now() - started) * 100 + 0.5) / 100,
  }
end

return { main = main }
