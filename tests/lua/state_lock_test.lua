-- One process at a time owns a state directory: only it runs or resumes
-- operations (two hypd serve that both resumed an unfinished
-- cluster_create_eks created its VPC, subnets and NAT gateway twice). The
-- real binary, as a person runs it: a second hypd serve is refused and
-- names the holder; killed with SIGKILL mid-operation and then started
-- twice at once, exactly one server resumes and every AWS mutation happens
-- once; beside a server, an in-process mutating call is refused while
-- --api, tokens, tools and read tools work, and hypd mcp serves read tools
-- only; a restart during the SIGTERM grace waits and takes over. And the
-- modes: 0700 and 0600 under umask 000 and 022, an open directory refused,
-- a readable one warned about once.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local playbooks = dir .. "/playbooks"
os.execute("mkdir -p " .. H.quote(playbooks))
H.write(playbooks .. "/nap.lua", [[
return tool {
  name = "diagnose_nap", summary = "Sleep a while", kind = "mutating",
  description = "A mutating playbook tool (a one-step operation) that sleeps.",
  params = { seconds = { type = "integer", minimum = 0, required = true },
    password = { type = "string", secret = true } },
  status_tool = "operation_get",
  target = function(p) return "nap/" .. p.seconds end,
  steps = { { name = "nap", run = function(ctx)
    ctx:phase("sleeping " .. ctx.params.seconds .. " s")
    hypd.sleep(ctx.params.seconds)
    ctx.state.result = { slept = ctx.params.seconds }
  end } },
}]])

local function pat(s) return (tostring(s):gsub("%p", "%%%0")) end

local function count(text, plain)
  local n, at = 0, 1
  while true do
    local i = text:find(plain, at, true)
    if not i then return n end
    n, at = n + 1, i + #plain
  end
end

-- hypd(args...) -> status, stdout, stderr; at most 20 s (a hypd serve that
-- should have been refused must fail the test, not hang it)
local function hypd(...)
  local parts = { "timeout 20", H.hypd }
  for _, a in ipairs { ... } do parts[#parts + 1] = H.quote(a) end
  return H.sh(table.concat(parts, " "))
end

local procs, n = {}, 0

-- start(prefix, args...) -> a hypd in the background (prefix: shell words
-- before it, e.g. "umask 000;" or "HYPD_CLOCK=virtual"); returns at once
local function start(prefix, ...)
  n = n + 1
  local base = dir .. "/p" .. n
  local args = {}
  for _, a in ipairs { ... } do args[#args + 1] = H.quote(a) end
  os.execute(string.format("(%s %s %s >%s.out 2>%s.err </dev/null & echo $! >%s.pid; wait $!; echo $? >%s.rc) " ..
    ">/dev/null 2>&1 </dev/null &", prefix or "", H.hypd, table.concat(args, " "), base, base, base, base))
  local p = {}
  function p.out() return H.read(base .. ".out") or "" end
  function p.err() return H.read(base .. ".err") or "" end
  function p.rc()
    local s = H.read(base .. ".rc")
    return s and tonumber(s:match("%d+"))
  end
  function p.pid()
    for _ = 1, 250 do
      local pid = (H.read(base .. ".pid") or ""):match("%d+")
      if pid then return pid end
      os.execute("sleep 0.02")
    end
  end
  -- until(pattern, seconds) -> true once stdout matches, false when it exits or time runs out
  function p.until_out(pattern, seconds)
    for _ = 1, (seconds or 15) * 50 do
      if p.out():find(pattern) then return true end
      if p.rc() then return p.out():find(pattern) ~= nil end
      os.execute("sleep 0.02")
    end
    return false
  end
  function p.finish(seconds)
    for _ = 1, (seconds or 15) * 50 do
      if p.rc() then return p.rc() end
      os.execute("sleep 0.02")
    end
  end
  function p.signal(sig) os.execute("kill -" .. sig .. " " .. tostring(p.pid()) .. " 2>/dev/null") end
  function p.url() return p.out():match("listening on (http://[%d.:]+)") end
  function p.token() return p.out():match("token %b(): (hypd_[%w_-]+)") end
  procs[#procs + 1] = p
  return p
end

local one = dir .. "/one"
local first, url

t.test("a second hypd serve on the same state directory exits 1, naming the holder and pointing at --api", function()
  first = start(nil, "--state", one, "serve", "--listen", "127.0.0.1:0")
  t.ok(first.until_out("stops it"), "the first server started: " .. first.err())
  url = first.url()
  local rc, out, err = hypd("--state", one, "serve", "--listen", "127.0.0.1:0")
  t.eq(rc, 1, out)
  t.like(err, "^hypd: LOCKED: the state directory " .. pat(one) .. " is in use by another hypd process: pid " ..
    first.pid() .. " %(hypd serve %-%-listen 127%.0%.0%.1:0%) since %d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ, " ..
    "serving " .. pat(url))
  t.like(err, "hypd call %-%-api " .. pat(url) .. " TOOL")
  t.like(err, "hypd mcp %-%-api " .. pat(url))
  t.eq(out:find("listening", 1, true), nil, "the second one never listened")
  t.like(H.read(one .. "/lock"), "^pid " .. first.pid() .. "\n")
end)

t.test("beside a running server an in-process hypd call of a mutating tool is refused, while --api, " ..
    "token create, tools and a read tool in-process work", function()
  local _
  local rc, out, err = H.run_hypd(nil, "--state", one, "call", "operation_cancel", "operation_id=op-0123456789abcdef")
  t.eq(rc, 1, out)
  t.like(err, "^hypd: LOCKED: .*pid " .. first.pid() .. " ")
  t.like(err, "Call the tool through it: hypd call %-%-api " .. pat(url) .. " operation_cancel %.%.%.")
  t.like(err, "Set HYPD_TOKEN to a token of that server", "it says what makes the call go to the server")
  rc, _, err = H.run_hypd(nil, "--state", one, "call", "cluster_create_eks", "cluster_tag=locked", "--detach")
  t.eq(rc, 1)
  t.like(err, "^hypd: LOCKED: ")
  rc, out, err = H.run_hypd(nil, "--state", one, "call", "operation_list", "limit=5")
  t.eq(rc, 0, err)
  t.eq(json.decode(out), { operations = json.array() }, "a read tool works, and the refused call left no record")
  local token
  rc, token, err = H.run_hypd(nil, "--state", one, "token", "create", "--scope", "operate", "--name", "beside")
  t.eq(rc, 0, err)
  token = token:match("hypd_[%w_-]+")
  rc, out = H.run_hypd(nil, "--state", one, "tools")
  t.eq(rc, 0)
  t.like(out, "\noperation_cancel +mutating")
  rc, out, err = H.run_hypd({ HYPD_TOKEN = token }, "--state", one, "call", "--api", url, "operation_list")
  t.eq(rc, 0, err)
  t.ok(type(json.decode(out).operations) == "table", "hypd call --api reaches the server")
  -- with a token, the in-process call goes to the server the lock names
  -- (its URL is in the lock): the server's answer, not LOCKED
  rc, out, err = H.run_hypd({ HYPD_TOKEN = token }, "--state", one, "call", "operation_cancel",
    "operation_id=op-0123456789abcdef")
  t.eq(rc, 1, out)
  t.like(err, "calling operation_cancel there %(hypd call %-%-api " .. pat(url) .. " operation_cancel")
  t.like(err, "hypd: NOT_FOUND: ", "the server answered: no such operation")
  t.eq(err:find("LOCKED", 1, true), nil, "not refused")
  rc, out = H.run_hypd(nil, "--state", one, "token", "list", "--json")
  t.eq(rc, 0)
  t.like(out, '"beside"')
  rc, out, err = H.run_hypd(nil, "--state", one, "eks-token", "--cluster", "demo")
  t.eq(rc, 0, err)
  t.like(out, "ExecCredential")
  t.like(H.read(one .. "/lock"), "^pid " .. first.pid() .. "\n", "the server still holds the lock")
end)

t.test("hypd mcp in-process beside a server serves read tools and answers mutating ones with LOCKED", function()
  local calls = dir .. "/mcp.in"
  H.write(calls, table.concat({
    json.encode { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
      capabilities = json.object(), clientInfo = { name = "lock-test", version = "1" } } },
    json.encode { jsonrpc = "2.0", method = "notifications/initialized" },
    json.encode { jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = "operation_list",
      arguments = { limit = 2 } } },
    json.encode { jsonrpc = "2.0", id = 3, method = "tools/call", params = { name = "operation_cancel",
      arguments = { operation_id = "op-0123456789abcdef" } } },
  }, "\n") .. "\n")
  local rc, out, err = H.sh("(cat " .. H.quote(calls) .. " | " .. H.hypd .. " --state " .. H.quote(one) .. " mcp)")
  t.eq(rc, 0, err)
  local by = {}
  for line in out:gmatch("[^\n]+") do
    local m = json.decode(line)
    if m and m.id then by[m.id] = m end
  end
  t.eq(by[2] and by[2].result.isError, nil, "the read tool answered")
  t.eq(by[2] and by[2].result.structuredContent, { operations = json.array() })
  local e = by[3] and by[3].result.structuredContent.error or {}
  t.eq(by[3] and by[3].result.isError, true)
  t.eq(e.code, "LOCKED")
  t.like(e.message or "", "pid " .. first.pid() .. " %(hypd serve")
  t.like(e.message or "", "hypd mcp %-%-api " .. pat(url))
  t.like(err, "serves read tools only")
  t.like(H.read(one .. "/lock"), "^pid " .. first.pid() .. "\n")
  first.signal("TERM")
  t.eq(first.finish(), 0, "the first server stops")
  t.eq(H.read(one .. "/lock"), "", "and empties the lock file as it releases it")
end)

t.test("a restart during the SIGTERM grace waits for the old server to stop, then takes over", function()
  local s = dir .. "/restart"
  local args = { "--state", s, "--playbooks", playbooks, "serve", "--listen", "127.0.0.1:0", "--grace", "2" }
  local old = start(nil, table.unpack(args))
  t.ok(old.until_out("stops it"), "the old server started: " .. old.err())
  local rc, out, err = H.run_hypd({ HYPD_TOKEN = old.token() }, "--state", s, "--playbooks", playbooks, "call",
    "--api", old.url(), "diagnose_nap", "seconds=3600")
  t.eq(rc, 0, err)
  local id = (json.decode(out) or {}).operation_id
  t.like(id, "^op%-")
  old.signal("TERM")
  local stopping = false
  for _ = 1, 250 do
    stopping = (H.read(s .. "/lock") or ""):find("status stopping", 1, true) ~= nil
    if stopping then break end
    os.execute("sleep 0.02")
  end
  t.ok(stopping, "the old server marked the lock stopping: " .. tostring(H.read(s .. "/lock")))
  t.like(H.read(s .. "/lock"), "\ngrace 2\n")
  local new = start(nil, table.unpack(args))
  t.ok(new.until_out("stops it", 20), "the new server started: " .. new.err())
  t.eq(old.finish(), 0, "the old server exited 0")
  t.like(new.err(), "belongs to pid " .. old.pid() .. " %(hypd serve [^)]*%) since [^,]*, serving [^,]*, stopping; " ..
    "waiting up to 7 s for it to stop")
  t.like(new.err(), "the previous process has stopped; taking over")
  t.like(new.err(), "resuming diagnose_nap " .. pat(id))
  local stopped = old.err():match("(%S+) info  serve: stopped")
  local resumed = new.err():match("(%S+) info  op: resuming")
  t.ok(stopped and resumed and stopped <= resumed, "the old one stopped (" .. tostring(stopped) ..
    ") before the new one resumed (" .. tostring(resumed) .. ")")
  t.like(H.read(s .. "/lock"), "^pid " .. new.pid() .. "\n")
  new.signal("KILL")
  new.finish()
end)

t.test("killed with SIGKILL mid-operation, then started twice at once: one server resumes, the other exits 1, " ..
    "every AWS mutation happens once", function()
  local s = dir .. "/crash"
  local args = { "--state", s, "serve", "--listen", "127.0.0.1:0", "--sandbox" }
  local a = start("HYPD_CLOCK=virtual", table.unpack(args))
  t.ok(a.until_out("stops it"), "a server with the sandbox started: " .. a.err())
  -- the POST and the SIGKILL in one shell: the kill lands a millisecond after the 202
  local _, out = H.sh(string.format("(curl -s -X POST -H 'authorization: Bearer %s' -H 'content-type: " ..
    "application/json' -d '{\"cluster_tag\":\"twice\"}' %s/api/v1/tools/cluster_create_eks; kill -9 %s)",
    a.token(), a.url(), a.pid()))
  local id = (json.decode(out) or {}).operation_id
  t.like(id, "^op%-", out)
  a.finish()
  local _, status = H.sh("sqlite3 " .. H.quote(s .. "/hypd.db") .. " \"SELECT status FROM operations WHERE id = '" ..
    tostring(id) .. "'\"")
  t.eq(status, "running\n", "the operation was cut off mid-way")
  local b, c = start("HYPD_CLOCK=virtual", table.unpack(args)), start("HYPD_CLOCK=virtual", table.unpack(args))
  for _ = 1, 750 do
    if (b.rc() or b.out():find("stops it", 1, true)) and (c.rc() or c.out():find("stops it", 1, true)) then break end
    os.execute("sleep 0.02")
  end
  local up = {}
  for _, p in ipairs { b, c } do if p.out():find("stops it", 1, true) and not p.rc() then up[#up + 1] = p end end
  t.eq(#up, 1, "exactly one server runs")
  local winner, loser = up[1] or b, up[1] == b and c or b
  t.eq(loser.rc(), 1, "the other exited 1")
  t.like(loser.err(), "LOCKED: the state directory " .. pat(s) .. " is in use by another hypd process: pid " ..
    winner.pid() .. " ")
  t.eq(loser.err():find("resuming", 1, true), nil, "the other resumed nothing")
  t.like(winner.err(), "resumed 1 running operations")
  local view
  for _ = 1, 500 do
    local _, got = H.sh("curl -s -H 'authorization: Bearer " .. tostring(winner.token()) .. "' " ..
      tostring(winner.url()) .. "/api/v1/operations/" .. tostring(id))
    view = json.decode(got or "") or {}
    if view.status and view.status ~= "running" then break end
    os.execute("sleep 0.02")
  end
  t.eq(view.status, "succeeded", json.encode(view.error or json.null))
  local sandbox = winner.out():match("export AWS_ENDPOINT_URL=(http://[%d.:]+)")
  local _, audit = H.sh("curl -s " .. tostring(sandbox) .. "/_sandbox/audit")
  local counts = {}
  for _, e in ipairs(json.decode(audit or "") or {}) do counts[e.operation] = (counts[e.operation] or 0) + 1 end
  for _, k in ipairs { "CreateVpc", "CreateInternetGateway", "AttachInternetGateway", "AllocateAddress",
                       "CreateNatGateway", "CreateSecurityGroup", "CreateRole", "CreateCluster" } do
    t.eq(counts[k], 1, k)
  end
  t.eq(counts.CreateSubnet, 4, "CreateSubnet")
  t.eq(counts.CreateRouteTable, 2, "CreateRouteTable")
  winner.signal("KILL")
  winner.finish()
end)

for _, mask in ipairs { "000", "022" } do
  t.test("under umask " .. mask .. " the state directory and its subdirectories are 0700, every file in them 0600",
      function()
    local s = dir .. "/umask" .. mask
    -- an operation with a secret, left running: the secret is kept under secrets/
    local rc, _, err = H.sh("umask " .. mask .. "; " .. H.hypd .. " --state " .. H.quote(s) .. " --playbooks " ..
      H.quote(playbooks) .. " call diagnose_nap seconds=3600 password=hunter2-hunter2 --detach")
    t.eq(rc, 0, err)
    -- a server resumes it: while it runs the store has its WAL and SHM files
    local p = start("umask " .. mask .. ";", "--state", s, "--playbooks", playbooks, "serve", "--listen",
      "127.0.0.1:0")
    t.ok(p.until_out("stops it"), "the server started: " .. p.err())
    local _, list = H.sh("find " .. H.quote(s) .. " -printf '%m %y %P\\n'")
    local seen, wrong = {}, {}
    for m, kind, name in list:gmatch("(%d+) (%a) ([^\n]*)") do
      seen[name:gsub("op%-%x+", "op-ID")] = true
      if (kind == "d" and m ~= "700") or (kind ~= "d" and m ~= "600") then wrong[#wrong + 1] = m .. " " .. name end
    end
    t.eq(wrong, {}, "nothing with another mode")
    for _, name in ipairs { "", "hypd.db", "hypd.db-wal", "hypd.db-shm", "lock", "secrets", "secrets/op-ID.json" } do
      t.ok(seen[name], "there is " .. (name == "" and "the directory" or name))
    end
    p.signal("KILL") -- (a graceful stop would give the nap its 10 s)
    p.finish()
  end)
end

t.test("a state directory or store other users can write is refused, with the chmod that fixes it", function()
  local s = dir .. "/open"
  os.execute("mkdir -m 777 " .. H.quote(s))
  local _
  local rc, out, err = H.run_hypd(nil, "--state", s, "tools")
  t.eq(rc, 1, out)
  t.like(err, "^hypd: refusing the state directory " .. pat(s) .. ": its group and other users can write it " ..
    "%(mode 0777%).*fix it with:  chmod 700 " .. pat(s) .. "\n$")
  rc, _, err = hypd("--state", s, "serve", "--listen", "127.0.0.1:0")
  t.eq(rc, 1)
  t.like(err, "chmod 700 ")
  os.execute("chmod 770 " .. H.quote(s))
  rc, _, err = H.run_hypd(nil, "--state", s, "tools")
  t.eq(rc, 1)
  t.like(err, "its group can write it %(mode 0770%)")
  os.execute("chmod 700 " .. H.quote(s))
  rc = H.run_hypd(nil, "--state", s, "tools")
  t.eq(rc, 0, "fixed as the message says, it works")
  os.execute("chmod 666 " .. H.quote(s .. "/hypd.db"))
  rc, _, err = H.run_hypd(nil, "--state", s, "token", "list")
  t.eq(rc, 1)
  t.like(err, "can write " .. pat(s .. "/hypd.db") .. " %(mode 0666%); fix it with:  chmod 600 " ..
    pat(s .. "/hypd.db"))
end)

t.test("a state directory other users can read works, with one warning that says how to fix it", function()
  local s = dir .. "/readable"
  os.execute("mkdir -m 755 " .. H.quote(s))
  local rc, _, err = H.run_hypd(nil, "--state", s, "tools")
  t.eq(rc, 0, err)
  t.eq(count(err, "can read"), 1, err)
  t.like(err, "warn  state: its group and other users can read the state directory " .. pat(s) .. " %(mode 0755%)")
  t.like(err, "chmod 700 " .. pat(s))
  os.execute("chmod 644 " .. H.quote(s .. "/hypd.db"))
  rc, _, err = H.run_hypd(nil, "--state", s, "call", "operation_list")
  t.eq(rc, 0, err)
  t.eq(count(err, "can read"), 1, "still one warning with a readable store in it: " .. err)
  os.execute("chmod 700 " .. H.quote(s) .. " && chmod 600 " .. H.quote(s .. "/hypd.db"))
  rc, _, err = H.run_hypd(nil, "--state", s, "tools")
  t.eq({ rc, err }, { 0, "" }, "none once fixed")
end)

t.cleanup(function()
  for _, p in ipairs(procs) do
    if not p.rc() then
      p.signal("KILL")
      p.finish()
    end
  end
  os.execute("rm -rf " .. H.quote(dir))
end)
