-- hypd.cidr: IPv4 CIDR blocks, for the networks workflows carve.
--   cidr.parse(text) -> {base, prefix} | nil, why (host bits set is an error)
--   cidr.format(base, prefix) -> "10.192.0.0/16"
--   cidr.contains(outer, inner) -> bool     cidr.overlaps(a, b) -> bool
--   cidr.size(block) -> number of addresses
--   cidr.subnet_prefix(vpc_prefix) -> a sixteenth of the VPC, at most /28
--   cidr.next_free(vpc_text, used_texts [, prefix]) -> the first block of the
--     VPC of that prefix (default subnet_prefix) overlapping none in used
-- Blocks are tables {base = integer, prefix = n}; the functions taking text
-- parse it first.
local M = {}

function M.format(base, prefix)
  return string.format("%d.%d.%d.%d/%d", (base >> 24) & 255, (base >> 16) & 255, (base >> 8) & 255, base & 255,
    prefix)
end

function M.parse(text)
  if type(text) == "table" then return text end
  local a, b, c, d, n = tostring(text):match("^(%d+)%.(%d+)%.(%d+)%.(%d+)/(%d+)$")
  if not a then return nil, "not an IPv4 CIDR block like 10.192.0.0/16" end
  local base = 0
  for _, o in ipairs { a, b, c, d } do
    o = tonumber(o)
    if o > 255 then return nil, "an address part is above 255" end
    base = base * 256 + o
  end
  n = tonumber(n)
  if n > 32 then return nil, "the prefix length is above 32" end
  local size = 1 << (32 - n)
  if base % size ~= 0 then
    return nil, "host bits are set (the network is " .. M.format(base - base % size, n) .. ")"
  end
  return { base = base, prefix = n }
end

local function block(v) return assert(M.parse(v)) end

function M.size(b) return 1 << (32 - block(b).prefix) end

function M.overlaps(x, y)
  x, y = block(x), block(y)
  return x.base < y.base + M.size(y) and y.base < x.base + M.size(x)
end

function M.contains(outer, inner)
  outer, inner = block(outer), block(inner)
  return inner.prefix >= outer.prefix and inner.base >= outer.base and
    inner.base + M.size(inner) <= outer.base + M.size(outer)
end

function M.subnet_prefix(vpc_prefix) return math.min(vpc_prefix + 4, 28) end

function M.next_free(vpc_text, used, prefix)
  local vpc = block(vpc_text)
  local sp = prefix or M.subnet_prefix(vpc.prefix)
  local taken = {}
  for _, u in ipairs(used or {}) do taken[#taken + 1] = block(u) end
  for i = 0, (1 << (sp - vpc.prefix)) - 1 do
    local b = { base = vpc.base + i * (1 << (32 - sp)), prefix = sp }
    local free = true
    for _, u in ipairs(taken) do free = free and not M.overlaps(b, u) end
    if free then return M.format(b.base, b.prefix) end
  end
end

return M
