-- A secret parameter stays secret against a caller who tries: its
-- transforms (upper-cased, lower-cased, reversed, base64) are masked like
-- it, a caller sending thousands of secrets cannot push the host's own or
-- a running operation's out of the redaction, a value that fails
-- validation is masked too, and the answers to a second call for a running
-- target never tell whether a guessed secret equals the operation's.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local aws = require "hypd.aws"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local log = require "hypd.log"
local op = require "hypd.tool.operations"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local store = require "hypd.store"
local sys = require "hypd.sys"
local task = require "hypd.task"
local tool = require "hypd.tool.registry"
require("hypd.tool.loader").load()

local SECRET = "Gx7-secret-Qm42zZ"
local release = task.signal()

-- a staged tool that shows its secret turned, as careless code would
tool.define { name = "diagnose_turns", summary = "Shows its secret turned", kind = "mutating",
  description = "Logs, reports and fails with transforms of its password.", status_tool = "operation_get",
  params = { name = { type = "string", required = true }, password = { type = "string", secret = true,
    pattern = "^[A-Za-z0-9-]{6,64}$" } },
  target = function(p) return "turns/" .. p.name end,
  steps = { { name = "hold", run = function(ctx)
    local pw = ctx.params.password or ""
    log.info("turns", "upper %s lower %s", pw:upper(), pw:lower())
    ctx:progress("reversed " .. pw:reverse() .. " base64 " .. sys.b64encode(pw))
    if ctx.params.name:match("^hold") then release:wait(60) end
    if ctx.params.name == "returns" then return { result = { turned = pw:upper(), list = { pw:reverse() } } } end
    error("failed with " .. pw:upper() .. " and " .. sys.b64encode(pw, true))
  end } } }

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 << 20 })
local base = "http://127.0.0.1:" .. srv.port
local ALICE = assert(auth.create { name = "alice", scope = "operate" })
local MALLORY = assert(auth.create { name = "mallory", scope = "operate" })

local function call(tok, name, args)
  local resp = assert(http.request { method = "POST", url = base .. "/api/v1/tools/" .. name,
    body = json.encode(args), headers = { authorization = "Bearer " .. tok, ["content-type"] = "application/json" } })
  return resp.status, json.decode(resp.body) or {}, resp.body
end

local lines = {}
local stop = log.subscribe(function(_, comp, msg) lines[#lines + 1] = comp .. " " .. msg end, "debug")

-- leaks(text, secret) -> the transforms of secret found in text
local function leaks(text, secret)
  local found = {}
  for what, v in pairs { plain = secret, upper = secret:upper(), lower = secret:lower(), reversed = secret:reverse(),
    base64 = sys.b64encode(secret), base64url = sys.b64encode(secret, true) } do
    if text:find(v, 1, true) then found[#found + 1] = what end
  end
  table.sort(found)
  return found
end

t.test("a secret's transforms are masked in the log, the events and the error of its operation", function()
  local st, a = call(ALICE, "diagnose_turns", { name = "turn", password = SECRET })
  t.eq(st, 202, "started")
  local rec = op.wait(a.operation_id)
  t.eq(rec.status, "failed", "it failed, as written")
  local surfaces = table.concat(lines, "\n") .. json.encode(op.view(op.get(a.operation_id))) ..
    json.encode(store.events(0, 1000000) or {})
  t.eq(leaks(surfaces, SECRET), {}, "no transform of the secret in the log, record or events")
  t.ok(surfaces:find("upper [REDACTED] lower [REDACTED]", 1, true), "the log line is there, masked")
  st, a = call(ALICE, "diagnose_turns", { name = "returns", password = SECRET })
  t.eq(st, 202, json.encode(a))
  rec = op.wait(a.operation_id)
  t.eq({ rec.status, rec.result }, { "succeeded", { turned = "[REDACTED]", list = { "[REDACTED]" } } },
    "a result that returns it turned is stored masked")
end)

t.test("a secret that fails its pattern is masked too", function()
  local bad = "Bad!secret!Value!Rk9"
  local st, v, body = call(ALICE, "diagnose_turns", { name = "bad", password = bad })
  t.eq({ st, v.error and v.error.fields[1].field, v.error and v.error.fields[1].rule }, { 400, "password", "pattern" })
  t.eq(leaks(body, bad), {}, "not in the answer")
  t.eq(core.redact("x " .. bad:upper() .. " " .. bad .. " y"), "x [REDACTED] [REDACTED] y", "registered, turned too")
end)

t.test("2,000 secrets from a caller push out neither the host's AWS key nor a running operation's secret", function()
  local creds = assert(aws.credentials())
  local key = creds.secret_access_key or creds.secret_key or os.getenv("AWS_SECRET_ACCESS_KEY")
  t.ok(key and #key > 10, "the host has an AWS secret key")
  local held = "Run-ning-op-Secret-77"
  local st, a = call(ALICE, "diagnose_turns", { name = "hold", password = held })
  t.eq(st, 202, "an operation with a secret runs")
  for i = 1, 2000 do
    tool.validate(tool.get("diagnose_turns"), { name = "x", password = string.format("flood-%06d-value", i) })
  end
  t.eq(core.redact("k=" .. key .. " s=" .. held), "k=[REDACTED] s=[REDACTED]", "both still masked")
  t.eq(core.redact("late flood-002000-value"), "late [REDACTED]", "the newest caller secret is masked")
  release:fire()
  op.wait(a.operation_id)
end)

t.test("another caller's second call gets the same answer whether its secret is right or wrong", function()
  local rel = task.signal()
  release = rel
  local st, a = call(ALICE, "diagnose_turns", { name = "hold2", password = SECRET })
  t.eq(st, 202)
  local ops_before = #store.op_list { limit = 1000 }
  local st1, right = call(MALLORY, "diagnose_turns", { name = "hold2", password = SECRET })
  local st2, wrong = call(MALLORY, "diagnose_turns", { name = "hold2", password = "Wrong-guess-123" })
  local st3, none = call(MALLORY, "diagnose_turns", { name = "hold2" })
  t.eq({ st1, right.error and right.error.code }, { 409, "CONFLICT" }, "the right secret: a conflict")
  t.eq({ st2, wrong }, { st1, right }, "the wrong one: the same answer, word for word")
  t.eq({ st3, none }, { st1, right }, "no secret at all: the same answer")
  t.ok(right.error and right.error.message:find("not compared", 1, true), "it says secrets are not compared: " ..
    tostring(right.error and right.error.message))
  t.eq(#store.op_list { limit = 1000 }, ops_before, "no operation was added")
  local st4, d = call(ALICE, "diagnose_turns", { name = "hold2", password = SECRET })
  t.eq({ st4, d.operation_id, d.existing }, { 202, a.operation_id, true }, "its own caller still joins it")
  local _, e = call(ALICE, "diagnose_turns", { name = "hold2", password = "Other-secret-456" })
  t.eq(e.error and e.error.fields[1].field, "password", "and is told its own secret differs")
  rel:fire()
  op.wait(a.operation_id)
end)

t.cleanup(function()
  stop()
  srv:stop()
end)
