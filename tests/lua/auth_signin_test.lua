-- The web UI's sign-in: the token a sign-in link gives expires (12 hours,
-- shown by hypd token list; refused after with a 401 saying so), Sign out
-- revokes it (POST /api/v1/auth/logout) and keeps a created token, and a
-- valid sign-in code works from an address throttled for failed attempts.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local auth = require "hypd.api.auth"
local config = require "hypd.config"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local store = require "hypd.store"
require("hypd.tool.loader").load()

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 << 20 })
local base = "http://127.0.0.1:" .. srv.port

local function request(method, path, tok, body)
  local resp = assert(http.request { method = method, url = base .. "/api/v1" .. path, body = body,
    headers = { authorization = tok and "Bearer " .. tok, ["content-type"] = body and "application/json" } })
  return resp.status, json.decode(resp.body) or {}
end

local function sign_in()
  local st, v = request("POST", "/auth/login", nil, json.encode { code = auth.login_code { scope = "admin" } })
  return st, v
end

local function record(name)
  for key, rec in pairs(assert(store.list(auth.PREFIX))) do
    if rec.name == name then return key:sub(#auth.PREFIX + 1), rec end
  end
end

t.test("a sign-in's token expires after 12 hours, and hypd token list says when", function()
  local st, v = sign_in()
  t.eq(st, 200, "signed in")
  t.like(v.name or "", "^web%-%x+$", "a web- token")
  local _, rec = record(v.name)
  t.ok(rec and type(rec.expires_at) == "number" and math.abs(rec.expires_at - (core.wall() + 12 * 3600)) < 60,
    "it expires 12 hours from now")
  local created = assert(auth.create { name = "kept-forever", scope = "read" })
  t.ok(created, "a created token")
  local rc, out, err = H.run_hypd({ HYPD_STATE = config.state_dir }, "token", "list")
  t.eq(rc, 0, err)
  t.like(out, "^ID +NAME +SCOPE +CREATED +LAST USED +EXPIRES\n", "an EXPIRES column")
  t.like(out, "\n%x+ +" .. v.name:gsub("%-", "%%-") .. " +admin +%S+ +%S+ +%d%d%d%d%-%d%d%-%d%dT", "the sign-in's expiry")
  t.like(out, "\n%x+ +kept%-forever +read +%S+ +%S+ +never\n", "a created token never expires")
end)

t.test("an expired sign-in token is refused with a 401 that says it expired", function()
  local _, v = sign_in()
  t.eq((request("GET", "/auth/whoami", v.token)), 200, "it works")
  local key, rec = record(v.name)
  rec.expires_at = core.wall() - 1
  assert(store.put(auth.PREFIX .. key, rec))
  local st, e = request("GET", "/auth/whoami", v.token)
  t.eq({ st, e.error and e.error.code }, { 401, "UNAUTHORIZED" }, "refused")
  t.like(e.error and e.error.message or "", "expired at %d%d%d%d%-", "saying it expired")
  auth.reset()
end)

t.test("Sign out revokes a sign-in's token and keeps a created one", function()
  local _, v = sign_in()
  local st, out = request("POST", "/auth/logout", v.token)
  t.eq({ st, out.name, out.revoked }, { 200, v.name, true }, "signed out")
  t.eq((request("GET", "/auth/whoami", v.token)), 401, "the token no longer works")
  t.eq(record(v.name), nil, "and is gone from the store")
  local tok = assert(auth.create { name = "pasted", scope = "read" })
  st, out = request("POST", "/auth/logout", tok)
  t.eq({ st, out.revoked }, { 200, false }, "a created token is not revoked by Sign out")
  t.eq((request("GET", "/auth/whoami", tok)), 200, "and still works")
  t.eq((request("POST", "/auth/logout")), 401, "Sign out needs a token")
  t.like(H.read("web/app.js") or "", "await logout%(%)", "the UI's Sign out button calls it")
  auth.reset()
end)

t.test("a valid sign-in code works from a throttled address; a wrong one gets 429", function()
  auth.reset()
  for _ = 1, auth.MAX_FAILURES do request("GET", "/auth/whoami", "hypd_wrong") end
  t.eq((request("GET", "/auth/whoami", "hypd_wrong")), 429, "the address is throttled")
  local st, v = sign_in()
  t.eq({ st, type(v.token) }, { 200, "string" }, "the valid code is served")
  st = request("POST", "/auth/login", nil, json.encode { code = "not-a-code" })
  t.eq(st, 429, "a wrong code is throttled")
  auth.reset()
end)

t.cleanup(function() srv:stop() end)
