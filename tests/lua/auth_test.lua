-- Bearer tokens: shown once, stored as hashes, ranked scopes, revocation,
-- and a rate limit on failed authentications per peer.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local core = require "hypd.core"
local json = require "hypd.json"
local store = require "hypd.store"
local sys = require "hypd.sys"
local task = require "hypd.task"

-- every text the store holds: kv values with their keys, and the events
local function everything_stored()
  local parts = {}
  for k, v in pairs(assert(store.list(""))) do parts[#parts + 1] = k .. "=" .. json.encode(v) end
  for _, e in ipairs(assert(store.events(0, 100000))) do parts[#parts + 1] = json.encode(e) end
  return table.concat(parts, "\n")
end

t.test("a new token is hypd_ and 43 base64url characters, and only its SHA-256 is stored", function()
  local token, info = auth.create { name = "ci", scope = "operate" }
  t.like(token, "^hypd_[A-Za-z0-9_-]+$")
  t.eq(#token, 5 + 43)
  local hash = sys.digest("sha256", token, "hex")
  t.eq(info.id, hash:sub(1, 8))
  local rec = store.get("auth/tokens/" .. hash)
  t.eq(rec.name, "ci")
  t.eq(rec.scope, "operate")
  t.ok(type(rec.created_at) == "number", "created_at is a time")
  t.ok(not everything_stored():find(token, 1, true), "the token itself is nowhere in the store")
  t.ok(not everything_stored():find(token:sub(6), 1, true), "nor its random part")
end)

t.test("a token is redacted from the log once it exists", function()
  local token = auth.create { name = "redacted", scope = "read" }
  t.ok(not core.redact("Authorization: Bearer " .. token):find(token, 1, true))
end)

t.test("list shows names, scopes, dates and short ids, never a token", function()
  local token = auth.create { name = "lister", scope = "admin" }
  local found
  for _, e in ipairs(auth.list()) do
    if e.name == "lister" then found = e end
    t.ok(not json.encode(e):find("hypd_", 1, true), "no token in the listing")
  end
  t.ok(found, "the token is listed")
  t.eq(found.scope, "admin")
  t.like(found.id, "^%x%x%x%x%x%x%x%x$")
  t.eq(found.last_used_at, json.null)
  t.ok(auth.check("Bearer " .. token, "10.0.0.1"))
  for _, e in ipairs(auth.list()) do
    if e.name == "lister" then t.ok(type(e.last_used_at) == "number", "last_used_at is set by a check") end
  end
end)

t.test("check accepts the token and returns its name and scope; anything else is UNAUTHORIZED", function()
  auth.reset()
  local token = auth.create { name = "checker", scope = "read" }
  local who = auth.check("Bearer " .. token, "10.0.0.2")
  t.eq(who.name, "checker")
  t.eq(who.scope, "read")
  t.eq(auth.check("bearer " .. token, "10.0.0.2").name, "checker", "the scheme is case-insensitive")
  t.fails(auth.check(nil, "10.0.0.2"), select(2, auth.check(nil, "10.0.0.2")), "UNAUTHORIZED")
  for _, h in ipairs { "", "Basic abc", "Bearer", "Bearer hypd_wrong", "Bearer " .. token .. "x", token } do
    local ok, err = auth.check(h, "10.0.0.2")
    t.fails(ok, err, "UNAUTHORIZED", h)
  end
  auth.reset()
end)

t.test("scopes rank read < operate < admin", function()
  t.ok(auth.allows("admin", "operate"))
  t.ok(auth.allows("operate", "read"))
  t.ok(auth.allows("read", "read"))
  t.ok(not auth.allows("read", "operate"))
  t.ok(not auth.allows("operate", "admin"))
  t.ok(not auth.allows(nil, "read"))
end)

t.test("a bad name or scope is a VALIDATION error naming the field; a taken name is a CONFLICT", function()
  local ok, err = auth.create { name = "x y", scope = "root" }
  t.fails(ok, err, "VALIDATION")
  t.eq(err.fields[1].field, "name")
  t.eq(err.fields[2].field, "scope")
  t.eq(err.fields[2].rule, "enum")
  auth.create { name = "taken", scope = "read" }
  ok, err = auth.create { name = "taken", scope = "admin" }
  t.fails(ok, err, "CONFLICT")
end)

t.test("revoke by name or by id; a revoked token no longer authenticates", function()
  auth.reset()
  local a = auth.create { name = "rev-a", scope = "read" }
  local b, binfo = auth.create { name = "rev-b", scope = "read" }
  t.eq(auth.revoke("rev-a").name, "rev-a")
  t.fails(auth.check("Bearer " .. a, "10.0.0.3"), select(2, auth.check("Bearer " .. a, "10.0.0.3")), "UNAUTHORIZED")
  t.eq(auth.revoke(binfo.id).name, "rev-b")
  local ok, err = auth.check("Bearer " .. b, "10.0.0.3")
  t.fails(ok, err, "UNAUTHORIZED")
  ok, err = auth.revoke("rev-a")
  t.fails(ok, err, "NOT_FOUND")
  auth.reset()
end)

t.test("ten failures in a minute from one peer throttle its further failures, not its good tokens", function()
  auth.reset()
  local token = auth.create { name = "limited", scope = "read" }
  for i = 1, auth.MAX_FAILURES do
    local ok, err = auth.check("Bearer hypd_guess" .. i, "192.0.2.7")
    t.fails(ok, err, "UNAUTHORIZED")
  end
  local ok, err = auth.check("Bearer hypd_guess_again", "192.0.2.7")
  t.fails(ok, err, "THROTTLED", "a further failed attempt waits")
  t.ok(err.retry_after >= 1 and err.retry_after <= auth.WINDOW, "retry_after in seconds")
  t.eq(auth.check("Bearer " .. token, "192.0.2.7").name, "limited", "a good token from the same peer is served")
  t.eq(auth.check("Bearer " .. token, "192.0.2.8").name, "limited", "another peer is not blocked")
  t.eq(auth.check("Bearer " .. token, "192.0.2.8").name, "limited", "successes do not count")
  auth.reset()
end)

t.test("failures older than the window are forgotten", function()
  auth.reset()
  local window = auth.WINDOW
  auth.WINDOW = 0.2
  local token = auth.create { name = "window", scope = "read" }
  for _ = 1, auth.MAX_FAILURES do auth.check("Bearer hypd_nope", "192.0.2.9") end
  t.fails(auth.check("Bearer hypd_nope", "192.0.2.9"), select(2, auth.check("Bearer hypd_nope", "192.0.2.9")),
    "THROTTLED")
  local start = core.mono()
  while core.mono() - start < 0.3 do task.sleep(0.05) end
  local ok, err = auth.check("Bearer hypd_nope", "192.0.2.9")
  auth.WINDOW = window
  t.fails(ok, err, "UNAUTHORIZED", "after the window a failure is a plain failure again")
  t.eq(auth.check("Bearer " .. token, "192.0.2.9").name, "window")
  auth.reset()
end)
