-- A restart of hypd serve signs out nobody who signed in through the link
-- or with a created token; the token `hypd serve --sandbox` (make run)
-- prints is new at each start, and the old one is refused saying it was
-- replaced at a restart (reason "replaced" on REST and on /ws), never as an
-- unknown token, and without the token in the answer. Two real server
-- processes on one state directory and port, one after the other.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local http = require "hypd.http"
local json = require "hypd.json"
local store = require "hypd.store"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local state = dir .. "/state"
os.execute("mkdir -p " .. H.quote(state))
local first = assert(H.serve_process(state))
local listen = "127.0.0.1:" .. first.port
local second
t.cleanup(function()
  first.stop()
  if second then second.stop() end
  os.execute("rm -rf " .. H.quote(dir))
end)

local function call(base, method, path, tok, body)
  local resp = assert(http.request { method = method, url = base .. "/api/v1" .. path,
    body = body and json.encode(body), headers = { authorization = tok and "Bearer " .. tok,
      ["content-type"] = body and "application/json" } })
  return resp.status, json.decode(resp.body) or {}, resp.body
end

-- the tokens of the first start: the printed one, a sign-in through the link, a created one
local printed = first.token
local st, signed = call(first.url, "POST", "/auth/login", nil, { code = first.login })
assert(st == 200 and signed.token, "the link signs in")
local rc, out = H.sh(string.format("%s --state %s token create --scope operate --name ci-bot", H.hypd,
  H.quote(state)))
assert(rc == 0, out)
local created = out:match("(hypd_[%w_-]+)")
assert(created, "hypd token create printed a token: " .. out)

first.stop()
second = assert(H.serve_process(state, listen))

t.test("after a restart, a sign-in through the link and a created token still work", function()
  t.eq(second.url, first.url, "the same address")
  local s1, who1 = call(second.url, "GET", "/auth/whoami", signed.token)
  t.eq(s1, 200, "the link's token")
  t.like(who1.name or "", "^web%-%x+$")
  local s2, who2 = call(second.url, "GET", "/auth/whoami", created)
  t.eq(s2, 200, "the created token")
  t.eq(who2.name, "ci-bot")
  t.ok(second.token ~= printed, "the printed token is new")
  t.eq((call(second.url, "GET", "/auth/whoami", second.token)), 200, "the new printed token works")
end)

t.test("the old printed token is refused as replaced at a restart, pointing at the new link", function()
  local s, v, raw = call(second.url, "GET", "/auth/whoami", printed)
  t.eq(s, 401)
  local e = v.error or {}
  t.eq(e.code, "UNAUTHORIZED")
  t.eq(e.reason, "replaced", "the reason a page can act on")
  t.like(e.message or "", "replaced when the server started again at %d%d%d%d%-")
  t.like(e.message or "", "sign%-in link it printed last")
  t.ok(not raw:find(printed, 1, true) and not raw:find(second.token, 1, true), "no token in the answer")
  local s3, v3 = call(second.url, "GET", "/auth/whoami", "hypd_never-issued")
  t.eq(s3, 401)
  t.eq((v3.error or {}).reason, nil, "a token never issued is not called replaced")
  t.like((v3.error or {}).message or "", "not valid")
end)

t.test("/ws refuses the old printed token with the same reason, then closes with 4401", function()
  local file = dir .. "/ws.json"
  local rc2, o2 = H.sh(string.format("WS_TOKEN=%s timeout 30 python3 tests/tools/ws_client.py %d hypd_events %s",
    H.quote(printed), second.port, H.quote(file)))
  t.eq(rc2, 0, o2)
  local r = json.decode(H.read(file) or "") or { messages = {} }
  local m = r.messages or {}
  t.eq(m[1] and m[1].type, "error")
  t.eq(m[1] and m[1].code, "UNAUTHORIZED")
  t.eq(m[1] and m[1].reason, "replaced")
  t.eq(m[2] and m[2].close and m[2].close[1], 4401)
end)

t.test("the store keeps the newest 20 replaced hashes only, and never a token", function()
  local n = 0
  for _, rec in pairs(assert(store.list(auth.REPLACED))) do
    n = n + 1
    t.eq(rec.name, "sandbox")
  end
  t.ok(n == 0, "this process's store is its own")
  for _ = 1, auth.REPLACED_KEPT + 3 do
    assert(auth.create { name = "sandbox", scope = "admin" })
    auth.replace("sandbox")
  end
  local kept, text = 0, json.encode(assert(store.list(auth.REPLACED)))
  for _ in pairs(assert(store.list(auth.REPLACED))) do kept = kept + 1 end
  t.eq(kept, auth.REPLACED_KEPT)
  t.ok(not text:find("hypd_", 1, true), "hashes and names only")
  t.eq(#auth.list(), 0, "every replaced token is revoked")
end)
