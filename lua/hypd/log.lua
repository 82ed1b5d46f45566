-- hypd.log: one line per event, through the C logger (levels, redaction).
--   log.info("engine", "started %d tasks", n)
local clog = require "hypd._log"

local M = {}

local function emit(level, component, fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or tostring(fmt)
  clog.write(level, component, msg)
end

for _, level in ipairs { "debug", "info", "warn", "error" } do
  M[level] = function(component, fmt, ...) emit(level, component, fmt, ...) end
end

M.level = clog.level
return M
