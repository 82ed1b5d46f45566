-- tests/fuzz/lua_targets.lua: the Lua-level fuzz targets that
-- tests/fuzz/fuzz_lua.c runs inside a full engine (hypd_open: the embedded
-- Lua tree, a store in a scratch state directory, the sandbox's modules).
-- fuzz_lua_NAME runs targets.NAME(input, bad) for each input.
--
-- A target checks one function's contract, written above it. Whatever
-- the contract allows (nil, err; a coded error raised) the target takes;
-- bad(why) reports a broken contract, and any other Lua error escaping a
-- target is a finding too: fuzz_lua.c prints it with its traceback and
-- aborts, so libFuzzer keeps the input.
local json = require "hypd.json"

local T = {}

local function is_coded(e) return type(e) == "table" and type(e.code) == "string" and e.code ~= "" end

-- first line of s, and the rest
local function split1(s)
  local a, b = s:match("^([^\n]*)\n?(.*)$")
  return a or s, b or ""
end

-- hypd.api.rest query(raw) -> {name = value}: never raises; names are
-- non-empty strings, values strings; '+' and %XX decoded.
-- hypd.api.web clean(path) -> file | nil (the input as a request path):
-- never raises; a file is "index.html" or "/"-joined segments that each
-- start with a letter or digit and hold only letters, digits, '.', '-'
-- and '_' (so never "..", never a NUL or a backslash), at most 256 bytes.
T.rest_query = function(s, bad)
  local rest = require "hypd.api.rest"
  local web = require "hypd.api.web"
  local q = rest.query(s)
  if type(q) ~= "table" then bad("query returned " .. type(q)) end
  for k, v in pairs(q) do
    if type(k) ~= "string" or k == "" or type(v) ~= "string" then bad("query returned a non-string pair") end
  end
  for _, path in ipairs({ s, "/" .. s }) do
    local file = web.clean(path)
    if file ~= nil then
      if type(file) ~= "string" or #file > 256 then bad("clean returned a bad file") end
      for seg in (file .. "/"):gmatch("([^/]*)/") do
        if not seg:match("^[%w][%w._-]*$") or seg == ".." then bad("clean let a segment through: " .. seg) end
      end
    end
  end
end

-- hypd.api.mcp handle(session, text) -> reply | nil: a JSON-RPC reply
-- object (jsonrpc "2.0"; a result, or an error with an integer code and a
-- string message) that encodes as JSON; never raises. tools/call is left
-- out: it runs tools, which is not parsing.
T.mcp = function(s, bad)
  local mcp = require "hypd.api.mcp"
  local v = json.decode(s)
  if type(v) == "table" and not json.is_array(v) and v.method == "tools/call" then return end
  local session = mcp.session({ send = function() end })
  local ok, reply = pcall(mcp.handle, session, s)
  if not ok then bad("handle raised: " .. tostring(type(reply) == "table" and reply.message or reply)) end
  if reply == nil then return end
  if type(reply) ~= "table" or reply.jsonrpc ~= "2.0" then bad("a reply that is not JSON-RPC 2.0") end
  if reply.error ~= nil then
    if math.type(reply.error.code) ~= "integer" or type(reply.error.message) ~= "string" then
      bad("an error reply without an integer code and a message")
    end
  elseif reply.result == nil then
    bad("a reply with neither result nor error")
  end
  local eok, e = pcall(json.encode, reply)
  if not eok then bad("the reply does not encode: " .. tostring(is_coded(e) and e.message or e)) end
end

-- hypd.regex compile(src) -> re | nil, message (never raises);
-- re:test(s) -> boolean and re:match(s) -> nil | {captures} (never raise).
-- Input: the pattern's line, then the subject. Long subjects are cut to
-- 256 bytes so a backtracking engine's worst case stays inside one run.
T.regex = function(s, bad)
  local regex = require "hypd.regex"
  local src, subject = split1(s)
  local ok, re, err = pcall(regex.compile, src)
  if not ok then bad("compile raised: " .. tostring(re)) end
  if re == nil then
    if type(err) ~= "string" and not is_coded(err) then bad("compile failed without a message") end
    return
  end
  subject = subject:sub(1, 256)
  local tok, t = pcall(re.test, re, subject)
  if not tok then bad("test raised: " .. tostring(t)) end
  if type(t) ~= "boolean" then bad("test returned " .. type(t)) end
  if re.match then
    local mok, m = pcall(re.match, re, subject)
    if not mok then bad("match raised: " .. tostring(m)) end
    if (m ~= nil) ~= t then bad("match and test disagree") end
  end
end

-- sandbox.auth verify(req, protocol) -> principal | nil, err: err has a
-- string code and an integer status; never raises. Input lines: protocol,
-- method, path, query, then headers "name: value" (the body after an
-- empty line).
T.sandbox_sigv4 = function(s, bad)
  local auth = require "sandbox.auth"
  local lines = {}
  local head, body = s:match("^(.-)\n\n(.*)$")
  for l in ((head or s) .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  local protocols = { "query", "json", "rest-json", "rest-xml" }
  local protocol = protocols[(#(lines[1] or "") % 4) + 1]
  local req = { method = lines[2] or "GET", path = lines[3] or "/", query = lines[4] or "", headers = {},
    body = body or "" }
  for i = 5, #lines do
    local k, v = lines[i]:match("^([^:]+):%s*(.*)$")
    if k then req.headers[k:lower()] = v end
  end
  local ok, p, err = pcall(auth.verify, req, protocol)
  if not ok then bad("verify raised: " .. tostring(type(p) == "table" and p.message or p)) end
  if p == nil and (type(err) ~= "table" or type(err.code) ~= "string" or math.type(err.status) ~= "integer") then
    bad("verify failed without a code and a status")
  end
end

-- sandbox.k8s.auth token(bearer, cluster) -> principal | nil, why (a
-- string); never raises. The input is the presigned URL the token carries
-- ("{DATE}" becomes the current X-Amz-Date, so the fuzzer gets past the
-- clock); a first byte '!' sends it as is, as the token's text.
T.eks_token = function(s, bad)
  local core = require "hypd.core"
  local k8sauth = require "sandbox.k8s.auth"
  local sys = require "hypd.sys"
  local bearer
  if s:sub(1, 1) == "!" then
    bearer = s:sub(2)
  else
    local url = s:gsub("{DATE}", os.date("!%Y%m%dT%H%M%SZ", math.floor(core.now())))
    bearer = "Bearer k8s-aws-v1." .. sys.b64encode(url):gsub("+", "-"):gsub("/", "_"):gsub("=", "")
  end
  local ok, p, why = pcall(k8sauth.token, bearer, "fuzz")
  if not ok then bad("token raised: " .. tostring(type(p) == "table" and p.message or p)) end
  if p == nil and type(why) ~= "string" then bad("token failed without a reason") end
end

-- sandbox.k8s.protobuf decode(body) -> object | nil, why (a string);
-- unknown(body) likewise; never raise. The "k8s\0" envelope is added when
-- the input lacks it (so mutations reach the messages).
T.k8s_protobuf = function(s, bad)
  local pb = require "sandbox.k8s.protobuf"
  if s:sub(1, 4) ~= "k8s\0" then s = "k8s\0" .. s end
  for _, f in ipairs({ pb.unknown, pb.decode }) do
    local ok, v, why = pcall(f, s)
    if not ok then bad("raised: " .. tostring(v)) end
    if v == nil and type(why) ~= "string" then bad("failed without a reason") end
    if v ~= nil and type(v) ~= "table" then bad("returned " .. type(v)) end
  end
end

-- the CLI's key=value and key:=json words (hypd call, through
-- hypd.cli._registry args_from, read by a schema with hypd.tool.registry coerce):
-- args | nil, message (a string); never raise. One word per input line.
T.cli_words = function(s, bad)
  local reg = require "hypd.cli._registry"
  local words = {}
  for l in (s .. "\n"):gmatch("([^\n]*)\n") do words[#words + 1] = l end
  local params = {
    n = { type = "integer" }, x = { type = "number" }, b = { type = "boolean" },
    l = { type = "array", items = { type = "string" } }, o = { type = "object" },
    u = { type = { "integer", "string" } }, e = { type = "string", enum = { "a", "b" } },
  }
  local ok, args, msg = pcall(reg.args_from, params, words)
  if not ok then bad("args_from raised: " .. tostring(type(args) == "table" and args.message or args)) end
  if args == nil and type(msg) ~= "string" then bad("args_from failed without a message") end
end

return T
