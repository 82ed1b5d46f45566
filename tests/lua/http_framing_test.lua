-- HTTP/1.1 message framing (RFC 9112 sections 2 to 7): a request whose
-- length or header block is ambiguous is refused with an error status and
-- the connection closes, so bytes after it are never answered as another
-- request (request smuggling). The client is tests/tools/raw_http.py (raw
-- bytes over one socket), run in the background so the engine keeps
-- serving while it talks; the test polls for the JSON file it leaves.
local t = require "hypd.tap"
local core = require "hypd.core"
local json = require "hypd.json"
local server = require "hypd.http_server"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local runs = 0
local MAX_BODY = 1 << 20

-- raw(port, parts [, opts]) -> what raw_http.py saw: parts are sent as
-- they are (opts.pause apart), then it reads until the server closes or
-- opts.timeout passes
local function raw(port, parts, opts)
  opts = opts or {}
  runs = runs + 1
  local base = string.format("%s/case-%d", dir, runs)
  H.write(base .. ".in", json.encode { send = parts, pause = opts.pause or 0.2, timeout = opts.timeout or 3 })
  os.execute(string.format("python3 tests/tools/raw_http.py %d %s %s %s >%s.log 2>&1 &", port,
    H.quote(base .. ".in"), H.quote(base .. ".json"), opts.ca and H.quote(opts.ca) or "", H.quote(base)))
  local deadline = core.mono() + 60
  while core.mono() < deadline do
    local text = H.read(base .. ".json")
    if text then return json.decode(text) end
    task.sleep(0.02)
  end
  error("raw_http.py wrote nothing: " .. tostring(H.read(base .. ".log")))
end

-- the handler sees every request that gets through; `seen` lists their paths
local seen = {}
local function handler(req)
  seen[#seen + 1] = req.path
  return { headers = { ["content-type"] = "application/json" },
           body = json.encode { path = req.path, length = #req.body } }
end

local srv = assert(server.start { listen = "127.0.0.1:0", handler = handler, max_body = MAX_BODY })

-- refused(r, status): exactly one answer with that status and a JSON error
-- body, Connection: close, then the end of the connection
local function refused(r, status, what)
  t.eq(#r.responses, 1, what .. ": one answer, none for the bytes after it (" ..
    json.encode(r.responses) .. ")")
  local a = r.responses[1]
  t.eq(a.status, status, what)
  t.eq(a.headers.connection, "close", what .. ": Connection: close")
  t.ok(r.closed, what .. ": the server closed the connection (waited " .. r.seconds .. " s)")
  return a
end

-- refused_json(r, status): refused, with a JSON error object like the server's 413 and 503
local function refused_json(r, status, what)
  local a = refused(r, status, what)
  t.eq(a.headers["content-type"], "application/json", what)
  local ok, body = pcall(json.decode, a.body)
  t.ok(ok and type(body) == "table" and type(body.error) == "table" and type(body.error.code) == "string",
    what .. ": a JSON error body, got " .. a.body)
  return body.error
end

-- a request that would be answered as a second one if the first were misread
local SMUGGLED = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

local function never_smuggled()
  for _, p in ipairs(seen) do t.ok(p ~= "/smuggled", "the smuggled request reached the handler") end
end

t.test("a plain request gets its answer and the connection stays open for the next one", function()
  local r = raw(srv.port, { "GET /one?x=1&y=%00&z HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Tab:\tv \r\n\r\n" ..
    "GET /two HTTP/1.1\nHost: x\nCookie: a=b; c=d\n\n" }, { timeout = 1 })
  t.eq({ #r.responses, r.responses[1].status, r.responses[2] and r.responses[2].status }, { 2, 200, 200 },
    json.encode(r.responses))
  t.eq(json.decode(r.responses[1].body).path, "/one")
  t.eq(json.decode(r.responses[2].body).path, "/two", "bare LF line ends are accepted (RFC 9112 2.2)")
  t.eq(r.closed, false, "keep-alive: the server leaves the connection open")
end)

t.test("a chunked upload and an upload with Expect: 100-continue under the cap are read whole", function()
  local r = raw(srv.port, { "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" ..
    "5\r\nhello\r\n0\r\n\r\n" }, { timeout = 1 })
  t.eq({ #r.responses, r.responses[1].status }, { 1, 200 })
  t.eq(json.decode(r.responses[1].body).length, 5)
  r = raw(srv.port, { "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    "hello" }, { timeout = 1 })
  t.eq({ r.responses[1].status, r.responses[2] and r.responses[2].status }, { 100, 200 })
  t.eq(json.decode(r.responses[2].body).length, 5)
end)

t.test("Content-Length with Transfer-Encoding gets 400 and the bytes after it are never answered", function()
  local r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 38\r\n" ..
    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" .. SMUGGLED })
  local e = refused_json(r, 400, "CL + TE")
  t.eq(e.code, "VALIDATION")
  never_smuggled()
end)

t.test("two different Content-Length headers get 400 and the bytes after them are never answered", function()
  local r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: " ..
    #SMUGGLED .. "\r\n\r\n" .. SMUGGLED })
  refused_json(r, 400, "two Content-Length")
  never_smuggled()
end)

t.test("a repeated Content-Length, even with the same value, gets 400", function()
  local r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi" })
  refused_json(r, 400, "the same Content-Length twice")
end)

t.test("a transfer coding other than chunked, or chunked not last, gets 400 at once", function()
  for _, te in ipairs { "gzip", "xchunked", "chunked, identity", "identity", "chunked;x=1", "" } do
    local r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " .. te .. "\r\n\r\n" ..
      "5\r\nhello\r\n0\r\n\r\n" })
    refused_json(r, 400, "Transfer-Encoding: " .. te)
    t.ok(r.seconds < 2, "answered at once, not after a timeout (" .. r.seconds .. " s)")
  end
end)

t.test("chunked applied twice, in one header or in two, gets 400", function()
  for _, h in ipairs { "Transfer-Encoding: chunked, chunked\r\n",
                       "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n" } do
    local r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\n" .. h .. "\r\n0\r\n\r\n" .. SMUGGLED })
    refused_json(r, 400, h)
  end
  never_smuggled()
end)

t.test("a coding the server does not implement before chunked gets 501", function()
  local r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" })
  refused_json(r, 501, "gzip, chunked")
  r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n" ..
    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" })
  refused_json(r, 501, "gzip then chunked in two headers")
end)

t.test("Transfer-Encoding in an HTTP/1.0 request gets 400", function()
  local r = raw(srv.port, { "POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" })
  refused_json(r, 400, "HTTP/1.0 with Transfer-Encoding")
end)

t.test("whitespace before a header's colon gets 400", function()
  for _, line in ipairs { "X-A : b", "X-A\t: b", " X-A: b" } do
    local r = raw(srv.port, { "GET /a HTTP/1.1\r\nHost: x\r\n" .. line .. "\r\n\r\n" })
    refused_json(r, 400, string.format("%q", line))
  end
end)

t.test("a header name that is not a token gets 400", function()
  local r = raw(srv.port, { "GET /a HTTP/1.1\r\nHost: x\r\nX(A): b\r\n\r\n" })
  refused_json(r, 400, "X(A)")
end)

t.test("an obs-fold continuation line gets 400", function()
  for _, fold in ipairs { "X-A: b\r\n c\r\n", "X-A: b\r\n\tc\r\n", "Host: x\r\n y\r\n" } do
    local r = raw(srv.port, { "GET /a HTTP/1.1\r\n" .. (fold:find("^Host") and "" or "Host: x\r\n") ..
      fold .. "X-B: d\r\n\r\n" })
    refused_json(r, 400, string.format("%q", fold))
  end
  local r = raw(srv.port, { "GET /a HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n" })
  refused_json(r, 400, "a fold of the last header")
end)

t.test("a NUL, a bare CR or another control character in a header value gets 400", function()
  for _, v in ipairs { "b\0c", "b\0", "b\rc", "b\1c", "b\127c" } do
    local r = raw(srv.port, { "GET /a HTTP/1.1\r\nHost: x\r\nX-A: " .. v .. "\r\nX-B: d\r\n\r\n" })
    refused_json(r, 400, string.format("%q", v))
  end
  local r = raw(srv.port, { "GET /a HTTP/1.1\r\nHost: x\r\nX-A: b\0c\r\n\r\n" })
  refused_json(r, 400, "a NUL in the last header")
end)

t.test("a NUL, a control character or a space in the request target gets 400", function()
  for _, target in ipairs { "/a\0/../b", "/a\rb", "/a\1b", "/a b", "/a\tb" } do
    local r = raw(srv.port, { "GET " .. target .. " HTTP/1.1\r\nHost: x\r\n\r\n" })
    refused_json(r, 400, string.format("%q", target))
  end
end)

t.test("HTTP/1.1 without Host, or with two Host headers, gets 400", function()
  local r = raw(srv.port, { "GET /a HTTP/1.1\r\nX-A: b\r\n\r\n" })
  refused_json(r, 400, "no Host")
  r = raw(srv.port, { "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n" })
  refused_json(r, 400, "two Host")
  r = raw(srv.port, { "GET /a HTTP/1.0\r\n\r\n" }, { timeout = 1 })
  t.eq(r.responses[1] and r.responses[1].status, 200, "HTTP/1.0 needs no Host")
end)

t.test("a Content-Length over the cap gets 413 at once, before any body is sent", function()
  local r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n" })
  local e = refused_json(r, 413, "Content-Length: 100000000000")
  t.eq(e.code, "TOO_LARGE")
  t.ok(r.seconds < 2, "answered at once (" .. r.seconds .. " s)")
  r = raw(srv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: " .. (MAX_BODY + 1) .. "\r\n\r\n" })
  refused_json(r, 413, "one byte over the cap")
end)

t.test("Expect: 100-continue with a body over the cap gets 413 instead of 100 Continue", function()
  local r = raw(srv.port, { "PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: " .. 5 * 1024 * 1024 ..
    "\r\nExpect: 100-continue\r\n\r\n" })
  t.eq(r.responses[1] and r.responses[1].status, 413, "the first answer, no 100 Continue")
  refused_json(r, 413, "Expect with 5 MB")
end)

t.test("over TLS, Content-Length with Transfer-Encoding gets 400 and the connection closes", function()
  local tdir = H.tmpdir()
  local cert, key, pem = H.self_signed(tdir)
  local tsrv = assert(server.start { listen = "127.0.0.1:0", handler = handler, max_body = MAX_BODY,
    tls = { cert_pem = pem, key_pem = H.read(key) } })
  local ok, err = pcall(function()
    local r = raw(tsrv.port, { "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n" }, { ca = cert, timeout = 1 })
    t.eq(r.responses[1] and r.responses[1].status, 200, "a plain request over TLS")
    r = raw(tsrv.port, { "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n" ..
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" .. SMUGGLED }, { ca = cert })
    refused_json(r, 400, "CL + TE over TLS")
  end)
  tsrv:stop()
  os.execute("rm -rf " .. H.quote(tdir))
  if not ok then error(err, 0) end
  never_smuggled()
end)

-- bg(cmd) -> exit status, stdout: runs cmd in the background (the engine
-- keeps serving) and waits for it
local function bg(cmd)
  runs = runs + 1
  local base = string.format("%s/bg-%d", dir, runs)
  os.execute(string.format("{ (%s) >%s.out 2>&1 </dev/null; echo $? >%s.rc.tmp; mv %s.rc.tmp %s.rc; } &",
    cmd, base, base, base, base))
  local deadline = core.mono() + 60
  while core.mono() < deadline do
    local rc = H.read(base .. ".rc")
    if rc then return tonumber(rc), H.read(base .. ".out") end
    task.sleep(0.02)
  end
  error("timed out: " .. cmd)
end

t.test("curl still gets its answers: keep-alive, a chunked upload, Expect: 100-continue, 413", function()
  local url = "http://127.0.0.1:" .. srv.port
  local file = H.write(dir .. "/body", string.rep("x", 600 * 1024))
  H.write(dir .. "/big", string.rep("x", 2 * MAX_BODY))
  local rc, out = bg("curl -sS -w ' %{http_code} %{num_connects}\\n' " .. url .. "/a " .. url .. "/b")
  t.eq(rc, 0, out)
  t.like(out, '"path":"/a"} 200 1\n.*"path":"/b"} 200 0\n$', "two requests, one connection")
  rc, out = bg("curl -sS -H 'Transfer-Encoding: chunked' --data-binary @" .. file .. " " .. url .. "/c")
  t.eq({ rc, out }, { 0, json.encode { length = 600 * 1024, path = "/c" } }, "chunked")
  rc, out = bg("curl -sS -v -H 'Expect: 100-continue' --data-binary @" .. file .. " " .. url .. "/e")
  t.eq(rc, 0, out)
  t.like(out, "< HTTP/1.1 100 Continue", "100 Continue")
  t.like(out, '"length":614400', "the body after 100 Continue")
  rc, out = bg("curl -sS -o /dev/null -w '%{http_code}' --data-binary @" .. dir .. "/big " .. url .. "/big")
  t.eq({ rc, out }, { 0, "413" }, "over the cap (curl sends Expect: 100-continue past 1 MB)")
end)

t.test("Python's http.client still gets its answers: a GET, a chunked upload, a plain POST", function()
  local rc, out = bg("python3 -c " .. H.quote([=[
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
out = []
c.request("GET", "/g")
r = c.getresponse(); out.append([r.status, json.loads(r.read())["path"]])
c.request("POST", "/chunked", body=iter([b"ab", b"cd"]), encode_chunked=True)
r = c.getresponse(); out.append([r.status, json.loads(r.read())["length"]])
c.request("POST", "/p", body=b"hello", headers={"Content-Type": "text/plain"})
r = c.getresponse(); out.append([r.status, json.loads(r.read())["length"]])
print(json.dumps(out))
]=]) .. " " .. srv.port)
  t.eq(rc, 0, out)
  t.eq(json.decode(out), { { 200, "/g" }, { 200, 4 }, { 200, 5 } })
end)

t.test("Node.js fetch still gets its answers: a plain POST and a streamed (chunked) upload", function()
  if H.sh("command -v node") ~= 0 then return t.skip("node is absent") end
  local rc, out = bg("node -e " .. H.quote([[
const base = "http://127.0.0.1:" + process.argv[1];
(async () => {
  const out = [];
  let r = await fetch(base + "/p", { method: "POST", body: "hello" });
  out.push([r.status, (await r.json()).length]);
  const body = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode("abc")); c.close(); } });
  r = await fetch(base + "/s", { method: "POST", body, duplex: "half" });
  out.push([r.status, (await r.json()).length]);
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
]]) .. " " .. srv.port)
  t.eq(rc, 0, out)
  t.eq(json.decode(out), { { 200, 5 }, { 200, 3 } })
end)

t.cleanup(function()
  srv:stop()
  os.execute("rm -rf " .. H.quote(dir))
end)
