-- hypd.cli._out: how the commands write: results on stdout, messages and
-- errors on stderr, flushed at once.
--   say(...)  warn(...)  fail(err) -> 1 after "hypd: CODE: message" (secrets redacted)
local errors = require "hypd.errors"

local M = {}

function M.say(...) io.stdout:write(...) io.stdout:flush() end
function M.warn(...) io.stderr:write(...) io.stderr:flush() end

function M.fail(err)
  local e = errors.public(type(err) == "table" and err or { code = "INTERNAL", message = tostring(err) })
  M.warn("hypd: ", tostring(e.code or "ERROR"), ": ", tostring(e.message or ""), "\n")
  return 1
end

return M
