-- A host process for the managed-feature process tests
-- (tests/lua/features_process_test.lua): loads the tools, resumes the
-- operations a killed host left running (as every start does), then, with
-- PARAMS (JSON), calls hyperpod_update_advanced_features and waits. It
-- prints "# result {status, error, result, k8s}" (k8s: the Kubernetes
-- writes hypd's own audit log recorded in this run). With CRASH_PHASE=text
-- it kills itself with SIGKILL at the first phase that contains text.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local store = require "hypd.store"
local dispatch = require "hypd.tool.dispatch"
require("hypd.tool.loader").load()

dofile("tests/tools/crash_at.lua")(os.getenv("CRASH_PHASE"))

local function mark()
  local evs = store.events(0, 1000000) or {}
  return #evs > 0 and evs[#evs].seq or 0
end

local function writes(m)
  local out = json.array()
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "audit" and e.data.k8s and e.data.class ~= "read" and not e.data.refused then
      out[#out + 1] = e.data.k8s
    end
  end
  return out
end

t.test("the managed-features call runs to the end", function()
  local m = mark()
  local caller = { name = "features-test", scope = "admin", front = "cli" }
  local resumed = {}
  local top
  for _, rec in ipairs(op.list { status = "running" }) do
    resumed[#resumed + 1] = rec.id
    if rec.tool == "hyperpod_update_advanced_features" then top = rec.id end
  end
  op.resume()
  for _, id in ipairs(resumed) do op.wait(id) end
  local v
  if os.getenv("PARAMS") then
    local acc, err = dispatch.call("hyperpod_update_advanced_features", json.decode(os.getenv("PARAMS")), caller)
    if not acc then
      print("# result " .. json.encode { status = "refused", error = err })
      return t.ok(true)
    end
    v = op.wait(acc.operation_id)
  elseif top or #resumed > 0 then
    v = op.view(op.get(top or resumed[1]))
  end
  print("# result " .. json.encode { status = v and v.status, error = v and v.error, result = v and v.result,
    resumed = #resumed, k8s = writes(m) })
  t.ok(true)
end)
