-- make bench: throughput and memory of the engine, JSON and the store.
-- Prints "# bench <name>: <value> <unit>" lines; asserts only correctness
-- (speed is never a pass/fail criterion on a shared machine).
local t = require "hypd.tap"
local core = require "hypd.core"
local task = require "hypd.task"
local http = require "hypd.http"
local json = require "hypd.json"
local store = require "hypd.store"
local H = dofile("tests/lua/helpers.lua")

local function report(name, value, unit)
  print(string.format("# bench %-40s %12.1f %s", name .. ":", value, unit))
end

t.test("HTTP requests from concurrent coroutines to a loopback server", function()
  local base, stop = H.echo_server()
  for _, conc in ipairs { 1, 50, 500 } do
    local total, per = 5000, 5000 // conc
    local start = core.mono()
    local tasks = {}
    for i = 1, conc do
      tasks[i] = task.spawn(function()
        for j = 1, per do
          local r = http.request { url = base .. "/echo/" .. j }
          if not r or r.status ~= 200 then return false end
        end
        return true
      end)
    end
    local good = 0
    for _, x in ipairs(tasks) do
      local _, okv = x:wait()
      if okv then good = good + 1 end
    end
    local secs = core.mono() - start
    t.eq(good, conc)
    report(string.format("http requests/s (%d coroutines)", conc), total / secs, "req/s")
  end
  stop()
end)

t.test("timers under the virtual clock", function()
  core.virtual(true)
  local n, start = 20000, core.mono()
  local tasks = {}
  for i = 1, n do tasks[i] = task.spawn(function() task.sleep(i % 600); task.sleep(60) end) end
  for _, x in ipairs(tasks) do x:wait() end
  local secs = core.mono() - start
  core.virtual(false)
  report("virtual-clock sleeps/s", 2 * n / secs, "sleeps/s")
  tasks = nil -- luacheck: ignore 311
  collectgarbage("collect")
  report("Lua heap after 20k tasks finished", collectgarbage("count") / 1024, "MiB")
end)

t.test("memory per idle task", function()
  collectgarbage("collect")
  local before = collectgarbage("count")
  local tasks = {}
  for i = 1, 10000 do tasks[i] = task.spawn(function() task.sleep(3600) end) end
  task.sleep(0)
  collectgarbage("collect")
  local per = (collectgarbage("count") - before) * 1024 / 10000
  for _, x in ipairs(tasks) do x:cancel() end
  for _, x in ipairs(tasks) do x:wait() end
  report("memory per sleeping task", per, "bytes")
end)

t.test("JSON encode and decode of a 1 MB document", function()
  local items = {}
  for i = 1, 4000 do
    items[i] = { name = "node-" .. i, labels = { zone = "use1-az" .. (i % 6), gpu = "h100" },
      capacity = { cpu = 192, memory = "2048Gi", ["nvidia.com/gpu"] = 8 }, ready = i % 7 ~= 0, score = i / 3 }
  end
  local doc = { items = items }
  local text = json.encode(doc)
  local rounds, start = 20, core.mono()
  for _ = 1, rounds do text = json.encode(doc) end
  local enc = core.mono() - start
  start = core.mono()
  local back
  for _ = 1, rounds do back = json.decode(text) end
  local dec = core.mono() - start
  t.eq(json.encode(back), text)
  report("json encode", #text * rounds / enc / 1e6, "MB/s")
  report("json decode", #text * rounds / dec / 1e6, "MB/s")
end)

t.test("durable store writes", function()
  local n, start = 300, core.mono()
  for i = 1, n do store.put("bench/" .. i, { i = i }) end
  local secs = core.mono() - start
  report("store kv puts (synchronous=FULL)", n / secs, "writes/s")
  start = core.mono()
  store.op_create { id = "bench-op", tool = "bench", status = "running" }
  for i = 1, n do store.op_update("bench-op", { phase = "phase " .. i }) end
  secs = core.mono() - start
  report("operation phase updates", n / secs, "writes/s")
  t.eq(store.op_get("bench-op").phase, "phase " .. n)
  for i = 1, n do store.delete("bench/" .. i) end
end)
