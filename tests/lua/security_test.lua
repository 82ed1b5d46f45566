-- The front doors refuse what they must, with the right status, and change
-- nothing: no token, a wrong token, a read token on a mutating tool, an
-- operate token on a destructive one, a forged Origin on /mcp, an oversized
-- body, malformed JSON, JSON-RPC batches of garbage. Then a brief seeded
-- fuzz of the REST and JSON-RPC input: never a 500, never a crash.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local http = require "hypd.http"
local json = require "hypd.json"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local store = require "hypd.store"
local tool = require "hypd.tool.registry"
require("hypd.tool.loader").load()

local destroyed = 0
tool.define { name = "cluster_test_teardown", summary = "A destructive test tool", kind = "destructive",
  status_tool = "cluster_list",
  description = "Counts how often it ran; only an admin token may run it.", params = {},
  run = function() destroyed = destroyed + 1; return { destroyed = destroyed } end }

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 << 20 })
local base = "http://127.0.0.1:" .. srv.port
local TOK = {}
for _, s in ipairs { "read", "operate", "admin" } do TOK[s] = assert(auth.create { name = "sec-" .. s, scope = s }) end

local function snapshot()
  local ops = #(store.op_list { limit = 100000 } or {})
  local evs = #(store.events(0, 1000000) or {})
  return ops .. "/" .. evs .. "/" .. destroyed
end

local function post(path, body, headers)
  local h = { ["content-type"] = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  if h.authorization == false then h.authorization = nil end
  local resp = assert(http.request { method = "POST", url = base .. path, headers = h, body = body })
  return resp.status, json.decode(resp.body) or resp.body, resp
end

local function bearer(scope) return { authorization = "Bearer " .. (TOK[scope] or scope) } end

t.test("REST refusals: no token 401, wrong token 401, read on mutating 403, operate on destructive 403", function()
  auth.reset()
  local before = snapshot()
  local st, body, resp = post("/api/v1/tools/operation_cancel", '{"operation_id":"op-0000000000000000"}')
  t.eq(st, 401)
  t.eq(body.error.code, "UNAUTHORIZED")
  t.like(resp.headers["www-authenticate"], "^Bearer")
  t.eq((post("/api/v1/tools/operation_list", "{}", bearer("hypd_nottherightone"))), 401)
  st, body = post("/api/v1/tools/operation_cancel", '{"operation_id":"op-0000000000000000"}', bearer("read"))
  t.eq(st, 403)
  t.eq(body.error.code, "FORBIDDEN")
  st = post("/api/v1/tools/cluster_test_teardown", "{}", bearer("operate"))
  t.eq(st, 403)
  t.eq(snapshot(), before, "nothing changed")
  st, body = post("/api/v1/tools/cluster_test_teardown", "{}", bearer("admin"))
  t.eq({ st, body.destroyed }, { 200, 1 }, "an admin token may")
end)

t.test("REST refusals of the input: oversized 413, malformed JSON 400, not an object 400, wrong type 415", function()
  auth.reset()
  local before = snapshot()
  t.eq((post("/api/v1/tools/operation_list", '{"limit": ' .. string.rep(" ", 1100000) .. '3}', bearer("read"))), 413)
  local st, body = post("/api/v1/tools/operation_list", '{"limit": 3', bearer("read"))
  t.eq({ st, body.error.code }, { 400, "VALIDATION" })
  t.eq((post("/api/v1/tools/operation_list", "[1,2]", bearer("read"))), 400)
  t.eq((post("/api/v1/tools/operation_list", "{}", { authorization = "Bearer " .. TOK.read,
    ["content-type"] = "text/plain" })), 415)
  t.eq(snapshot(), before, "nothing changed")
end)

local function mcp(body, headers)
  local h = { accept = "application/json, text/event-stream", ["mcp-protocol-version"] = "2025-11-25" }
  for k, v in pairs(bearer("admin")) do h[k] = v end
  for k, v in pairs(headers or {}) do h[k] = v end
  return post("/mcp", body, h)
end

t.test("MCP refusals: forged Origin 403, no token 401, garbage batches are JSON-RPC errors", function()
  auth.reset()
  local init = json.encode { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
    capabilities = json.object(), clientInfo = { name = "sec", version = "1" } } }
  local before = snapshot()
  t.eq((mcp(init, { origin = "http://evil.example.com" })), 403)
  t.eq((mcp(init, { authorization = false })), 401)
  t.eq((mcp(init, { ["mcp-protocol-version"] = "1999-01-01" })), 400)
  local st, body = mcp('[{"jsonrpc":"2.0","id":1,"method":"tools/list"}, 7, "x", null]')
  t.eq(st, 400)
  t.eq(body.error.code, -32600)
  st, body = mcp("{not json")
  t.eq({ st, body.error.code }, { 400, -32700 })
  t.eq(snapshot(), before, "nothing changed")
end)

t.test("a brief seeded fuzz of REST and JSON-RPC input: no 500, the server stays up", function()
  auth.reset()
  local seed = 20261129
  local function rand(n)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n + 1
  end
  local pieces = { "{", "}", "[", "]", '"', ":", ",", "null", "true", "1e999", "-0", "\"jsonrpc\"", "\"2.0\"",
    "\"method\"", "\"tools/call\"", "\"params\"", "\"name\"", "\"operation_list\"", "\"arguments\"", "\"limit\"",
    "\\u0000", "\\ud800", "\255", "9223372036854775808", "{\"a\":{\"a\":{\"a\":{}}}}", " ", "\"id\"", "3" }
  local ok_status = { [200] = true, [202] = true, [400] = true, [404] = true, [406] = true, [413] = true,
    [415] = true }
  local bad = {}
  for i = 1, 300 do
    local parts = {}
    for _ = 1, rand(12) do parts[#parts + 1] = pieces[rand(#pieces)] end
    local body = table.concat(parts)
    local st
    if i % 2 == 0 then
      st = post("/api/v1/tools/operation_list", body, bearer("admin"))
    else
      st = mcp(body)
    end
    if not ok_status[st] then bad[#bad + 1] = st .. " for " .. body end
  end
  t.eq(bad, {}, "every answer is a client error or a success")
  local resp = assert(http.request { url = base .. "/api/v1/health" })
  t.eq(resp.status, 200, "still up")
end)

t.cleanup(function()
  srv:stop()
end)
