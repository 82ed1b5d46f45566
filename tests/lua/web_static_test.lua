-- The web UI's files as hypd serve answers them: the compiled-in web/
-- tree (and --web DIR), with the security headers on every answer; unknown
-- paths and every traversal form get 404 and never a file outside web/;
-- the one-time sign-in code is exchanged once for a token of its scope.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local http = require "hypd.http"
local json = require "hypd.json"
local rest = require "hypd.api.rest"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local web = require "hypd.api.web"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 * rest.MAX_BODY })
local BASE = "http://127.0.0.1:" .. srv.port

local function get(path, headers)
  return assert(http.request { url = BASE .. path, headers = headers })
end

local function secure(r, what)
  t.eq(r.headers["x-content-type-options"], "nosniff", what .. ": nosniff")
  t.like(r.headers["content-security-policy"] or "", "frame%-ancestors 'none'", what .. ": no framing")
end

t.test("/ is the UI's page, with a strict Content-Security-Policy, revalidated at each use", function()
  local r = get("/")
  t.eq(r.status, 200)
  t.like(r.headers["content-type"], "^text/html")
  t.like(r.body, '<script type="module" src="/app.js"></script>')
  secure(r, "/")
  local csp = r.headers["content-security-policy"]
  t.like(csp, "script%-src 'self'")
  t.ok(not csp:find("unsafe", 1, true), "no unsafe-inline or unsafe-eval: " .. csp)
  t.ok(not csp:find("https?:"), "no remote origin")
  t.eq(r.headers["cache-control"], "no-cache")
end)

t.test("the UI's modules and styles are served with their types, the same bytes as web/", function()
  local r = get("/app.js")
  t.eq(r.status, 200)
  t.like(r.headers["content-type"], "^text/javascript")
  t.eq(r.body, H.read("web/app.js"))
  secure(r, "/app.js")
  r = get("/style.css")
  t.like(r.headers["content-type"], "^text/css")
end)

t.test("unknown paths and traversal attempts get 404 with the headers, never a file outside web/", function()
  for _, path in ipairs { "/nope.js", "/lua/hypd/api/gateway.lua", "/../lua/hypd/api/gateway.lua",
    "/%2e%2e/lua/hypd/api/gateway.lua",
    "/%2E%2E%2Flua%2Fhypd%2Fapi%2Fgateway.lua", "/..%2f..%2fMakefile", "/web/../Makefile", "//etc/passwd", "/./app.js",
    "/app.js/", "/%00app.js", "/.git/config", "/app.js%00.html", "/..\\lua\\hypd\\api\\gateway.lua", "/hypd.db",
    "/Makefile" } do
    local r = get(path)
    t.eq(r.status, 404, path)
    t.ok(not r.body:find("local M = {}", 1, true) and not r.body:find("[core]", 1, true), path .. ": no file")
    secure(r, path)
  end
  t.eq(web.clean("/lib/x.js"), "lib/x.js")
  t.eq(web.clean("/lib/../x.js"), nil)
end)

t.test("API answers carry the headers too", function()
  local r = get("/api/v1/health")
  t.eq(r.status, 200)
  secure(r, "/api/v1/health")
  r = get("/api/v1/tools")
  t.eq(r.status, 401)
  secure(r, "401")
end)

t.test("--web DIR serves a directory instead, still only plain names under it", function()
  local dir = H.tmpdir()
  os.execute("mkdir -p " .. dir .. "/web/lib && echo secret > " .. dir .. "/outside.txt")
  H.write(dir .. "/web/index.html", "<!doctype html><title>dev</title>")
  H.write(dir .. "/web/lib/x.js", "export const x = 1;\n")
  os.execute("ln -s " .. dir .. "/outside.txt " .. dir .. "/web/link.txt")
  web.dir = dir .. "/web"
  t.cleanup(function() web.dir = nil end)
  t.like(get("/").body, "<title>dev</title>")
  t.eq(get("/lib/x.js").body, "export const x = 1;\n")
  t.eq(get("/lib").status, 404, "a directory is no file")
  t.eq(get("/../outside.txt").status, 404)
  web.dir = nil
end)

t.test("a sign-in code is exchanged once for a token of its scope; a wrong or used one is refused", function()
  local code = auth.login_code { scope = "operate" }
  local function login(c)
    local r = assert(http.request { method = "POST", url = BASE .. "/api/v1/auth/login",
      headers = { ["content-type"] = "application/json" }, body = json.encode { code = c } })
    return r.status, json.decode(r.body)
  end
  local status, b = login(code)
  t.eq(status, 200, json.encode(b))
  t.like(b.token, "^hypd_")
  t.eq(b.scope, "operate")
  t.like(b.name, "^web%-%x+$")
  local r = get("/api/v1/auth/whoami", { authorization = "Bearer " .. b.token })
  t.eq(json.decode(r.body), { name = b.name, scope = "operate", id = json.decode(r.body).id })
  status, b = login(code)
  t.eq(status, 401, "used once")
  t.like(b.error.message, "not valid")
  t.ok(not r.body:find(code, 1, true))
  status = login("nope")
  t.eq(status, 401)
  local expired = auth.login_code { scope = "read", ttl = -1 }
  t.eq((login(expired)), 401, "expired")
  auth.reset()
end)

t.test("the server's start prints the UI's address and a sign-in link", function()
  local out = {}
  local sink = { write = function(self, ...) for _, x in ipairs { ... } do out[#out + 1] = tostring(x) end
    return self end, flush = function() end }
  local info = assert(serve.start { listen = "127.0.0.1:0", out = sink })
  local text = table.concat(out)
  t.like(text, "web UI  http://127%.0%.0%.1:%d+/")
  local code = text:match("/#login=([%w_-]+)")
  t.ok(code, text)
  local r = assert(http.request { method = "POST", url = info.url .. "/api/v1/auth/login",
    headers = { ["content-type"] = "application/json" }, body = json.encode { code = code } })
  t.eq(r.status, 200, r.body)
  info.srv:stop()
  t.ok(srv.port > 0)
end)
