-- sandbox.services.ec2.cidr: IPv4 CIDR arithmetic for the EC2 simulation.
-- A block is { net = <32-bit integer>, prefix = 0..32, text = "a.b.c.d/p" }.
local M = {}

-- ip(text) -> 32-bit integer of a dotted quad, or nil
function M.ip(text)
  if type(text) ~= "string" then return nil end
  local a, b, c, d = text:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return nil end
  local n = 0
  for _, part in ipairs { a, b, c, d } do
    if #part > 3 or (#part > 1 and part:sub(1, 1) == "0") then return nil end
    local v = tonumber(part)
    if v > 255 then return nil end
    n = n * 256 + v
  end
  return n
end

-- text(n) -> dotted quad of a 32-bit integer
function M.text(n)
  return string.format("%d.%d.%d.%d", (n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255)
end

local function mask(prefix)
  if prefix == 0 then return 0 end
  return (0xffffffff << (32 - prefix)) & 0xffffffff
end

-- parse("10.0.0.0/16") -> block, or nil when malformed or host bits are set
function M.parse(text)
  if type(text) ~= "string" then return nil end
  local addr, p = text:match("^([%d%.]+)/(%d%d?)$")
  local n = M.ip(addr)
  local prefix = tonumber(p)
  if not n or not prefix or prefix > 32 then return nil end
  if n & mask(prefix) ~= n then return nil end
  return { net = n, prefix = prefix, text = M.text(n) .. "/" .. prefix }
end

-- size(block) -> number of addresses
function M.size(b) return 1 << (32 - b.prefix) end

-- last(block) -> the block's highest address (integer)
function M.last(b) return b.net + M.size(b) - 1 end

-- contains(outer, inner) -> inner lies entirely inside outer
function M.contains(outer, inner)
  return inner.prefix >= outer.prefix and inner.net & mask(outer.prefix) == outer.net
end

-- overlaps(a, b) -> the blocks share an address
function M.overlaps(a, b)
  return a.net <= M.last(b) and b.net <= M.last(a)
end

-- host(block, i) -> the i-th address of the block as text
function M.host(b, i) return M.text(b.net + i) end

return M
