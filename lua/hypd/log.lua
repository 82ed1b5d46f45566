-- hypd.log: one line per event, through the C logger (levels, redaction).
--   log.info("engine", "started %d tasks", n)
--   log.subscribe(fn(level, component, message)) -> unsubscribe: the lines
--   Lua code logs, already redacted (the WebSocket's log stream)
local clog = require "hypd._log"
local core = require "hypd.core"

local M = {}
local subscribers, nsubs = {}, 0
local LEVELS = { debug = 1, info = 2, warn = 3, error = 4 }

local function emit(level, component, fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or tostring(fmt)
  clog.write(level, component, msg)
  if nsubs > 0 then
    local clean = core.redact(msg)
    for fn, min in pairs(subscribers) do
      if LEVELS[level] >= min then pcall(fn, level, component, clean) end
    end
  end
end

for _, level in ipairs { "debug", "info", "warn", "error" } do
  M[level] = function(component, fmt, ...) emit(level, component, fmt, ...) end
end

-- subscribe(fn [, min_level]) -> unsubscribe
function M.subscribe(fn, min_level)
  subscribers[fn] = LEVELS[min_level or "info"] or 2
  nsubs = nsubs + 1
  return function()
    if subscribers[fn] then subscribers[fn], nsubs = nil, nsubs - 1 end
  end
end

M.level = clog.level
return M
