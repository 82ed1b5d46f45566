-- hypd tools, hypd call (in-process and --api), hypd token and hypd serve,
-- run as a user runs them: the real binary, its exit status, stdout and
-- stderr.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local state = dir .. "/state"
local playbooks = dir .. "/playbooks"
os.execute("mkdir -p " .. H.quote(playbooks))
H.write(playbooks .. "/nap.lua", [[
return tool {
  name = "diagnose_nap", summary = "Sleep a while", kind = "mutating",
  description = "A mutating playbook tool that sleeps, to show operations from the command line.",
  params = { seconds = { type = "integer", minimum = 0, required = true } }, status_tool = "operation_get",
  target = function(p) return "nap/" .. p.seconds end,
  steps = { { name = "nap", run = function(ctx)
    ctx:phase("sleeping " .. ctx.params.seconds .. " s")
    hypd.sleep(ctx.params.seconds)
    ctx.state.result = { slept = ctx.params.seconds }
  end } },
}]])
H.write(playbooks .. "/fail.lua", [[
return tool {
  name = "diagnose_fail", summary = "Fails", kind = "mutating",
  description = "A mutating playbook tool that fails.", params = {}, status_tool = "operation_get",
  target = function() return "fail" end,
  steps = { { name = "fail", run = function(ctx)
    ctx:phase("failing")
    error({ code = "BROKEN", message = "it broke on purpose" })
  end } },
}]])

local function hypd(env, ...)
  local e = { HYPD_STATE = state }
  for k, v in pairs(env or {}) do e[k] = v end
  return H.run_hypd(e, ...)
end

t.test("hypd tools prints name, kind and summary of every tool", function()
  local rc, out = hypd(nil, "tools")
  t.eq(rc, 0)
  t.like(out, "^NAME +KIND +SUMMARY\n")
  t.like(out, "\noperation_list +read +List operations")
  t.like(out, "\noperation_cancel +mutating +Cancel")
end)

t.test("hypd tools --json prints the registry with its JSON Schemas", function()
  local rc, out = hypd(nil, "tools", "--json")
  t.eq(rc, 0)
  local by = {}
  for _, d in ipairs(json.decode(out).tools) do by[d.name] = d end
  t.eq(by.operation_list.input_schema.type, "object")
  t.eq(by.operation_list.input_schema.properties.limit.type, "integer")
  t.eq(by.operation_cancel.scope, "operate")
end)

t.test("hypd call runs a tool in-process and prints its result as JSON", function()
  local rc, out, err = hypd(nil, "call", "operation_list", "limit=3", "status=running")
  t.eq(rc, 0, err)
  t.eq(json.decode(out), { operations = json.array() })
  t.like(out, '"operations": %[%]')
  rc = hypd(nil, "call", "operation_list", "--json", '{"limit": 2}', "limit:=4")
  t.eq(rc, 0)
end)

t.test("a tool error exits 1 with the code and message on stderr", function()
  local rc, out, err = hypd(nil, "call", "operation_list", "limit=0", "colour=red")
  local _
  t.eq(rc, 1)
  t.eq(out, "")
  t.like(err, "^hypd: VALIDATION: operation_list: ")
  t.like(err, "colour is not a parameter of this tool %(it takes limit, status, tool%)") -- said for a person
  t.like(err, "limit: must be at least 1")
  rc, _, err = hypd(nil, "call", "no_such_tool")
  t.eq(rc, 1)
  t.like(err, "^hypd: NOT_FOUND: there is no tool named 'no_such_tool'")
end)

t.test("usage errors exit 2 with one line", function()
  for _, c in ipairs {
    { { "call" }, "call needs a TOOL" },
    { { "call", "operation_list", "novalue" }, "argument 'novalue' is not key=value" },
    { { "call", "operation_list", "limit:={" }, "not JSON" },
    { { "call", "operation_list", "--wait", "--detach" }, "cannot be combined" },
    { { "call", "operation_list", "--json", "[1]" }, "%-%-json must be a JSON object" },
    { { "call", "operation_list", "--frob" }, "unknown option '%-%-frob'" },
    { { "call", "operation_list", "--api", "http://127.0.0.1:9" }, "HYPD_TOKEN" },
    { { "token", "create", "--name", "x" }, "needs %-%-scope" },
    { { "token", "create", "--name", "x", "--scope", "root" }, "scope: must be one of read, operate, admin" },
    { { "token", "revoke" }, "needs a NAME or ID" },
    { { "token", "frob" }, "unknown token command" },
    { { "serve", "--speed", "3" }, "give %-%-sandbox too" },
  } do
    local rc, _, err = hypd({ HYPD_TOKEN = "" }, table.unpack(c[1]))
    t.eq(rc, 2, table.concat(c[1], " "))
    t.like(err, "^hypd: .*" .. c[2], table.concat(c[1], " "))
  end
end)

t.test("hypd token create prints the token once; list never shows it; revoke removes it", function()
  local rc, out, err = hypd(nil, "token", "create", "--scope", "read", "--name", "laptop")
  local _
  t.eq(rc, 0, err)
  local token = out:match("^(hypd_[%w_-]+)\n$")
  t.ok(token, "one line with the token")
  t.like(err, "shown only this once")
  rc, out = hypd(nil, "token", "list")
  t.eq(rc, 0)
  t.like(out, "^ID +NAME +SCOPE +CREATED +LAST USED +EXPIRES\n%x+ +laptop +read +%d%d%d%d%-")
  t.ok(not out:find(token, 1, true), "no token in the listing")
  out = select(2, hypd(nil, "token", "list", "--json"))
  t.eq(json.decode(out).tokens[1].name, "laptop")
  rc, _, err = hypd(nil, "token", "create", "--scope", "admin", "--name", "laptop")
  t.eq(rc, 1)
  t.like(err, "^hypd: CONFLICT: a token named 'laptop' exists")
  rc = hypd(nil, "token", "revoke", "laptop")
  t.eq(rc, 0)
  rc, _, err = hypd(nil, "token", "revoke", "laptop")
  t.eq(rc, 1)
  t.like(err, "NOT_FOUND")
  out = select(2, hypd(nil, "token", "list", "--json"))
  t.eq(#json.decode(out).tokens, 0)
end)

t.test("token commands honour --state after the command", function()
  local other = dir .. "/other"
  local rc = hypd(nil, "token", "create", "--scope", "operate", "--name", "elsewhere", "--state", other)
  t.eq(rc, 0)
  local _, out = H.run_hypd({ HYPD_STATE = other }, "token", "list", "--json")
  t.eq(json.decode(out).tokens[1].name, "elsewhere")
  _, out = hypd(nil, "token", "list", "--json")
  t.eq(#json.decode(out).tokens, 0, "not in the default state")
end)

t.test("--wait follows an in-process operation with phase lines, then prints it", function()
  local rc, out, err = hypd({ HYPD_CLOCK = "virtual" }, "--playbooks", playbooks, "call", "diagnose_nap",
    "seconds=120", "--wait")
  t.eq(rc, 0, err)
  local v = json.decode(out)
  t.eq(v.status, "succeeded")
  t.eq(v.result, { slept = 120 })
  t.like(err, "op%-%x+: ")
end)

t.test("on a terminal, --wait redraws the current phase in place and keeps finished ones with durations", function()
  if H.sh("command -v script") ~= 0 then return t.skip("no script(1) to make a terminal") end
  local cmd = string.format("HYPD_CLOCK=virtual HYPD_STATE=%s %s --playbooks %s call diagnose_nap seconds=30 --wait",
    H.quote(os.getenv("HYPD_STATE")), H.hypd, H.quote(playbooks))
  local rc, out = H.sh("script -qec " .. H.quote(cmd) .. " /dev/null")
  t.eq(rc, 0)
  t.like(out, "\r\27%[K", "the current phase is redrawn in place")
  t.like(out, "✓ [^\n]-  %d+:%d%d\r?\n", "a finished phase keeps its duration")
  t.like(out, "op%-%x+ succeeded in %d+:%d%d")
end)

t.test("without --detach, an in-process call stays until its operation ends", function()
  local rc, out, err = hypd({ HYPD_CLOCK = "virtual" }, "--playbooks", playbooks, "call", "diagnose_nap",
    "seconds=60")
  t.eq(rc, 0, err)
  local a = json.decode(out)
  t.like(a.operation_id, "^op%-")
  t.like(err, "waiting for operation")
  local _, got = hypd(nil, "--playbooks", playbooks, "call", "operation_get", "operation_id=" .. a.operation_id)
  t.eq(json.decode(got).status, "succeeded")
end)

t.test("a failed operation exits 1 with its error", function()
  local rc, _, err = hypd({ HYPD_CLOCK = "virtual" }, "--playbooks", playbooks, "call", "diagnose_fail", "--wait")
  t.eq(rc, 1)
  t.like(err, "operation op%-%x+ failed: BROKEN: it broke on purpose")
end)

-- serve in the background: URL, token (when printed), pid; stop() -> exit status
local function serve(env, ...)
  local out, rcfile, pidfile = dir .. "/serve.out", dir .. "/serve.rc", dir .. "/serve.pid"
  os.remove(out) os.remove(rcfile) os.remove(pidfile)
  local parts = {}
  for k, v in pairs(env or {}) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  local args = {}
  for _, a in ipairs { ... } do args[#args + 1] = H.quote(a) end
  os.execute(string.format("(%s HYPD_STATE=%s %s %s serve --listen 127.0.0.1:0 >%s 2>%s </dev/null & " ..
    "echo $! >%s; wait $!; echo $? >%s) >/dev/null 2>&1 </dev/null &", table.concat(parts, " "), H.quote(state),
    H.hypd, table.concat(args, " "), H.quote(out), H.quote(dir .. "/serve.err"), H.quote(pidfile), H.quote(rcfile)))
  local url, token
  for _ = 1, 300 do
    local text = H.read(out) or ""
    url = text:match("listening on (http://[%d.:]+)")
    token = text:match("token %b(): (hypd_[%w_-]+)")
    if url and text:find("stops it", 1, true) then break end
    if H.read(rcfile) then break end
    os.execute("sleep 0.02")
  end
  local function stop()
    local pid = (H.read(pidfile) or ""):match("%d+")
    os.execute("kill -TERM " .. pid)
    for _ = 1, 500 do
      local rc = H.read(rcfile)
      if rc and rc:match("%d") then return tonumber(rc:match("%d+")) end
      os.execute("sleep 0.02")
    end
  end
  return url, token, stop, H.read(out), H.read(dir .. "/serve.err")
end

t.test("hypd serve refuses a non-loopback address before any token exists, and says how to make one", function()
  local fresh = dir .. "/fresh"
  local rc, _, err = H.run_hypd({ HYPD_STATE = fresh }, "serve", "--listen", "0.0.0.0:0")
  t.eq(rc, 1)
  t.like(err, "refusing to listen on 0%.0%.0%.0:0 before a token exists")
  t.like(err, "hypd %-%-state " .. fresh:gsub("%p", "%%%0") .. " token create %-%-scope admin %-%-name admin")
  local _, out = H.run_hypd({ HYPD_STATE = fresh }, "token", "list", "--json")
  t.eq(#json.decode(out).tokens, 0, "no token was made")
end)

local detached

t.test("--detach leaves the operation running for the next host on the same state", function()
  local rc, out, err = hypd(nil, "--playbooks", playbooks, "call", "diagnose_nap", "seconds=3600", "--detach")
  t.eq(rc, 0, err)
  detached = json.decode(out).operation_id
  t.like(detached, "^op%-")
  t.like(err, "resumes it")
  local _, got = hypd(nil, "--playbooks", playbooks, "call", "operation_get", "operation_id=" .. detached)
  t.eq(json.decode(got).status, "running")
end)

t.test("hypd serve prints its URL and an admin token once; --api calls reach it; SIGTERM exits 0", function()
  local url, token, stop, out, err = serve({ HYPD_CLOCK = "virtual" }, "--playbooks", playbooks)
  t.ok(url, "a URL: " .. tostring(out) .. tostring(err))
  t.ok(token, "an admin token: " .. tostring(out))
  t.like(out, "admin token %(shown once%): hypd_")
  local rc, got, cerr = hypd({ HYPD_TOKEN = token }, "call", "--api", url, "operation_list", "limit=5")
  local _
  t.eq(rc, 0, cerr)
  t.ok(type(json.decode(got).operations) == "table", "operations")
  -- the detached operation resumed in the server (virtual clock: at once)
  rc, got = hypd({ HYPD_TOKEN = token }, "call", "--api", url .. "/api/v1/", "operation_get",
    "operation_id=" .. tostring(detached))
  t.eq(rc, 0)
  t.eq(json.decode(got).status, "succeeded")
  rc, _, cerr = hypd({ HYPD_TOKEN = token }, "call", "--api", url, "operation_list", "limit=0")
  t.eq(rc, 1)
  t.like(cerr, "^hypd: VALIDATION: operation_list: limit: must be at least 1")
  rc, _, cerr = hypd({ HYPD_TOKEN = "hypd_wrong" }, "call", "--api", url, "operation_list")
  t.eq(rc, 1)
  t.like(cerr, "^hypd: UNAUTHORIZED")
  local _, reader = hypd(nil, "token", "create", "--scope", "read", "--name", "reader")
  reader = reader:match("hypd_[%w_-]+")
  rc, _, cerr = hypd({ HYPD_TOKEN = reader }, "call", "--api", url, "operation_cancel",
    "operation_id=op-0123456789abcdef")
  t.eq(rc, 1)
  t.like(cerr, "^hypd: FORBIDDEN")
  rc, got, cerr = hypd({ HYPD_TOKEN = token }, "--playbooks", playbooks, "call", "--api", url, "diagnose_nap",
    "seconds=30", "--wait")
  t.eq(rc, 0, cerr)
  t.eq(json.decode(got).status, "succeeded")
  t.like(cerr, "op%-%x+: ")
  t.eq(stop(), 0, "exit status after SIGTERM")
end)

t.test("a second start prints no token: the admin token was shown once", function()
  local url, token, stop, out = serve(nil)
  t.ok(url, "started: " .. tostring(out))
  t.eq(token, nil)
  t.eq(stop(), 0)
  os.execute("rm -rf " .. H.quote(dir))
end)
