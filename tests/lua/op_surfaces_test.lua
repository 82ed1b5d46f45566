-- What an operation shows of itself, wherever it is looked at: a second
-- call with other parameters is a conflict naming the running operation; a
-- secret parameter of a failing operation reaches no stored or returned
-- surface (target, record, error, events, audit, log, answers, the store's
-- files); an operation that fails ends recorded as failed with its error,
-- at once, in-process and over --api; what can be checked before recording
-- (the region) is the answer itself.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local auth = require "hypd.api.auth"
local config = require "hypd.config"
local http = require "hypd.http"
local json = require "hypd.json"
local log = require "hypd.log"
local op = require "hypd.tool.operations"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local store = require "hypd.store"
local task = require "hypd.task"
local tool = require "hypd.tool.registry"
local tools = require "hypd.tool.loader"
tools.load()

local dir = H.tmpdir()
local SECRET = "s3cr3t-Value-Zq81xW"

-- a staged tool that waits until released, for the conflict cases
local release = task.signal()
tool.define { name = "diagnose_hold", summary = "Hold a target", kind = "mutating",
  description = "Waits until the test releases it.", status_tool = "operation_get",
  params = { name = { type = "string", required = true }, size = { type = "integer", default = 1 },
    password = { type = "string", secret = true } },
  target = function(p) return "hold/" .. p.name end,
  steps = { { name = "hold", run = function() release:wait(60) end } } }

-- a staged tool whose target is made from all its parameters, the secret
-- too, and whose step fails with the secret in its error, as careless code
-- would
tool.define { name = "diagnose_leak", summary = "Fails with its secret", kind = "mutating",
  description = "Fails, putting its token into the error.", status_tool = "operation_get",
  params = { hf_token = { type = "string", secret = true, required = true }, repo = { type = "string" } },
  target = function(p) return "leak/" .. json.encode(p) end,
  steps = { { name = "download", run = function(ctx)
    error("could not download " .. tostring(ctx.params.repo) .. " with token " .. ctx.params.hf_token)
  end } } }

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 << 20 })
local base = "http://127.0.0.1:" .. srv.port
local token = assert(auth.create { name = "surfaces", scope = "admin" })

local function request(method, path, body)
  local resp = assert(http.request { method = method, url = base .. path, body = body,
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json" } })
  return resp.status, json.decode(resp.body) or resp.body, resp.body
end

t.test("a second call for the same target with other parameters is a conflict naming the operation", function()
  local st, a = request("POST", "/api/v1/tools/diagnose_hold", '{"name": "x", "size": 2, "password": "pw-one-1234"}')
  t.eq(st, 202)
  local ops_before = #store.op_list { limit = 1000 }
  local st2, b = request("POST", "/api/v1/tools/diagnose_hold", '{"name": "x", "size": 3, "password": "pw-one-1234"}')
  t.eq({ st2, b.error.code }, { 409, "CONFLICT" })
  t.ok(b.error.message:find(a.operation_id, 1, true), "names the running operation")
  t.eq(b.error.fields, { { field = "size", rule = "conflict", message = "size: differs from the running operation " ..
    a.operation_id } }, "names the parameter that differs")
  local _, c = request("POST", "/api/v1/tools/diagnose_hold", '{"name": "x", "size": 2, "password": "pw-two-5678"}')
  t.eq(c.error and c.error.fields[1].field, "password", "a differing secret is named, never shown")
  t.ok(not c.error.message:find("pw-", 1, true), "neither secret is in the message")
  local st4, d = request("POST", "/api/v1/tools/diagnose_hold", '{"name": "x", "size": 2, "password": "pw-one-1234"}')
  t.eq({ st4, d.operation_id, d.existing }, { 202, a.operation_id, true }, "the same parameters join it")
  t.eq(#store.op_list { limit = 1000 }, ops_before, "no operation was added")
  release:fire()
  t.eq(op.wait(a.operation_id).status, "succeeded")
end)

t.test("a secret parameter of a failing operation reaches no stored or returned surface", function()
  local seen_events, seen_log = {}, {}
  local unsub = op.subscribe(function(ev) seen_events[#seen_events + 1] = json.encode(ev) end)
  local unlog = log.subscribe(function(_, _, msg) seen_log[#seen_log + 1] = msg end, "debug")
  local st, a = request("POST", "/api/v1/tools/diagnose_leak", json.encode { hf_token = SECRET, repo = "org/model" })
  t.eq(st, 202)
  local view = op.wait(a.operation_id)
  unsub()
  unlog()
  t.eq(view.status, "failed")
  t.eq(view.error.message, "could not download org/model with token [REDACTED]",
    "the stored error is redacted and has no file position")
  local surfaces = { events = table.concat(seen_events, "\n"), log = table.concat(seen_log, "\n") }
  local _, _, raw = request("GET", "/api/v1/operations/" .. a.operation_id)
  surfaces.get = raw
  _, _, raw = request("GET", "/api/v1/operations?limit=50")
  surfaces.list = raw
  _, _, raw = request("GET", "/api/v1/operations/" .. a.operation_id .. "/events")
  surfaces.op_events = raw
  surfaces.target = tostring(view.target)
  local all = {}
  for _, ev in ipairs(store.events(0, 1000000)) do all[#all + 1] = json.encode(ev) end
  surfaces.event_log = table.concat(all, "\n")
  store.exec("PRAGMA wal_checkpoint(FULL)")
  local files = {}
  local p = io.popen("find " .. H.quote(config.state_dir) .. " -type f")
  for f in p:lines() do files[#files + 1] = f end
  p:close()
  for _, f in ipairs(files) do surfaces["file " .. f] = H.read(f) or "" end
  local leaks = {}
  for name, text in pairs(surfaces) do
    if text:find(SECRET, 1, true) then leaks[#leaks + 1] = name end
    -- (the state directory's lock file names the holding command, this test)
    if text:find("op_surfaces_test.lua", 1, true) and not name:find("^log") and not name:find("/lock$") then
      leaks[#leaks + 1] = name .. " (path)"
    end
  end
  table.sort(leaks)
  t.eq(leaks, {}, "no surface holds the secret or the file's path")
  t.ok(#files > 0 and surfaces.list:find(a.operation_id, 1, true) ~= nil, "the surfaces were looked at")
end)

t.test("the log's redaction leaves no fragment of a secret that another secret begins", function()
  local core = require "hypd.core"
  core.add_secret("pfx-secret-1")
  core.add_secret("pfx-secret-1x")
  t.eq(core.redact("a pfx-secret-1x b pfx-secret-1 c"), "a [REDACTED] b [REDACTED] c")
  t.eq(core.redact("the bearer token is not valid"), "the bearer token is not valid", "prose is not a token")
  t.eq(core.redact("Authorization: Bearer hypd_abcdefghijklmnop"), "Authorization: Bearer [REDACTED]")
end)

-- the command line, in-process and over --api ---------------------------------------------

local playbooks = dir .. "/playbooks"
os.execute("mkdir -p " .. H.quote(playbooks))
H.write(playbooks .. "/broken.lua", [[
return tool {
  name = "diagnose_broken", summary = "Fails at once", kind = "mutating",
  description = "Fails in its first step.", params = {}, status_tool = "operation_get",
  target = function() return "broken" end,
  steps = { { name = "break", run = function(ctx)
    ctx:phase("breaking")
    hypd.sleep(1)
    error({ code = "BROKEN", message = "it broke on purpose" })
  end } },
}]])
H.write(playbooks .. "/steps.lua", [[
return tool {
  name = "diagnose_steps", summary = "Three notes", kind = "mutating",
  description = "Sleeps with progress notes.", params = {}, status_tool = "operation_get",
  target = function() return "steps" end,
  steps = { { name = "sleep", run = function(ctx)
    ctx:phase("sleeping")
    for i = 1, 3 do hypd.sleep(5) hypd.log.info("step %d", i) end
    ctx.state.result = { ok = true }
  end } },
}]])

local function hypd(env, ...)
  local e = { HYPD_STATE = dir .. "/cli-state" }
  for k, v in pairs(env or {}) do e[k] = v end
  return H.run_hypd(e, "--playbooks", playbooks, ...)
end

t.test("with no region, a tool that needs AWS answers the error and records no operation", function()
  local rc, _, err = H.sh("env -u AWS_REGION -u AWS_DEFAULT_REGION HYPD_STATE=" .. H.quote(dir .. "/noregion") ..
    " " .. H.quote(H.hypd) .. " call cluster_create_eks cluster_tag=demo --wait")
  t.eq(rc, 1)
  t.like(err, "^hypd: VALIDATION: no AWS region")
  local _, out = H.sh("HYPD_STATE=" .. H.quote(dir .. "/noregion") .. " " .. H.quote(H.hypd) ..
    " call operation_list")
  t.eq(json.decode(out).operations, {}, "nothing was recorded")
end)

t.test("an operation failing in its first step: --wait in-process ends with its error and exit 1", function()
  local rc, _, err = hypd({ HYPD_CLOCK = "virtual" }, "call", "diagnose_broken", "--wait")
  t.eq(rc, 1)
  t.like(err, "operation op%-%x+ failed: BROKEN: it broke on purpose")
  local _, out = hypd(nil, "call", "operation_list")
  local ops = json.decode(out).operations
  t.eq({ ops[1].tool, ops[1].status }, { "diagnose_broken", "failed" }, "recorded as failed")
end)

t.test("--wait over --api ends with the real error, and shows the phases in-process shows", function()
  local out, pidfile = dir .. "/serve.out", dir .. "/serve.pid"
  os.execute(string.format("HYPD_CLOCK=virtual HYPD_STATE=%s %s --playbooks %s serve --listen 127.0.0.1:0 >%s " ..
    "2>%s.err </dev/null & echo $! >%s", H.quote(dir .. "/srv-state"), H.quote(H.hypd), H.quote(playbooks),
    H.quote(out), H.quote(out), H.quote(pidfile)))
  local url, tok
  for _ = 1, 300 do
    local text = H.read(out) or ""
    url, tok = text:match("listening on (http://[%d.:]+)"), text:match("token %b(): (hypd_[%w_-]+)")
    if url and tok then break end
    os.execute("sleep 0.02")
  end
  t.ok(url and tok, "the server started: " .. tostring(H.read(out)))
  local rc, _, err = hypd({ HYPD_TOKEN = tok }, "call", "--api", url, "diagnose_broken", "--wait")
  t.eq(rc, 1)
  t.like(err, "operation op%-%x+ failed: BROKEN: it broke on purpose")
  local _, _, remote = hypd({ HYPD_TOKEN = tok }, "call", "--api", url, "diagnose_steps", "--wait")
  local _, _, here = hypd({ HYPD_CLOCK = "virtual" }, "call", "diagnose_steps", "--wait")
  local function phases(text)
    local out2 = {}
    for line in text:gmatch("[^\n]+") do out2[#out2 + 1] = line:match("op%-%x+: (.*)$") end
    return out2
  end
  t.ok(#phases(here) >= 2, "in-process shows phases: " .. here)
  t.eq(phases(remote), phases(here), "the same phase and note lines")
  os.execute("kill -TERM " .. (H.read(pidfile) or ""):match("%d+"))
end)

t.cleanup(function()
  srv:stop()
  os.execute("sleep 0.3; rm -rf " .. H.quote(dir))
end)
