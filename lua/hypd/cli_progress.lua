-- hypd.cli_progress: how `hypd call --wait` shows an operation's phases.
-- On a terminal: each finished phase stays as a line with its duration,
-- and the current one is redrawn in place with the time it has taken so
-- far and the latest progress note. Otherwise (a pipe, a CI log): one
-- plain line per phase with a time stamp, one per new note, and when
-- nothing was written for QUIET seconds a line that says what is still
-- awaited and for how long, so a log never goes silent on a long wait.
-- The follower calls p:tick() between fetches: on a terminal it redraws
-- the line, so its clock runs even while no event comes.
--
--   local p = progress.new(io.stderr, id, sys.isatty(2))
--   p:phase(text) ; p:note(text) ; p:event(ev) ; p:tick() ; p:finish(status)
local core = require "hypd.core"
local kit = require "hypd.tool.kit"

local M = {}
local P = {}
P.__index = P

M.QUIET = 10 -- seconds a pipe goes without a line at most (the rule: 15)

function M.new(out, id, tty)
  local now = core.now()
  -- written: when the last line went out, on the monotonic clock (the
  -- rule is about wall time, also when the operation's clock is virtual)
  return setmetatable({ out = out, id = id, tty = tty, started = now, written = core.mono(), since = now }, P)
end

-- line(text): one plain (not terminal) line, time-stamped
function P:line(text)
  self.out:write(os.date("%H:%M:%S"), " ", self.id, ": ", text, "\n")
  self.out:flush()
  self.written = core.mono()
end

local function clock(s)
  s = math.max(0, math.floor(s))
  return string.format("%d:%02d", s // 60, s % 60)
end

function P:draw()
  if not self.current then return end
  local line = string.format("  %s %s", clock(core.now() - self.since), self.current)
  if self.latest then line = line .. "  (" .. self.latest .. ")" end
  self.out:write("\r\27[K", line)
  self.out:flush()
end

-- done_line(): the phase that just ended, kept on screen with its duration
function P:close_phase(mark)
  if not self.current then return end
  if self.tty then
    self.out:write("\r\27[K", string.format("%s %s  %s\n", mark or "✓", self.current,
      clock(core.now() - self.since)))
  end
  self.current, self.latest = nil, nil
end

function P:phase(text)
  text = tostring(text)
  if text == self.current then return end
  if self.tty then
    self:close_phase()
    self.current, self.since = text, core.now()
    self:draw()
  else
    self:line(text)
    self.current, self.latest, self.since = text, nil, core.now()
  end
end

function P:note(text)
  text = tostring(text)
  if not self.tty then
    if text ~= self.latest then self:line("  " .. text) end
    self.latest = text
    return
  end
  self.latest = text
  self:draw()
end

-- tick(): time passed with no event: the terminal line's clock is redrawn;
-- a pipe gets "still waiting" once QUIET seconds passed without a line
function P:tick()
  if self.tty then return self:draw() end
  if core.mono() - self.written < M.QUIET then return end
  local doing = self.current or "the operation"
  self:line(string.format("  still %s (%s)%s", doing:match("^waiting ") and doing or ("at " .. doing),
    kit.elapsed(core.now() - self.since), self.latest and ("; last: " .. self.latest) or ""))
end

-- event(ev): one operation event (as op.subscribe delivers it in this
-- process, or as operation_list_events returns it from a server), shown
-- the same way whichever way it came
function P:event(ev)
  if ev.kind == "operation.progress" then
    if ev.message then self:note(ev.message) end
  elseif ev.phase and ev.kind ~= "operation.finished" then
    self:phase(ev.phase)
  end
end

function P:finish(status)
  if self.tty then
    self:close_phase(status == "succeeded" and "✓" or "✗")
    self.out:write(string.format("%s %s in %s\n", self.id, tostring(status), clock(core.now() - self.started)))
  else
    self.out:write(os.date("%H:%M:%S"), " ", self.id, " ", tostring(status), " in ",
      clock(core.now() - self.started), "\n")
  end
  self.out:flush()
end

return M
