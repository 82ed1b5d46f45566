-- Pattern matching takes time linear in the subject and no stack per
-- character: a hostile string through a schema's pattern answers 400
-- VALIDATION at once (it used to be an HTTP 500 "stack overflow" or a
-- server stalled for seconds), a string is bounded before any pattern
-- reads it, and every pattern a built-in tool uses runs over 1 MB.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local auth = require "hypd.api.auth"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local regex = require "hypd.regex"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local tool = require "hypd.tool.registry"
require("hypd.tool.loader").load()

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 << 20 })
local base = "http://127.0.0.1:" .. srv.port
local READ = assert(auth.create { name = "regex-read", scope = "read" })
local OPERATE = assert(auth.create { name = "regex-operate", scope = "operate" })

local function call(tok, name, args)
  local t0 = core.mono()
  local resp = assert(http.request { method = "POST", url = base .. "/api/v1/tools/" .. name,
    body = json.encode(args), timeout = 30,
    headers = { authorization = "Bearer " .. tok, ["content-type"] = "application/json" } })
  return resp.status, json.decode(resp.body) or {}, core.mono() - t0
end

t.test("a 100 KB namespace for inference_list (a read token) is a 400 naming the field, at once", function()
  local st, v, took = call(READ, "inference_list", { namespace = "us" .. ("-a"):rep(50000) .. "-!" })
  local f = v.error and v.error.fields and v.error.fields[1] or {}
  t.eq({ st, v.error and v.error.code, f.field, f.rule }, { 400, "VALIDATION", "namespace", "max_length" },
    "refused for its length, before the pattern")
  t.ok(took < 2, "answered in " .. string.format("%.2f", took) .. " s")
end)

t.test("an 80 KB image is a 400 naming the field, at once", function()
  local st, v, took = call(OPERATE, "inference_deploy_container",
    { name = "big", image = ("a/"):rep(40 * 1024) .. " ", instance_type = "ml.g5.xlarge" })
  local rules = {}
  for _, f in ipairs(v.error and v.error.fields or {}) do if f.field == "image" then rules[#rules + 1] = f.rule end end
  t.eq({ st, v.error and v.error.code, rules }, { 400, "VALIDATION", { "max_length" } },
    "image refused for its length only (the pattern did not run)")
  t.ok(took < 2, "answered in " .. string.format("%.2f", took) .. " s")
end)

t.test("a string with a pattern and no max_length is bounded by tool.MAX_STRING before the pattern", function()
  local def = { name = "diagnose_bounded", kind = "read", params = { v = { type = "string", pattern = "^a+$" } } }
  local _, err = tool.validate(def, { v = ("a"):rep(tool.MAX_STRING + 1) })
  t.eq(err and { err.code, #err.fields, err.fields[1].rule } or {}, { "VALIDATION", 1, "max_length" },
    "one field error: the length")
  t.ok(err and err.message:find(tostring(tool.MAX_STRING), 1, true), "the message gives the bound")
  t.ok(tool.validate(def, { v = ("a"):rep(tool.MAX_STRING) }), "a value at the bound is fine")
end)

-- every pattern in a built-in tool's parameters (nested ones too)
local function patterns()
  local seen, out = {}, {}
  local function walk(spec)
    if spec.pattern and not seen[spec.pattern] then seen[spec.pattern] = true; out[#out + 1] = spec.pattern end
    if spec.items then walk(spec.items) end
    for _, s in pairs(spec.properties or {}) do walk(s) end
  end
  for _, d in ipairs(tool.list()) do
    for _, s in pairs((tool.get(d.name or d) or {}).params or {}) do walk(s) end
  end
  table.sort(out)
  return out
end

t.test("every pattern a built-in tool uses matches a 1 MB string without an error", function()
  local list = patterns()
  t.ok(#list >= 20, #list .. " distinct patterns")
  -- letters, digits, dashes and dots, then a byte no pattern ends on
  local MB = ("a-1.b"):rep(1024 * 1024 // 5) .. "!"
  local bad = {}
  for _, p in ipairs(list) do
    local ok, res = pcall(function() return assert(regex.compile(p)):test(MB) end)
    if not ok or type(res) ~= "boolean" then bad[#bad + 1] = p .. ": " .. tostring(res) end
  end
  t.eq(bad, {}, "no pattern raised")
end)

t.test("the matcher is linear where a backtracking one is exponential or recursive", function()
  local t0 = core.mono()
  t.eq(assert(regex.compile("^(a|a)*$")):test(("a"):rep(40) .. "!"), false, "(a|a)* over 40 a's and a '!'")
  t.eq(assert(regex.compile("^(a+)+$")):test(("a"):rep(200000) .. "!"), false, "(a+)+ over 200,000 a's")
  t.eq(assert(regex.compile("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")):test(("-a"):rep(500000)), false,
    "a DNS name pattern over 1 MB")
  t.ok(core.mono() - t0 < 10, string.format("all in %.2f s", core.mono() - t0))
  local m = assert(regex.compile("^(x+)(y*)$")):match(("x"):rep(100000) .. "yy")
  t.eq(m and { #m[1], m[2] }, { 100000, "yy" }, "captures over a long subject")
end)

t.test("the language the matcher accepts is the one it did", function()
  local cases = {
    { "^[a-z][a-z0-9-]{1,3}$", "ab-1", true }, { "^[a-z][a-z0-9-]{1,3}$", "ab-12", false },
    { "b", "abc", true }, { "^$", "", true }, { "^$", "\n", false }, { "a.c", "a\nc", false },
    { "^(ab|cd)+$", "abcdab", true }, { "^(ab|cd)+$", "abc", false }, { "^a{2,}$", "a", false },
    { "^a{2,}$", "aaaa", true }, { "^[^0-9]+$", "abc", true }, { "^[^0-9]+$", "a1", false },
    { "^\\d{3}\\.\\w\\s$", "123.x ", true }, { "x$|^y", "ay", false }, { "x$|^y", "yb", true },
    { "^(a*)*$", "aaa", true }, { "^(|a)b$", "ab", true }, { "^a?$", "", true },
  }
  for _, c in ipairs(cases) do
    t.eq(assert(regex.compile(c[1])):test(c[2]), c[3], "/" .. c[1] .. "/ on " .. string.format("%q", c[2]))
  end
  local two = assert(regex.compile("loss=(\\d+(\\.\\d+)?)|(nan)"))
  t.eq(two:match("x loss=3.5 y"), { "3.5", ".5", false }, "groups of the first alternative")
  t.eq(two:match("nan"), { false, false, "nan" }, "groups of the second")
  t.eq(assert(regex.compile("(a+)(a*)")):match("aaa"), { "aaa", "" }, "greedy, leftmost")
  -- as ECMAScript (checked against node's RegExp on 30,000 random cases):
  -- an optional iteration that matches nothing fails, a required one may
  t.eq(assert(regex.compile("(a*)?\\d*$")):match("--"), { false }, "an empty optional iteration leaves its group out")
  t.eq(assert(regex.compile("^(a|b)?(a*){2}")):match(""), { false, "" }, "a required iteration may be empty")
  t.eq(select(2, regex.compile("^a{1,30000}$")) ~= nil, true, "a pattern past the program bound is refused")
  -- a start that dies at once (here before the end) does not end the
  -- search: the fuzzer's finding, where test was true and match nil
  t.eq(assert(regex.compile("()$")):match("$\n:aa"), { "" }, "a match at the end after starts that die at once")
  t.eq(assert(regex.compile("(b)$")):match("ab"), { "b" }, "a later start after one that dies")
end)

t.cleanup(function() srv:stop() end)

t.test("a string parameter's schema gives the bound validation holds it to", function()
  local s = tool.input_schema { name = "diagnose_schema", kind = "read", params = {
    free = { type = "string" }, short = { type = "string", max_length = 8 }, pick = { type = "string", enum = { "a" } },
    either = { type = { "string", "integer" } }, count = { type = "integer" } } }
  local p = s.properties
  t.eq({ p.free.maxLength, p.short.maxLength, p.pick.maxLength, p.either.maxLength, p.count.maxLength },
    { tool.MAX_STRING, 8, nil, tool.MAX_STRING, nil }, "maxLength: the default, its own, none for an enum or a number")
end)

t.test("test, match and groups agree with ECMAScript's (node's RegExp) on random patterns and subjects", function()
  if H.sh("command -v node") ~= 0 then return t.skip("node is not installed") end
  math.randomseed(18)
  local atoms = { "a", "b", ".", "[ab]", "[^a]", "\\d", "(a|b)", "(?:ab|a)", "(a*)", "x", "-", "[a-c-]", "(a?b?)",
    "(|a)" }
  local quants = { "", "", "*", "+", "?", "{2}", "{1,3}", "{0,}", "{0,2}" }
  local chars = { "a", "b", "c", "x", "1", "-" }
  local cases = json.array()
  for _ = 1, 500 do
    local parts = { math.random() < 0.5 and "^" or "" }
    for _ = 1, math.random(1, 4) do parts[#parts + 1] = atoms[math.random(#atoms)] .. quants[math.random(#quants)] end
    if math.random() < 0.3 then parts[#parts + 1] = "|" .. atoms[math.random(#atoms)] end
    if math.random() < 0.5 then parts[#parts + 1] = "$" end
    local p = table.concat(parts)
    local re = assert(regex.compile(p))
    for _ = 1, 6 do
      local s = {}
      for i = 1, math.random(0, 8) do s[i] = chars[math.random(#chars)] end
      s = table.concat(s)
      local m = re:match(s)
      local groups = json.array()
      if m then for i = 1, re.groups or 0 do groups[i] = m[i] == false and json.null or m[i] end end
      cases[#cases + 1] = { p = p, s = s, test = re:test(s), match = m ~= nil, groups = groups }
    end
  end
  local file = H.write(H.tmpdir() .. "/cases.json", json.encode(cases))
  local rc, out, err = H.sh("node tests/tools/regex_node.js " .. H.quote(file))
  t.eq(rc, 0, err)
  local r = json.decode(out or "") or {}
  t.eq({ r.cases, r.count, r.differ }, { #cases, 0, {} }, "no case differs")
end)
