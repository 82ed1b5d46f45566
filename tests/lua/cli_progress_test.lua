-- hypd.cli_progress, what `hypd call --wait` draws, between events: on a
-- terminal the status line is redrawn by every tick with its clock (it
-- does not stay at "0:00 step" while a child works), in a pipe a "still
-- ..." line once QUIET seconds of wall time passed without a line, with
-- the last note, and not more often.
local t = require "hypd.tap"
local core = require "hypd.core"
local progress = require "hypd.cli_progress"
local task = require "hypd.task"

-- a writer that keeps what was written
local function sink()
  local s = { parts = {} }
  function s:write(...) for _, x in ipairs { ... } do self.parts[#self.parts + 1] = tostring(x) end return self end
  function s.flush() end
  function s:text() return table.concat(self.parts) end
  return s
end

t.test("on a terminal every tick redraws the line with the step's clock, the latest note kept", function()
  core.virtual(true)
  local out = sink()
  local p = progress.new(out, "op-1", true)
  p:phase("hyperpod_and_storage")
  p:note("hyperpod_create: HyperPod cluster x Creating (0s)")
  task.sleep(75)
  p:tick()
  local last = out:text():match(".*\r\27%[K([^\r]*)$")
  t.eq(last, "  1:15 hyperpod_and_storage  (hyperpod_create: HyperPod cluster x Creating (0s))")
  core.virtual(false)
end)

t.test("in a pipe a tick writes 'still ...' once QUIET seconds passed without a line, then not again at once", function()
  local quiet = progress.QUIET
  progress.QUIET = 0.2
  local out = sink()
  local p = progress.new(out, "op-2", false)
  p:phase("waiting for HyperPod cluster x to be InService")
  p:note("HyperPod cluster x Creating (0s)")
  local before = out:text()
  p:tick()
  t.eq(out:text(), before, "nothing new while a line came just now")
  local t0 = core.mono()
  while core.mono() - t0 < 0.25 do task.sleep(0.05) end
  p:tick()
  local added = out:text():sub(#before + 1)
  t.like(added, "^%d%d:%d%d:%d%d op%-2:   still waiting for HyperPod cluster x to be InService %(%d+s%); " ..
    "last: HyperPod cluster x Creating %(0s%)\n$")
  p:tick()
  t.eq(out:text():sub(#before + 1), added, "the next tick, right after, writes nothing")
  -- a phase on the way: "still at <step>"
  p:phase("hyperpod_and_storage")
  t0 = core.mono()
  while core.mono() - t0 < 0.25 do task.sleep(0.05) end
  p:tick()
  t.like(out:text(), "still at hyperpod_and_storage %(%d+s%)\n$")
  progress.QUIET = quiet
end)
