-- hypd.api.auth: bearer tokens for the HTTP front ends (REST, MCP, /ws,
-- /metrics). A token is "hypd_" and 32 random bytes in base64url; it is
-- shown once, when created. The store keeps only its SHA-256:
--
--   auth/tokens/<sha256 hex> = { name, scope, created_at, last_used_at [, expires_at] }
--
-- A token with expires_at (wall seconds; the web UI's sign-in tokens, for
-- M.WEB_TTL) is refused after it, with a 401 saying so.
--
-- Scopes are ranked read < operate < admin (hypd.tool.KINDS says which
-- scope each kind of tool needs). Every token this process sees is
-- registered with the log's redaction (core.add_secret).
--
--   auth.create{name, scope [, ttl]} -> token, info | nil, err (VALIDATION, CONFLICT)
--     ttl: seconds until it expires (none: it does not)
--   auth.list() -> { {id, name, scope, created_at, last_used_at, expires_at}, ... }
--   auth.revoke(name_or_id) -> info | nil, err (NOT_FOUND)
--   auth.replace(name) -> the tokens named name revoked as replaced at a
--     start (hypd serve --sandbox prints a new one at each): a request with
--     one is refused saying so (UNAUTHORIZED, reason "replaced"), not as an
--     unknown token. The store keeps the M.REPLACED_KEPT newest hashes only.
--   auth.sign_out(key) -> info, revoked | nil, err: the token check()
--     answered with key, revoked when a sign-in made it
--     (Sign out: POST /api/v1/auth/logout revokes the caller's own token)
--   auth.check(authorization_header [, peer]) -> {name, scope, id, key} | nil, err
--     (key: the token's whole hash, for revoke_key)
--     err.code: UNAUTHORIZED, or THROTTLED with err.retry_after (seconds)
--     for a failed attempt from a peer that failed M.MAX_FAILURES times
--     within M.WINDOW seconds (a valid token is never throttled)
--   auth.count() -> number of tokens
--   auth.login_code{scope, ttl} -> code: a one-time code for the web UI's
--     sign-in link (hypd serve prints http://HOST:PORT/#login=<code>: in the
--     URL fragment it reaches no log and no proxy); kept in this process
--     only, as its hash, for ttl seconds (default M.LOGIN_TTL)
--   auth.exchange(code, peer) -> token, info | nil, err: the code, once,
--     for a new token of its scope named web-<hex> that expires after
--     M.WEB_TTL (a failure counts as a failed authentication of the peer;
--     a valid code works even from a throttled peer)
local core = require "hypd.core"
local errors = require "hypd.errors"
local json = require "hypd.json"
local log = require "hypd.log"
local store = require "hypd.store"
local sys = require "hypd.sys"

local M = {}

M.PREFIX = "auth/tokens/"
M.REPLACED = "auth/replaced/" -- <sha256 hex> = { name, replaced_at }
M.REPLACED_KEPT = 20
M.SCOPES = { read = 1, operate = 2, admin = 3 }
M.MAX_FAILURES = 10   -- failed authentications per peer ...
M.WINDOW = 60         -- ... within this many seconds, then 429
M.TOUCH_EVERY = 60    -- last_used_at is written at most this often per token
M.LOGIN_TTL = 24 * 3600 -- how long a sign-in link stays good (once)
M.WEB_TTL = 12 * 3600   -- how long the token a sign-in gives stays good

local NAME = "^[A-Za-z0-9][A-Za-z0-9_.@:-]*$"
local failures = {}   -- peer -> { mono timestamps of recent failures }
local known = {}      -- hash -> true: registered with the redaction
local touched = {}    -- hash -> mono time last_used_at was written

local function hash(token) return sys.digest("sha256", token, "hex") end

local function info(h, rec)
  return { id = h:sub(1, 8), name = rec.name, scope = rec.scope, created_at = rec.created_at,
    last_used_at = rec.last_used_at or json.null, expires_at = rec.expires_at or json.null }
end

-- every token record: hash -> record
local function all()
  local out = {}
  for key, rec in pairs(assert(store.list(M.PREFIX))) do out[key:sub(#M.PREFIX + 1)] = rec end
  return out
end

-- rank(scope) -> 1..3 | nil
function M.rank(scope) return M.SCOPES[scope] end

-- allows(have, need) -> true when scope `have` covers scope `need`
function M.allows(have, need) return (M.SCOPES[have] or 0) >= (M.SCOPES[need] or math.huge) end

function M.count()
  local n = 0
  for _ in pairs(all()) do n = n + 1 end
  return n
end

function M.create(opts)
  opts = opts or {}
  local name, scope = opts.name, opts.scope
  local fields = {}
  if type(name) ~= "string" or #name > 64 or not name:match(NAME) then
    fields[#fields + 1] = { field = "name", rule = "pattern",
      message = "name: 1 to 64 letters, digits or _ . @ : - (starting with a letter or digit)" }
  end
  if not M.SCOPES[scope] then
    fields[#fields + 1] = { field = "scope", rule = "enum", message = "scope: must be one of read, operate, admin" }
  end
  if opts.ttl ~= nil and (type(opts.ttl) ~= "number" or opts.ttl ~= opts.ttl or opts.ttl <= 0) then
    fields[#fields + 1] = { field = "ttl", rule = "minimum", message = "ttl: a number of seconds above 0" }
  end
  if #fields > 0 then
    local msgs = {}
    for i, f in ipairs(fields) do msgs[i] = f.message end
    return errors.fail("VALIDATION", table.concat(msgs, "; "), { fields = fields })
  end
  for _, rec in pairs(all()) do
    if rec.name == name then
      return errors.fail("CONFLICT", "a token named '" .. name .. "' exists; revoke it first (hypd token revoke " ..
        name .. ")", { field = "name" })
    end
  end
  local token = "hypd_" .. sys.b64encode(sys.random_bytes(32), true)
  core.add_secret(token)
  local h = hash(token)
  known[h] = true
  local rec = { name = name, scope = scope, created_at = core.wall(), last_used_at = json.null,
    expires_at = opts.ttl and core.wall() + opts.ttl or nil, sign_in = opts.sign_in or nil }
  assert(store.put(M.PREFIX .. h, rec))
  store.event("audit", nil, { action = "token.create", token = name, scope = scope, id = h:sub(1, 8) })
  log.info("auth", "token %s (scope %s, id %s) created", name, scope, h:sub(1, 8))
  return token, info(h, rec)
end

function M.list()
  local out = {}
  for h, rec in pairs(all()) do out[#out + 1] = info(h, rec) end
  table.sort(out, function(a, b)
    if a.created_at ~= b.created_at then return (a.created_at or 0) < (b.created_at or 0) end
    return a.name < b.name
  end)
  return out
end

function M.revoke(which)
  if type(which) ~= "string" or which == "" then
    return errors.fail("VALIDATION", "revoke needs a token name or id", { field = "name" })
  end
  local tokens = all()
  local hit
  for h, rec in pairs(tokens) do
    if rec.name == which then hit = h end
  end
  if not hit and which:match("^[0-9a-f]+$") and #which >= 8 then
    for h in pairs(tokens) do
      if h:sub(1, #which) == which then
        if hit then return errors.fail("CONFLICT", "id " .. which .. " is ambiguous; give more digits") end
        hit = h
      end
    end
  end
  if not hit then
    return errors.fail("NOT_FOUND", "no token named or with id '" .. which .. "' (see hypd token list)",
      { field = "name" })
  end
  return M.revoke_hash(hit, tokens[hit])
end

function M.revoke_hash(h, rec)
  store.delete(M.PREFIX .. h)
  store.event("audit", nil, { action = "token.revoke", token = rec.name, scope = rec.scope, id = h:sub(1, 8) })
  log.info("auth", "token %s (id %s) revoked", rec.name, h:sub(1, 8))
  return info(h, rec)
end

function M.replace(name)
  local now = core.wall()
  for h, rec in pairs(all()) do
    if rec.name == name then
      M.revoke_hash(h, rec)
      assert(store.put(M.REPLACED .. h, { name = rec.name, replaced_at = now }))
    end
  end
  local old = {}
  for key, rec in pairs(assert(store.list(M.REPLACED))) do old[#old + 1] = { key = key, at = rec.replaced_at or 0 } end
  table.sort(old, function(a, b) return a.at > b.at end)
  for i = M.REPLACED_KEPT + 1, #old do store.delete(old[i].key) end
end

-- sign_out(key) -> info, revoked: the token check() answered with key (its
-- whole hash) is revoked when a sign-in made it; one made with hypd token
-- create is kept (revoked = false: hypd token revoke ends it)
function M.sign_out(key)
  local rec = type(key) == "string" and key:match("^%x+$") and store.get(M.PREFIX .. key)
  if not rec then return errors.fail("NOT_FOUND", "the token is gone already") end
  if not rec.sign_in then return info(key, rec), false end
  return M.revoke_hash(key, rec), true
end

-- rate limit of failed authentications --------------------------------------------

local function recent(peer)
  local now, list, keep = core.mono(), failures[peer], {}
  if not list then return keep end
  for _, at in ipairs(list) do
    if now - at < M.WINDOW then keep[#keep + 1] = at end
  end
  failures[peer] = #keep > 0 and keep or nil
  return keep
end

-- blocked(peer) -> nil | seconds until the peer may try again
function M.blocked(peer)
  local list = recent(peer or "?")
  if #list < M.MAX_FAILURES then return nil end
  return math.max(1, math.ceil(M.WINDOW - (core.mono() - list[#list - M.MAX_FAILURES + 1])))
end

local sweeps = 0
local function failed(peer, message, extra)
  peer = peer or "?"
  sweeps = sweeps + 1
  if sweeps % 256 == 0 then -- forget peers whose failures are all old
    for p in pairs(failures) do recent(p) end
  end
  local list = recent(peer)
  list[#list + 1] = core.mono()
  failures[peer] = list
  return errors.fail("UNAUTHORIZED", message, extra)
end

-- reset() forgets the failures (tests)
function M.reset() failures = {} end

-- A request that carries a valid token is served whatever else came from
-- its address (every loopback client, each SSM port forward, shares one):
-- only further failed attempts from a throttled address are refused.
local codes = {} -- hash of a login code -> { scope, expires (mono) }

function M.login_code(opts)
  opts = opts or {}
  assert(M.SCOPES[opts.scope or "admin"], "login_code: a scope")
  local code = sys.b64encode(sys.random_bytes(24), true)
  core.add_secret(code)
  codes[hash(code)] = { scope = opts.scope or "admin", expires = core.mono() + (opts.ttl or M.LOGIN_TTL) }
  return code
end

function M.exchange(code, peer)
  -- a valid code is served whatever failed before from its address (the
  -- throttle counts failures; every loopback client shares one address)
  local h = type(code) == "string" and #code <= 128 and hash(code)
  local c = h and codes[h]
  if c then codes[h] = nil end -- once, whatever follows
  if not c or core.mono() > c.expires then
    local wait = M.blocked(peer)
    if wait then
      return errors.fail("THROTTLED", "too many failed authentications from " .. tostring(peer or "?") ..
        "; try again in " .. wait .. " s", { retry_after = wait })
    end
    return failed(peer, "this sign-in link is not valid: it was used already, has expired, or belongs to another " ..
      "start of the server (each start prints a new one; or sign in with a token)")
  end
  local name = "web-" .. (sys.random_bytes(4):gsub(".", function(b) return string.format("%02x", b:byte()) end))
  local token, info_or_err = M.create { name = name, scope = c.scope, ttl = M.WEB_TTL, sign_in = true }
  if not token then return nil, info_or_err end
  store.event("audit", nil, { action = "token.login", token = name, scope = c.scope })
  return token, info_or_err
end

function M.check(header, peer)
  if type(header) ~= "string" or header == "" then
    return errors.fail("UNAUTHORIZED", "a token is required: send it in the Authorization header with the " ..
      "scheme 'Bearer' (create one with hypd token create)")
  end
  local token = header:match("^[Bb][Ee][Aa][Rr][Ee][Rr]%s+(%S+)%s*$")
  local h = token and hash(token)
  local rec = h and store.get(M.PREFIX .. h)
  local expired = rec and type(rec.expires_at) == "number" and core.wall() >= rec.expires_at
  if not rec or not M.SCOPES[rec.scope] or expired then
    local wait = M.blocked(peer)
    if wait then
      return errors.fail("THROTTLED", "too many failed authentications from " .. tostring(peer or "?") ..
        "; try again in " .. wait .. " s", { retry_after = wait })
    end
    if not token then return failed(peer, "the Authorization header must use the scheme 'Bearer' and one token") end
    if expired then
      return failed(peer, "the bearer token " .. tostring(rec.name) .. " expired at " ..
        os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(rec.expires_at)) .. " (sign in again)")
    end
    local gone = h and store.get(M.REPLACED .. h)
    if gone then
      return failed(peer, "the token " .. tostring(gone.name) .. " was replaced when the server started again at " ..
        os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(gone.replaced_at or 0)) .. ": hypd serve --sandbox (make run) " ..
        "prints a new token and sign-in link at every start; open the sign-in link it printed last, or paste " ..
        "the token it printed", { reason = "replaced" })
    end
    return failed(peer, "the bearer token is not valid (revoked?)")
  end
  if not known[h] then
    core.add_secret(token)
    known[h] = true
  end
  local now = core.mono()
  if not touched[h] or now - touched[h] >= M.TOUCH_EVERY then
    touched[h] = now
    rec.last_used_at = core.wall()
    store.put(M.PREFIX .. h, rec)
  end
  return { name = rec.name, scope = rec.scope, id = h:sub(1, 8), key = h }
end

return M
