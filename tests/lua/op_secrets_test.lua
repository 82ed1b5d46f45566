-- Secret parameters of an operation: never in its record, its events or the
-- log; kept in a 0600 file only while it runs, so an interrupted operation
-- resumes with them; gone when it ends; a lost secret fails the resume
-- clearly.
local t = require "hypd.tap"
local config = require "hypd.config"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local store = require "hypd.store"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")

local SECRET = "hf_abcdefghijklmnopqrstuvwxyz0123456789"
local gate = task.signal()
tool.define { name = "model_fetch_demo", summary = "A staged tool with a secret", kind = "mutating",
  description = "Waits for the test, then reports how long its token is: the token itself never shows.",
  status_tool = "operation_get", target = function(p) return "demo/" .. p.model end,
  params = { model = { type = "string", required = true }, token = { type = "string", required = true, secret = true } },
  steps = { { name = "wait", run = function(ctx) ctx:phase("waiting for the test"); gate:wait() end },
            { name = "use", run = function(ctx) ctx.state.result = { length = #ctx.params.token } end } } }

local WHO = { name = "t", scope = "operate", front = "test" }
local function file(id) return config.state_dir .. "/secrets/" .. id .. ".json" end

-- interrupt(id): what SIGTERM does to a running operation (no cancel request)
local function interrupt(id)
  local tk = op.active()[id]
  tk:cancel("host stopping")
  tk:wait()
end

t.test("the secret is kept in a 0600 file, and nowhere in the record, the events or the log", function()
  local acc = assert(dispatch.call("model_fetch_demo", { model = "m1", token = SECRET }, WHO))
  task.sleep(0.01)
  local rec = op.get(acc.operation_id)
  t.eq(rec.params.token, "[REDACTED]")
  t.eq(json.decode(H.read(file(acc.operation_id))).token, SECRET)
  local _, mode = H.sh("stat -c %a " .. H.quote(file(acc.operation_id)))
  t.eq(mode, "600\n")
  local _, dmode = H.sh("stat -c %a " .. H.quote(config.state_dir .. "/secrets"))
  t.eq(dmode, "700\n")
  t.eq(json.encode(store.events(0, 100000)):find(SECRET, 1, true), nil, "not in any event")
  t.eq(json.encode(rec):find(SECRET, 1, true), nil, "not in the record")
  t.eq(require("hypd.core").redact("token " .. SECRET), "token [REDACTED]", "the log redacts it")
end)

t.test("an interrupted operation resumes with its secret; the file goes when it ends", function()
  local id = op.list { tool = "model_fetch_demo", status = "running" }[1].id
  interrupt(id)
  t.eq(op.get(id).status, "running", "an interrupt is not a cancel")
  t.eq(op.resume(), 1)
  task.sleep(0.01)
  gate:fire()
  local v = op.wait(id, 5)
  t.eq(v.status, "succeeded")
  t.eq(v.result, { length = #SECRET })
  t.eq(H.read(file(id)), nil, "the secret file is gone")
end)

t.test("a resume whose secret file was removed fails with a clear record", function()
  local acc = assert(dispatch.call("model_fetch_demo", { model = "m2", token = SECRET }, WHO))
  task.sleep(0.01)
  interrupt(acc.operation_id)
  os.remove(file(acc.operation_id))
  t.eq(op.resume(), 0)
  local rec = op.get(acc.operation_id)
  t.eq(rec.status, "failed")
  t.like(rec.error.message, "secret parameter token is gone")
end)
