-- sandbox.k8s.inflate: a DEFLATE (RFC 1951) decoder that keeps its window
-- from one call to the next, for the zlib stream a SPDY/3 session's header
-- blocks share (sandbox.k8s.spdy): each block is a run of complete deflate
-- blocks ended by a sync flush, and may refer back into the earlier ones
-- and into the preset dictionary.
--
--   local z = inflate.new(dictionary)   -- the preset window ("" for none)
--   z:feed(bytes) -> the bytes those blocks decode to | nil, why
--
-- It decodes Huffman codes a bit at a time from the canonical counts (the
-- inputs are a few hundred bytes: nothing here needs lookup tables).
local M = {}

local MAXBITS, WINDOW = 15, 32768

local LBASE = { 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115,
  131, 163, 195, 227, 258 }
local LEXTRA = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0 }
local DBASE = { 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049,
  3073, 4097, 6145, 8193, 12289, 16385, 24577 }
local DEXTRA = { 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13 }
-- the order the code-length code's lengths come in (RFC 1951 3.2.7)
local CLORDER = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15 }

local Bad = {} -- raised (as a table) for a malformed stream

local function bad(why) error(setmetatable({ why = why }, Bad), 0) end

-- huffman(lengths, n) -> { count = {[len] = codes}, symbol = {...} } of
-- the canonical code with lengths[0..n-1]
local function huffman(lengths, n)
  local count, offs, symbol = {}, {}, {}
  for len = 0, MAXBITS do count[len] = 0 end
  for s = 0, n - 1 do count[lengths[s]] = count[lengths[s]] + 1 end
  offs[1] = 0
  for len = 1, MAXBITS - 1 do offs[len + 1] = offs[len] + count[len] end
  for s = 0, n - 1 do
    local len = lengths[s]
    if len ~= 0 then
      symbol[offs[len]] = s
      offs[len] = offs[len] + 1
    end
  end
  return { count = count, symbol = symbol }
end

local FIXED_LIT, FIXED_DIST
do
  local l = {}
  for s = 0, 143 do l[s] = 8 end
  for s = 144, 255 do l[s] = 9 end
  for s = 256, 279 do l[s] = 7 end
  for s = 280, 287 do l[s] = 8 end
  FIXED_LIT = huffman(l, 288)
  local d = {}
  for s = 0, 29 do d[s] = 5 end
  FIXED_DIST = huffman(d, 30)
end

local Z = {}
Z.__index = Z

function M.new(dictionary)
  local win = {}
  for i = 1, #(dictionary or "") do win[i] = dictionary:byte(i) end
  return setmetatable({ win = win, n = #win }, Z)
end

-- one call's bit reader over s
local function reader(s)
  local pos, buf, cnt = 1, 0, 0
  local r = {}
  function r.bits(need)
    while cnt < need do
      local b = s:byte(pos)
      if not b then bad("the block is cut short") end
      pos = pos + 1
      buf = buf | (b << cnt)
      cnt = cnt + 8
    end
    local v = buf & ((1 << need) - 1)
    buf, cnt = buf >> need, cnt - need
    return v
  end
  function r.align() buf, cnt = 0, 0 end
  function r.byte_at() return pos end
  function r.skip(n) pos = pos + n end
  function r.done() return cnt == 0 and pos > #s end
  return r
end

local function decode(r, h)
  local code, first, index = 0, 0, 0
  for len = 1, MAXBITS do
    code = code | r.bits(1)
    local count = h.count[len]
    if code - count < first then return h.symbol[index + (code - first)] end
    index = index + count
    first = (first + count) << 1
    code = code << 1
  end
  bad("an invalid Huffman code")
end

local function dynamic(r)
  local nlen, ndist, ncode = r.bits(5) + 257, r.bits(5) + 1, r.bits(4) + 4
  if nlen > 286 or ndist > 30 then bad("too many length or distance codes") end
  local lengths = {}
  for i = 0, 18 do lengths[i] = 0 end
  for i = 1, ncode do lengths[CLORDER[i]] = r.bits(3) end
  local lencode = huffman(lengths, 19)
  local all, i = {}, 0
  while i < nlen + ndist do
    local sym = decode(r, lencode)
    if sym < 16 then
      all[i], i = sym, i + 1
    else
      local len, rep = 0
      if sym == 16 then
        if i == 0 then bad("a repeat with no previous length") end
        len, rep = all[i - 1], 3 + r.bits(2)
      elseif sym == 17 then rep = 3 + r.bits(3)
      else rep = 11 + r.bits(7) end
      if i + rep > nlen + ndist then bad("too many code lengths") end
      for _ = 1, rep do all[i], i = len, i + 1 end
    end
  end
  local lit, dist = {}, {}
  for s = 0, nlen - 1 do lit[s] = all[s] end
  for s = 0, ndist - 1 do dist[s] = all[nlen + s] end
  return huffman(lit, nlen), huffman(dist, ndist)
end

-- feed(s) -> the decoded bytes of the complete blocks s holds
function Z:feed(s)
  local win, start = self.win, self.n
  local n = start
  local ok, err = pcall(function()
    local r = reader(s)
    while not r.done() do
      if self.final then bad("data after the final block") end
      self.final = r.bits(1) == 1
      local kind = r.bits(2)
      if kind == 0 then
        r.align()
        local p = r.byte_at()
        if p + 3 > #s then bad("the stored block's length is cut short") end
        local len, nlen = string.unpack("<I2I2", s, p)
        if len ~= (~nlen & 0xffff) then bad("the stored block's length does not match its complement") end
        if p + 3 + len > #s then bad("the stored block is cut short") end
        for k = 0, len - 1 do win[n + 1 + k] = s:byte(p + 4 + k) end
        n = n + len
        r.skip(4 + len)
      elseif kind == 3 then
        bad("an invalid block type")
      else
        local lit, dist = FIXED_LIT, FIXED_DIST
        if kind == 2 then lit, dist = dynamic(r) end
        while true do
          local sym = decode(r, lit)
          if sym < 256 then
            n = n + 1
            win[n] = sym
          elseif sym == 256 then
            break
          else
            sym = sym - 256
            if sym > 29 then bad("an invalid length code") end
            local len = LBASE[sym] + r.bits(LEXTRA[sym])
            local d = decode(r, dist) + 1
            if d > 30 then bad("an invalid distance code") end
            local back = DBASE[d] + r.bits(DEXTRA[d])
            if back > n then bad("a distance past the start of the window") end
            for _ = 1, len do
              n = n + 1
              win[n] = win[n - back]
            end
          end
        end
      end
    end
  end)
  if not ok then
    if getmetatable(err) == Bad then return nil, err.why end
    error(err, 0)
  end
  local out = {}
  for k = start + 1, n do out[#out + 1] = string.char(win[k]) end
  -- keep the last WINDOW bytes (what a distance may reach)
  if n > 2 * WINDOW then
    local keep = {}
    for k = n - WINDOW + 1, n do keep[#keep + 1] = win[k] end
    self.win, n = keep, WINDOW
  end
  self.n = n
  return table.concat(out)
end

return M
