-- _hash: the short stable suffix hypd puts on a name cut to fit a limit,
-- from the 32-bit FNV-1a hash of a text. Names in accounts and clusters
-- carry it, so its digits never change.
--
--   local hash = require "_hash"
--   hash.fnv1a("some-long-name", 6) -> "c0b4de"
local M = {}

-- fnv1a(s [, digits]) -> the last digits (8, all of them) hex digits of
-- the FNV-1a hash of s
function M.fnv1a(s, digits)
  local h = 2166136261
  for i = 1, #s do h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff end
  digits = digits or 8
  return string.format("%0" .. digits .. "x", h & ((1 << (4 * digits)) - 1))
end

return M
