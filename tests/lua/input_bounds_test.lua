-- Input that used to slip past validation is refused, naming the field and
-- the rule, the same way through REST, MCP over HTTP, MCP over stdio and
-- `hypd call`: numbers that are not 64-bit integers, non-finite numbers,
-- bytes that are not UTF-8 (in values and in keys), JSON-RPC ids that are
-- neither strings nor integers. No answer echoes input at length or carries
-- bytes that make it invalid JSON.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local auth = require "hypd.api.auth"
local http = require "hypd.http"
local json = require "hypd.json"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local tool = require "hypd.tool.registry"
require("hypd.tool.loader").load()

local TOOL = [[
return tool {
  name = "diagnose_count", summary = "Echo a count", kind = "read",
  description = "A read tool with a required integer with a range, a number and a string.",
  params = { count = { type = "integer", required = true, minimum = 1, maximum = 10 },
    ratio = { type = "number" }, label = { type = "string" } },
  run = function(_, p) return { count = p.count, ratio = p.ratio, label = p.label } end,
}]]
local dir = H.tmpdir()
os.execute("mkdir -p " .. dir .. "/playbooks")
H.write(dir .. "/playbooks/count.lua", TOOL)
tool.define(load(TOOL, "=count", "t", { tool = function(def) return def end })())

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 << 20 })
local base = "http://127.0.0.1:" .. srv.port
local token = assert(auth.create { name = "bounds", scope = "admin" })

local function request(method, path, body)
  local resp = assert(http.request { method = method, url = base .. path, body = body,
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json",
      accept = "application/json, text/event-stream", ["mcp-protocol-version"] = "2025-11-25" } })
  return resp.status, resp.body, resp
end

-- a clean answer: valid JSON, valid UTF-8, short
local function clean(body, what)
  t.ok(utf8.len(body) ~= nil, what .. ": the answer is UTF-8")
  t.ok(json.decode(body) ~= nil, what .. ": the answer is JSON")
  t.ok(#body < 1500, what .. ": the answer is short (" .. #body .. " bytes)")
end

local function rest_call(body) return request("POST", "/api/v1/tools/diagnose_count", body) end

local BAD_INTEGERS = { "1e400", "-1e400", "123456789012345678901234567890", "9223372036854775808", "2.5" }

t.test("REST: a number that is not a 64-bit integer fails validation for an integer, naming it", function()
  for _, n in ipairs(BAD_INTEGERS) do
    local st, body = rest_call('{"count": ' .. n .. '}')
    local v = json.decode(body)
    t.eq({ st, v.error.code, v.error.fields[1].field, v.error.fields[1].rule }, { 400, "VALIDATION", "count", "type" },
      "count = " .. n)
  end
  local st, body = request("POST", "/api/v1/tools/operation_list", '{"limit": 1e400}')
  t.eq({ st, json.decode(body).error.fields[1].field }, { 400, "limit" }, "operation_list limit = 1e400")
  st, body = rest_call('{"count": 3}')
  t.eq({ st, json.decode(body).count }, { 200, 3 }, "a good integer still works")
  st, body = rest_call('{"count": 3.0}')
  t.eq({ st, math.type(json.decode(body).count) }, { 200, "integer" }, "3.0 is the integer 3")
end)

t.test("REST: a non-finite number fails validation for a number parameter", function()
  for _, n in ipairs { "1e400", "-1e400" } do
    local st, body = rest_call('{"count": 2, "ratio": ' .. n .. '}')
    local v = json.decode(body)
    t.eq({ st, v.error.fields[1].field, v.error.fields[1].rule }, { 400, "ratio", "type" }, "ratio = " .. n)
  end
  t.eq((rest_call('{"count": 2, "ratio": 1e300}')), 200, "a large finite number is fine")
end)

local BAD_UTF8 = {
  { "a lone 0xFF", '{"count": 1, "label": "a\255b"}' },
  { "an overlong slash", '{"count": 1, "label": "\192\175"}' },
  { "an encoded surrogate", '{"count": 1, "label": "\237\160\128"}' },
  { "a truncated sequence", '{"count": 1, "label": "\226\130"}' },
  { "a code point above U+10FFFF", '{"count": 1, "label": "\244\144\128\128"}' },
  { "a key with 0xFF", '{"count": 1, "\255": 1}' },
}

t.test("REST: invalid UTF-8 in values and keys is a 400 that does not echo the bytes", function()
  for _, c in ipairs(BAD_UTF8) do
    local st, body = rest_call(c[2])
    t.eq({ st, (json.decode(body) or {}).error and json.decode(body).error.code }, { 400, "VALIDATION" }, c[1])
    clean(body, c[1])
  end
  local st, body = rest_call('{"count": 1, "label": "é€😀"}')
  t.eq({ st, json.decode(body).label }, { 200, "é€😀" }, "real UTF-8 passes")
end)

t.test("REST: identifiers are not echoed at length", function()
  local long = "op-" .. string.rep("a", 10000)
  local st, body = request("GET", "/api/v1/operations/" .. long)
  t.eq(st, 404, "an operation id that is not one")
  clean(body, "operation id")
  st, body = request("POST", "/api/v1/tools/operation_get", json.encode { operation_id = long })
  t.eq(st, 400)
  clean(body, "operation_get with a long id")
  st, body = request("GET", "/api/v1/tools/" .. string.rep("x", 5000))
  t.eq(st, 404)
  clean(body, "a long tool name")
  st, body = rest_call('{"count": 1, "' .. string.rep("k", 5000) .. '": 1}')
  t.eq(st, 400)
  clean(body, "a long unknown field")
  st, body = request("GET", "/" .. string.rep("p", 5000))
  t.eq(st, 404)
  clean(body, "a long path")
end)

-- MCP over HTTP ---------------------------------------------------------------------

local session
local function mcp(msg)
  local resp = assert(http.request { method = "POST", url = base .. "/mcp", body = msg,
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json",
      accept = "application/json, text/event-stream", ["mcp-protocol-version"] = "2025-11-25",
      ["mcp-session-id"] = session } })
  session = session or resp.headers["mcp-session-id"]
  return resp.status, resp.body
end

mcp(json.encode { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
  capabilities = json.object(), clientInfo = { name = "bounds", version = "1" } } })
mcp('{"jsonrpc":"2.0","method":"notifications/initialized"}')

local function tools_call(args_text)
  return mcp('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"diagnose_count","arguments":' ..
    args_text .. '}}')
end

t.test("MCP over HTTP: bad integers and non-finite numbers are tool errors naming the field", function()
  for _, n in ipairs(BAD_INTEGERS) do
    local st, body = tools_call('{"count": ' .. n .. '}')
    local v = json.decode(body)
    t.eq({ st, v.result and v.result.isError }, { 200, true }, "count = " .. n)
    t.like(v.result.content[1].text, "count", "the error names count")
  end
  local _, body = tools_call('{"count": 1, "ratio": 1e400}')
  t.like(json.decode(body).result.content[1].text, "ratio")
end)

t.test("MCP over HTTP: invalid UTF-8 is a JSON-RPC parse error, valid JSON, no echo", function()
  for _, c in ipairs(BAD_UTF8) do
    local st, body = tools_call(c[2])
    t.eq({ st, (json.decode(body) or { error = {} }).error.code }, { 400, -32700 }, c[1])
    clean(body, c[1])
  end
end)

t.test("MCP over HTTP: an id that is not a string or an integer is an invalid request, never a 500", function()
  for _, id in ipairs { "1e400", "-1e400", "1.5", "true", "null", "[1]", "{}" } do
    local st, body = mcp('{"jsonrpc":"2.0","id":' .. id .. ',"method":"ping"}')
    t.eq({ st, (json.decode(body) or { error = {} }).error.code }, { 400, -32600 }, "id " .. id)
    clean(body, "id " .. id)
  end
  local st, body = mcp('{"jsonrpc":"2.0","id":"x","method":"ping"}')
  t.eq({ st, json.decode(body).id }, { 200, "x" }, "a string id still works")
end)

-- the command line and MCP over stdio -------------------------------------------------

local function hypd(...)
  return H.run_hypd({ HYPD_STATE = dir .. "/state" }, "--playbooks", dir .. "/playbooks", ...)
end

t.test("hypd call: bad integers, non-finite numbers and invalid UTF-8 fail naming the field", function()
  for _, n in ipairs(BAD_INTEGERS) do
    local rc, _, err = hypd("call", "diagnose_count", "count:=" .. n)
    t.eq(rc, 1, "count:=" .. n)
    t.like(err, "count: must be an integer")
  end
  local rc, _, err = hypd("call", "diagnose_count", "--json", '{"count": 1, "ratio": -1e400}')
  t.eq(rc, 1)
  t.like(err, "ratio: must be a finite number")
  rc, _, err = hypd("call", "diagnose_count", "count=1", "label=a\255b")
  t.eq(rc, 1, "a key=value word that is not UTF-8")
  t.like(err, "label: must be UTF%-8 text")
  t.ok(not err:find("\255", 1, true), "the bytes are not echoed")
  rc, _, err = hypd("call", "diagnose_count", "--json", '{"count": 1, "label": "\237\160\128"}')
  t.eq(rc ~= 0, true, "--json with an encoded surrogate")
  t.ok(not err:find("\237\160\128", 1, true), "the bytes are not echoed")
end)

t.test("MCP over stdio: invalid UTF-8 and bad ids get JSON-RPC errors; bad integers are tool errors", function()
  local lines = {
    json.encode { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
      capabilities = json.object(), clientInfo = { name = "bounds", version = "1" } } },
    '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"diagnose_count","arguments":{"count":1,' ..
      '"label":"\255"}}}',
    '{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"diagnose_count","arguments":{"count":1e400}}}',
  }
  H.write(dir .. "/in.jsonl", table.concat(lines, "\n") .. "\n")
  local rc, out = H.sh("(" .. H.quote(H.hypd) .. " --state " .. H.quote(dir .. "/state") .. " --playbooks " ..
    H.quote(dir .. "/playbooks") .. " mcp <" .. H.quote(dir .. "/in.jsonl") .. ")")
  t.eq(rc, 0)
  local replies = {}
  for line in out:gmatch("[^\n]+") do
    t.ok(utf8.len(line) ~= nil, "every line is UTF-8")
    local v = json.decode(line)
    t.ok(v ~= nil, "every line is JSON")
    if v and v.id ~= nil then replies[#replies + 1] = v elseif v and v.error then replies[#replies + 1] = v end
  end
  local codes = {}
  for _, r in ipairs(replies) do
    codes[#codes + 1] = r.error and r.error.code or (r.result and r.result.isError and "isError") or "ok"
  end
  t.eq(codes, { "ok", -32700, -32600, "isError" }, "initialize, parse error, invalid request, tool error")
end)

t.cleanup(function()
  srv:stop()
  os.execute("rm -rf " .. H.quote(dir))
end)
