-- The SPDY/3.1 pieces kubectl port-forward's session needs
-- (sandbox.k8s.spdy, sandbox.k8s.inflate, sandbox.k8s.http_text), judged
-- against python3's zlib (the C zlib): header blocks compressed with the
-- SPDY/3 dictionary and sync flushes inflate to what was compressed, and
-- the blocks written here inflate back in zlib.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local http_text = require "sandbox.k8s.http_text"
local inflate = require "sandbox.k8s.inflate"
local spdy = require "sandbox.k8s.spdy"

local function unhex(s) return (s:gsub("..", function(h) return string.char(tonumber(h, 16)) end)) end
local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

local dict = H.tmpdir() .. "/dict"
H.write(dict, spdy.DICTIONARY)

t.test("the SPDY/3 dictionary has its 1,423 bytes and the id zlib gives it", function()
  t.eq(#spdy.DICTIONARY, 1423)
  local rc, out = H.sh("python3 -c 'import zlib,sys; print(\"%08x\" % zlib.adler32(open(sys.argv[1],\"rb\").read()))' " ..
    H.quote(dict))
  t.eq(rc, 0)
  t.eq(out:gsub("%s+$", ""), string.format("%08x", spdy.adler32(spdy.DICTIONARY)))
  t.eq(spdy.adler32(spdy.DICTIONARY), 0xe3c6a7c2, "the dictionary id spdystream's client sends")
end)

-- python3 compresses n header blocks in one stream with the dictionary at
-- level 9 (dynamic Huffman blocks, back-references into the dictionary and
-- into earlier blocks), each ended by a sync flush
local PY = [[
import zlib, sys, random
d = open(sys.argv[1], "rb").read()
c = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY, d)
random.seed(7)
for i in range(6):
    s = (b"\0\0\0\2\0\0\0\x0astreamtype\0\0\0\x05error\0\0\0\x04port\0\0\0\x048000"
         + bytes(random.randrange(256) for _ in range(i * 500)) + b"content-type: text/plain " * i * 40)
    print((c.compress(s) + c.flush(zlib.Z_SYNC_FLUSH)).hex(), s.hex())
]]

t.test("header blocks zlib compressed with the dictionary inflate block by block to what was compressed", function()
  local rc, out, err = H.sh("python3 -c " .. H.quote(PY) .. " " .. H.quote(dict))
  t.eq(rc, 0, err)
  local s, raw, n = spdy.session(), inflate.new(spdy.DICTIONARY), 0
  for packed, plain in out:gmatch("(%x+) (%x+)") do
    n = n + 1
    local h, why = s:inflate_headers(unhex(packed))
    t.ok(h, why)
    if n == 1 then t.eq({ h and h.streamtype, h and h.port }, { "error", "8000" }) end
    -- the same bytes through the decoder alone
    local got = raw:feed(unhex(packed):sub(n == 1 and 7 or 1))
    t.eq(got and #got, #unhex(plain), "block " .. n)
    t.ok(got == unhex(plain), "block " .. n .. " decodes to what was compressed")
  end
  t.eq(n, 6)
  local z = inflate.new("")
  t.eq({ z:feed("\x07") }, { nil, "an invalid block type" }, "a malformed stream is refused, not guessed at")
end)

t.test("the header blocks written here inflate in zlib, one stream across frames", function()
  local s = spdy.session()
  local a = s:syn_reply(1, { ["x-one"] = "1" })
  local b = s:syn_reply(3, {})
  t.eq(hex(a:sub(1, 4)), "80030002", "a SPDY/3 SYN_REPLY")
  local blocks = hex(a:sub(13)) .. " " .. hex(b:sub(13))
  local rc, out, err = H.sh("python3 -c " .. H.quote([[
import zlib, sys
d = zlib.decompressobj()
for b in sys.argv[1:]:
    print(d.decompress(bytes.fromhex(b)).hex())
]]) .. " " .. blocks)
  t.eq(rc, 0, err)
  local first, second = out:match("(%x+)\n(%x+)")
  t.eq(first and unhex(first), string.pack(">I4 s4 s4", 1, "x-one", "1"))
  t.eq(second and unhex(second), string.pack(">I4", 0))
end)

t.test("frames: a SYN_STREAM split anywhere is read whole; data frames carry FIN; PING is echoed as it came", function()
  local peer = spdy.session()
  local block = peer:deflate_headers { streamtype = "data", port = "8000", requestid = "0" }
  local syn = string.pack(">I2 I2 B I3 I4 I4 B B", 0x8003, 1, 0, 10 + #block, 3, 0, 0, 0) .. block
  local s = spdy.session()
  for i = 1, #syn do
    s:push(syn:sub(i, i))
    if i < #syn then t.eq(s:next(), nil) end
  end
  local f = s:next()
  t.eq({ f.type, f.stream, f.headers.port, f.headers.streamtype, f.headers.requestid },
    { "SYN_STREAM", 3, "8000", "data", "0" })
  s:push(s:data(3, "hello", true))
  f = s:next()
  t.eq({ f.control, f.stream, f.data, f.flags & spdy.FIN }, { nil, 3, "hello", spdy.FIN })
  s:push(s:ping(7))
  f = s:next()
  t.eq({ f.type, f.id }, { "PING", 7 })
  s:push(string.pack(">I2 I2 B I3", 0x8002, 1, 0, 0))
  t.eq({ s:next() }, { false, "SPDY version 2 (3 is spoken)" })
end)

t.test("HTTP/1.1 on a forwarded connection: requests in pieces, kept alive, chunked, and closed", function()
  t.eq(http_text.request("GET / HTTP/1.1\r\nHost: x\r\n"), nil, "incomplete")
  local req, rest = http_text.request("POST /v1/x?a=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\n")
  t.eq({ req.method, req.path, req.query, req.body, req.close }, { "POST", "/v1/x", "a=1", "abc", false })
  req = http_text.request(rest)
  t.eq({ req.method, req.path, req.body }, { "GET", "/b", "" })
  req = http_text.request("PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" ..
    "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
  t.eq({ req.body, req.close }, { "abcde", true })
  t.eq(select(3, http_text.request("BREW\r\n\r\n")), "a malformed request line")
  local text = http_text.response({ status = 404, headers = { ["content-type"] = "text/plain" }, body = "no" }, true)
  t.like(text, "^HTTP/1%.1 404 Not Found\r\n")
  t.like(text, "\r\nContent%-Length: 2\r\n")
  t.like(text, "\r\nConnection: close\r\n\r\nno$")
end)
