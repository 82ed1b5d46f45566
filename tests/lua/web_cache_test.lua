-- What a reload of the web UI costs: every file of the UI and GET
-- /api/v1/tools carry a strong ETag (their content's hash) and Vary:
-- Accept-Encoding; If-None-Match with it answers 304 without a body and
-- with the security headers; a client that accepts gzip gets a gzip body
-- that decodes (by the system's gzip) to the very bytes; the tools list's
-- tag changes when a playbook reload changes the tools. The raw bytes are
-- read with the curl command (hypd's own client decodes gzip itself).
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local playbooks = dir .. "/playbooks"
os.execute("mkdir -p " .. H.quote(playbooks) .. " " .. H.quote(dir .. "/state"))
local srv = assert(H.serve_process(dir .. "/state", nil, "--playbooks " .. H.quote(playbooks)))
t.cleanup(function()
  srv.stop()
  os.execute("rm -rf " .. H.quote(dir))
end)
local BASE, TOKEN = srv.url, srv.token

-- get(path, headers) -> {status, headers, body, file}: the curl command's
-- answer, its body as received (not decoded) in file
local n = 0
local function get(path, headers, method, base)
  n = n + 1
  local file = dir .. "/body" .. n
  local cmd = { "curl -s -o", H.quote(file), "-D", H.quote(file .. ".h") }
  if method then cmd[#cmd + 1] = method == "HEAD" and "-I" or "-X " .. method end
  for k, v in pairs(headers or {}) do cmd[#cmd + 1] = "-H " .. H.quote(k .. ": " .. v) end
  cmd[#cmd + 1] = H.quote((base or BASE) .. path)
  local rc, _, err = H.sh(table.concat(cmd, " "))
  assert(rc == 0, "curl failed: " .. tostring(err))
  local head = H.read(file .. ".h") or ""
  local r = { headers = {}, body = H.read(file) or "", file = file }
  r.status = tonumber(head:match("^HTTP/[%d.]+ (%d+)"))
  for k, v in head:gmatch("\n([%w-]+):%s*([^\r\n]*)") do r.headers[k:lower()] = v end
  return r
end

local function gunzip(file)
  local rc, out, err = H.sh("gzip -dc " .. H.quote(file))
  return rc == 0 and out or nil, err
end

local function secure(r, what)
  t.eq(r.headers["x-content-type-options"], "nosniff", what .. ": nosniff")
  t.like(r.headers["content-security-policy"] or "", "frame%-ancestors 'none'", what .. ": the CSP")
end

t.test("a file of the UI has a strong ETag, is revalidated at each use, and Vary names Accept-Encoding", function()
  local r = get("/app.js")
  t.eq(r.status, 200)
  t.eq(r.body, H.read("web/app.js"), "no Accept-Encoding: the file as it is")
  t.like(r.headers.etag or "", '^"%x+"$', "a strong tag")
  t.eq(r.headers["cache-control"], "no-cache", "kept, asked again before each use")
  t.eq(r.headers.vary, "Accept-Encoding")
  t.eq(r.headers["content-encoding"], nil)
  local again = get("/app.js")
  t.eq(again.headers.etag, r.headers.etag, "the same file has the same tag")
  t.ok(get("/style.css").headers.etag ~= r.headers.etag, "another file has another tag")
  t.eq(get("/").headers["cache-control"], "no-cache", "index.html too")
end)

t.test("If-None-Match with the tag answers 304 with no body and every security header", function()
  local r = get("/app.js")
  local nm = get("/app.js", { ["if-none-match"] = r.headers.etag })
  t.eq(nm.status, 304)
  t.eq(nm.body, "", "no body")
  t.eq(nm.headers.etag, r.headers.etag, "the tag again")
  t.eq(nm.headers["cache-control"], "no-cache")
  t.eq(nm.headers.vary, "Accept-Encoding")
  secure(nm, "304")
  t.eq(nm.headers["x-frame-options"], "DENY", "304: x-frame-options")
  t.eq(get("/app.js", { ["if-none-match"] = '"0123", ' .. r.headers.etag }).status, 304, "one of a list")
  t.eq(get("/app.js", { ["if-none-match"] = "W/" .. r.headers.etag }).status, 304, "a weak comparison")
  t.eq(get("/app.js", { ["if-none-match"] = '"0123456789abcdef0123456789abcdef"' }).status, 200, "another tag: the file")
  t.eq(get("/style.css", { ["if-none-match"] = r.headers.etag }).status, 200, "another file's tag: the file")
end)

t.test("a client that accepts gzip gets a gzip body that decodes to the file; its tag revalidates", function()
  for _, f in ipairs { "app.js", "style.css", "index.html", "vendor/preact-htm.js" } do
    local want = H.read("web/" .. f)
    local r = get("/" .. f, { ["accept-encoding"] = "gzip, deflate, br" })
    t.eq(r.headers["content-encoding"], "gzip", f)
    t.eq(r.headers.vary, "Accept-Encoding", f)
    t.ok(#r.body < #want, f .. ": smaller: " .. #r.body .. " < " .. #want)
    t.eq(gunzip(r.file), want, f .. ": decodes to the file")
    secure(r, f)
    local nm = get("/" .. f, { ["accept-encoding"] = "gzip", ["if-none-match"] = r.headers.etag })
    t.eq({ nm.status, nm.body }, { 304, "" }, f .. ": the gzip tag revalidates")
  end
  local q0 = get("/app.js", { ["accept-encoding"] = "gzip;q=0, identity" })
  t.eq({ q0.headers["content-encoding"], q0.body }, { nil, H.read("web/app.js") }, "gzip;q=0 is a refusal")
  local head = get("/app.js", { ["accept-encoding"] = "gzip" }, "HEAD")
  t.eq(head.status, 200, "HEAD")
  t.ok(not head.body:find("import", 1, true), "HEAD: no body (curl -I keeps only the head)")
  t.like(head.headers.etag or "", '^"%x+%-gz"$', "HEAD: the tag")
end)

t.test("--web DIR: a file changed on disk has a new tag, and the old tag gets the new bytes", function()
  os.execute("mkdir -p " .. H.quote(dir .. "/web") .. " " .. H.quote(dir .. "/state2"))
  H.write(dir .. "/web/index.html", "<!doctype html><title>one</title>")
  local dev = assert(H.serve_process(dir .. "/state2", nil, "--web " .. H.quote(dir .. "/web")))
  local one = get("/", nil, nil, dev.url)
  t.like(one.body, "one")
  H.write(dir .. "/web/index.html", "<!doctype html><title>two</title>")
  local two = get("/", { ["if-none-match"] = one.headers.etag }, nil, dev.url)
  dev.stop()
  t.eq(two.status, 200)
  t.like(two.body, "two")
  t.ok(two.headers.etag ~= one.headers.etag, "a new tag")
end)

local function tools(headers)
  local h = { authorization = "Bearer " .. TOKEN }
  for k, v in pairs(headers or {}) do h[k] = v end
  return get("/api/v1/tools", h)
end

t.test("GET /api/v1/tools: an ETag, 304 on a match, gzip that decodes to the same list", function()
  local r = tools()
  t.eq(r.status, 200)
  local list = json.decode(r.body)
  t.ok(list and #list.tools > 10, "the tools")
  t.like(r.headers.etag or "", '^"%x+"$')
  t.eq(r.headers["cache-control"], "private, no-cache", "kept by the browser only, asked again each time")
  t.eq(r.headers.vary, "Accept-Encoding")
  local nm = tools { ["if-none-match"] = r.headers.etag }
  t.eq({ nm.status, nm.body }, { 304, "" })
  secure(nm, "tools 304")
  local gz = tools { ["accept-encoding"] = "gzip" }
  t.eq(gz.headers["content-encoding"], "gzip")
  t.ok(#gz.body * 3 < #r.body, "at most a third: " .. #gz.body .. " of " .. #r.body)
  t.eq(gunzip(gz.file), r.body, "decodes to the list")
  t.eq(tools { ["accept-encoding"] = "gzip", ["if-none-match"] = gz.headers.etag }.status, 304)
  local anon = get("/api/v1/tools", { ["if-none-match"] = r.headers.etag })
  t.eq(anon.status, 401, "no token: 401 whatever the tag")
end)

t.test("a playbook reload that changes the tools changes the list's tag", function()
  local before = tools()
  H.write(playbooks .. "/diagnose_cache_probe.lua", [[
return tool { name = "diagnose_cache_probe", summary = "A probe for the tools list's tag", kind = "read",
  description = "Returns nothing.", params = {}, run = function() return { ok = true } end }]])
  local rl = H.sh(string.format("curl -s -X POST -H 'authorization: Bearer %s' %s/api/v1/playbooks/reload",
    TOKEN, BASE))
  t.eq(rl, 0)
  local after = tools { ["if-none-match"] = before.headers.etag }
  t.eq(after.status, 200, "the old tag no longer matches")
  t.ok(after.headers.etag ~= before.headers.etag, "a new tag")
  t.like(after.body, "diagnose_cache_probe", "the new list")
  t.eq(tools { ["if-none-match"] = after.headers.etag }.status, 304, "the new tag matches")
end)
