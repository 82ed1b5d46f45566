-- /ws of hypd serve: a client authenticates with its first message,
-- subscribes to operations and receives the events of an operation as it
-- runs; a bad token is closed with 4401. The client is tests/tools/ws_client.py.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local json = require "hypd.json"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")

tool.define { name = "job_slow", summary = "A staged test tool", kind = "mutating",
  description = "Two steps with a pause between them, so a watcher sees phases as they happen.",
  status_tool = "operation_get", target = function() return "test/slow" end, params = {},
  steps = { { name = "first", run = function(ctx) ctx:phase("first half"); ctx:sleep(0.2) end },
            { name = "second", run = function(ctx) ctx:phase("second half"); ctx.state.result = { ok = true } end } } }

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local token = assert(auth.create { name = "ws-test", scope = "operate" })
local dir = H.tmpdir()

local function client(tok, name)
  local out = dir .. "/" .. name .. ".json"
  os.execute(string.format("WS_TOKEN=%s WS_READY=%s python3 tests/tools/ws_client.py %d hypd_events %s >%s.log 2>&1 &",
    H.quote(tok), H.quote(out .. ".ready"), srv.port, H.quote(out), H.quote(out)))
  return out
end

local function await_file(path)
  for _ = 1, 600 do
    local s = H.read(path)
    if s then return s end
    task.sleep(0.02)
  end
end

t.test("a subscribed client sees an operation's events as it runs", function()
  local out = client(token, "good")
  t.ok(await_file(out .. ".ready"), "the client subscribed")
  task.sleep(0.1)
  local acc = assert(dispatch.call("job_slow", {}, { name = "t", scope = "operate", front = "test" }))
  local r = json.decode(await_file(out))
  t.eq(r.status, 101)
  local m = r.messages
  t.eq({ m[1].type, m[1].user, m[1].scope }, { "ready", "ws-test", "operate" })
  local kinds, saw_error, saw_pong, phases = {}, false, false, {}
  for _, x in ipairs(m) do
    if x.type == "event" then
      kinds[#kinds + 1] = x.event.kind
      t.eq(x.event.operation_id, acc.operation_id)
      if x.event.kind == "operation.phase" then phases[#phases + 1] = x.event.phase end
    end
    saw_error = saw_error or (x.type == "error" and x.message:find("unknown topic nonsense", 1, true) ~= nil)
    saw_pong = saw_pong or x.type == "pong"
  end
  t.ok(saw_error, "an unknown topic is an error message")
  t.ok(saw_pong, "ping answered")
  t.eq(kinds[1], "operation.started")
  t.eq(kinds[#kinds], "operation.finished")
  t.eq(phases, { "first", "first half", "second", "second half" })
end)

t.test("a wrong token gets an error and close code 4401", function()
  local out = client("hypd_wrong", "bad")
  local r = json.decode(await_file(out))
  t.eq(r.messages[1].type, "error")
  t.eq(r.messages[2].close[1], 4401)
end)

t.cleanup(function()
  srv:stop()
  os.execute("rm -rf " .. H.quote(dir))
end)
