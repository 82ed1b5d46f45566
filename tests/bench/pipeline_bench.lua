-- make bench: the whole pipeline (cluster_create) against the sandbox with
-- realistic service durations under the virtual clock, in a process of its
-- own (tests/tools/pipeline_bench_run.lua): total simulated time against
-- the critical path of the AWS operations, and the AWS calls of each stage.
-- Reported, never asserted.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")

t.test("the pipeline, measured in its own process", function()
  local rc, out = H.sh("HYPD_STATE=$(mktemp -d) " .. H.hypd .. " --log-level warn test tests/tools/pipeline_bench_run.lua")
  for line in out:gmatch("[^\n]+") do
    if line:match("^# bench ") then print(line) end
  end
  t.eq(rc, 0, out:sub(-1500))
end)
