-- One client cannot lock the others out: a flood of MCP initialize calls
-- with one token never evicts another token's sessions, and a client
-- failing authentication from the shared loopback address is throttled
-- without refusing the requests that carry a valid token.
local t = require "hypd.tap"
local _
local auth = require "hypd.api.auth"
local http = require "hypd.http"
local json = require "hypd.json"
local mcp_http = require "hypd.api.mcp_http"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
require("hypd.tool.loader").load()

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 << 20 })
local base = "http://127.0.0.1:" .. srv.port
local TOK = {}
for _, n in ipairs { "flood", "victim", "third" } do TOK[n] = assert(auth.create { name = "dos-" .. n, scope = "read" }) end

local INIT = json.encode { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
  capabilities = json.object(), clientInfo = { name = "dos", version = "1" } } }

local function mcp(tok, body, session)
  local resp = assert(http.request { method = "POST", url = base .. "/mcp", body = body,
    headers = { authorization = "Bearer " .. tok, ["content-type"] = "application/json",
      accept = "application/json, text/event-stream", ["mcp-protocol-version"] = "2025-11-25",
      ["mcp-session-id"] = session } })
  return resp.status, resp.headers["mcp-session-id"], resp.body
end

local function live(tok, session)
  return (mcp(tok, '{"jsonrpc":"2.0","id":2,"method":"tools/list"}', session))
end

local victim

t.test("1,000 initialize calls with one token leave another token's sessions alive", function()
  _, victim = mcp(TOK.victim, INIT)
  t.eq(live(TOK.victim, victim), 200, "the victim's session works")
  local before = mcp_http.sessions_count()
  for _ = 1, 1000 do mcp(TOK.flood, INIT) end
  t.eq(live(TOK.victim, victim), 200, "the victim's session still works")
  t.ok(mcp_http.sessions_count() <= before + mcp_http.MAX_PER_TOKEN,
    "the flooding token holds at most " .. mcp_http.MAX_PER_TOKEN .. " sessions (" .. mcp_http.sessions_count() .. ")")
  local st, third = mcp(TOK.third, INIT)
  t.eq({ st, live(TOK.third, third) }, { 200, 200 }, "a third token can still start a session")
end)

t.test("a full session table refuses new sessions instead of evicting another token's", function()
  local keep = mcp_http.MAX_SESSIONS
  mcp_http.MAX_SESSIONS = mcp_http.sessions_count()
  local n = mcp_http.sessions_count()
  local st, _, body = mcp(TOK.victim, INIT)
  mcp_http.MAX_SESSIONS = keep
  t.eq(st, 503, "refused while full")
  t.ok(json.decode(body).error ~= nil, "a JSON-RPC error body")
  t.eq(mcp_http.sessions_count(), n, "no session was dropped")
  t.eq(live(TOK.victim, victim), 200, "the victim's earlier session still works")
end)

local function rest(tok)
  local resp = assert(http.request { method = "GET", url = base .. "/api/v1/tools",
    headers = { authorization = tok and ("Bearer " .. tok) or nil } })
  return resp.status
end

t.test("while a client fails authentication from loopback, valid tokens are still served", function()
  auth.reset()
  for _ = 1, auth.MAX_FAILURES + 5 do rest("hypd_wrong_token_value") end
  t.eq(rest("hypd_wrong_token_value"), 429, "further failed attempts are throttled")
  t.eq(rest(TOK.victim), 200, "a valid token from the same address is served")
  local st = mcp(TOK.victim, INIT)
  t.eq(st, 200, "and over MCP")
  auth.reset()
end)

t.cleanup(function()
  srv:stop()
end)
