-- hypd.cli_progress: how `hypd call --wait` shows an operation's phases.
-- On a terminal: each finished phase stays as a line with its duration,
-- and the current one is redrawn in place with the time it has taken so
-- far and the latest progress note. Otherwise (a pipe, a CI log): one
-- plain line per phase with a time stamp.
--
--   local p = progress.new(io.stderr, id, core.isatty(2))
--   p:phase(text) ; p:note(text) ; p:finish(status)
local core = require "hypd.core"

local M = {}
local P = {}
P.__index = P

function M.new(out, id, tty)
  return setmetatable({ out = out, id = id, tty = tty, started = core.now() }, P)
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
    self.out:write(os.date("%H:%M:%S"), " ", self.id, ": ", text, "\n")
    self.out:flush()
    self.current = text
  end
end

function P:note(text)
  if not self.tty then return end
  self.latest = tostring(text)
  self:draw()
end

function P:finish(status)
  if self.tty then
    self:close_phase(status == "succeeded" and "✓" or "✗")
    self.out:write(string.format("%s %s in %s\n", self.id, tostring(status), clock(core.now() - self.started)))
  end
  self.out:flush()
end

return M
