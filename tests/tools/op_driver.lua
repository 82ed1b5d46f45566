-- A host process for the crash tests (tests/lua/op_crash_test.lua): loads
-- the tools, resumes running operations, starts cluster_create_eks for
-- $TAG when none exists, and waits. With CRASH_PHASE=text it kills itself
-- with SIGKILL at the first phase that contains text: a crash at a point
-- the test chooses (the phase is persisted, its mutation not yet made).
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.op"
local tool = require "hypd.tool"
require("hypd.tools").load()

local phases = 0
op.subscribe(function(ev)
  if ev.kind == "operation.phase" then phases = phases + 1 end
end)
dofile("tests/tools/crash_at.lua")(os.getenv("CRASH_PHASE"))

t.test("cluster_create_eks runs to the end", function()
  op.resume()
  local caller = { name = "crash-test", scope = "operate", front = "cli" }
  local recs = op.list { tool = "cluster_create_eks", limit = 1 }
  local id = recs[1] and recs[1].id
  if not id or os.getenv("AGAIN") then
    id = assert(tool.call("cluster_create_eks", { cluster_tag = os.getenv("TAG") }, caller)).operation_id
  end
  local v = op.wait(id)
  print("# result " .. json.encode { status = v.status, phases = phases, id = id, error = v.error })
  t.ok(true)
end)
