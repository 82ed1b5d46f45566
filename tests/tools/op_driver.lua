-- A host process for the crash tests (tests/lua/op_crash_test.lua,
-- pipeline_crash_test.lua): loads the tools, resumes running operations,
-- starts $TOOL (default cluster_create_eks) with the JSON object $ARGS
-- (default {"cluster_tag": $TAG}) when none of that tool exists, and waits
-- for it. With CRASH_PHASE=text it kills itself with SIGKILL at the first
-- phase that contains text: a crash at a point the test chooses (the phase
-- is persisted, its mutation not yet made). With PHASES=1 it prints every
-- phase of every operation ("# phase <text>").
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
require("hypd.tool.loader").load()

local TOOL = os.getenv("TOOL") or "cluster_create_eks"
local ARGS = os.getenv("ARGS") and json.decode(os.getenv("ARGS")) or { cluster_tag = os.getenv("TAG") }
local phases = 0
op.subscribe(function(ev)
  if ev.kind == "operation.phase" then
    phases = phases + 1
    if os.getenv("PHASES") then io.stdout:write("# phase ", tostring(ev.phase), "\n") end
  end
end)
dofile("tests/tools/crash_at.lua")(os.getenv("CRASH_PHASE"), tonumber(os.getenv("CRASH_FROM")),
  os.getenv("CRASH_LIST"))

t.test(TOOL .. " runs to the end", function()
  op.resume()
  local caller = { name = "crash-test", scope = "admin", front = "cli" }
  local recs = op.list { tool = TOOL, limit = 1 }
  local id = recs[1] and recs[1].id
  if not id or os.getenv("AGAIN") then
    local acc, err = dispatch.call(TOOL, ARGS, caller)
    assert(acc, json.encode(err))
    id = acc.operation_id
  end
  local v = op.wait(id)
  print("# result " .. json.encode { status = v.status, phases = phases, id = id, error = v.error })
  t.ok(true)
end)
