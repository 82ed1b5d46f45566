-- The command line, the playbook directory, the embedding API, and the
-- store surviving kill -9. These run the real binary as a user would.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local state = dir .. "/state"
local env = { HYPD_STATE = state }

t.test("hypd version prints the version", function()
  local rc, out = H.run_hypd(env, "version")
  t.eq(rc, 0)
  t.like(out, "^hypd %d+%.%d+%.%d+\n$")
end)

t.test("hypd help and --help on every command print usage and succeed", function()
  for _, args in ipairs { { "help" }, { "--help" }, { "run", "--help" }, { "version", "--help" }, { "test", "--help" } } do
    local rc, out = H.run_hypd(env, table.unpack(args))
    t.eq(rc, 0, table.concat(args, " "))
    t.like(out, "usage: hypd")
  end
end)

t.test("an unknown command is one clear line and exit status 2", function()
  local rc, out, err = H.run_hypd(env, "frobnicate")
  t.eq(rc, 2)
  t.eq(out, "")
  t.eq(err, "hypd: unknown command 'frobnicate' (see hypd help)\n")
end)

t.test("bad options and arguments are one clear line and exit status 2", function()
  local rc, _, err = H.run_hypd(env, "run", "--timeout", "soon", "hello")
  t.eq(rc, 2)
  t.like(err, "^hypd: %-%-timeout must be a positive number of seconds, not 'soon'\n$")
  rc, _, err = H.run_hypd(env, "run", "hello", "novalue")
  t.eq(rc, 2)
  t.like(err, "argument 'novalue' is not key=value")
  rc, _, err = H.run_hypd(env, "run", "hello", "n:={bad")
  t.eq(rc, 2)
  t.like(err, "not JSON")
  rc, _, err = H.run_hypd(env, "run")
  t.eq(rc, 2)
  t.like(err, "run needs a PLAYBOOK")
end)

t.test("hypd run hello prints the JSON result and counts runs in the store", function()
  local rc, out = H.run_hypd(env, "run", "hello", "name=tester")
  t.eq(rc, 0)
  local r = json.decode(out)
  t.eq(r.greeting, "hello, tester")
  t.eq(r.runs, 1)
  out = select(2, H.run_hypd(env, "run", "hello"))
  t.eq(json.decode(out).runs, 2, "the counter survived the restart")
end)

t.test("key:=json passes typed values and --args passes an object", function()
  local pb = H.write(dir .. "/echo.lua", "return { main = function(a) return a end }")
  local rc, out = H.run_hypd(env, "run", "--args", '{"a":1,"b":"x"}', pb, "n:=3", "s=3", "l:=[true,null]", "o:={}")
  t.eq(rc, 0)
  t.eq(json.decode(out), { a = 1, b = "x", n = 3, s = "3", l = json.array { true, json.null }, o = json.object() })
  t.like(out, '"o": {}')
end)

t.test("a failing playbook exits 1 with the error code and message on stderr", function()
  local pb = H.write(dir .. "/bad.lua",
    "return { main = function() hypd.errors.raise('NOT_FOUND', 'cluster demo does not exist') end }")
  local rc, out, err = H.run_hypd(env, "run", pb)
  t.eq(rc, 1)
  t.eq(out, "")
  t.eq(err, "hypd: NOT_FOUND: cluster demo does not exist\n")
end)

t.test("a result that JSON cannot hold is an error, not a success", function()
  local pb = H.write(dir .. "/fn.lua", "return { main = function() return { f = print } end }")
  local rc, out, err = H.run_hypd(env, "run", pb)
  t.eq({ rc, out }, { 1, "" })
  t.eq(err, "hypd: JSON: the result cannot be encoded as JSON: cannot encode a function value (at $.f)\n")
end)

t.test("a missing playbook names where hypd looked", function()
  local rc, _, err = H.run_hypd(env, "run", "nosuch")
  t.eq(rc, 1)
  t.like(err, "no playbook named 'nosuch'")
  t.like(err, "built in: hello")
end)

t.test("the playbook directory overrides a built-in playbook and adds new ones", function()
  local pbdir = dir .. "/playbooks"
  os.execute("mkdir -p " .. pbdir .. "/lib")
  H.write(pbdir .. "/hello.lua", "return { main = function() return 'overridden' end }")
  H.write(pbdir .. "/lib/util.lua", "return { twice = function(x) return 2 * x end }")
  H.write(pbdir .. "/extra.lua", "local u = require 'lib.util'\nreturn { main = function(a) return u.twice(a.n) end }")
  local rc, out = H.run_hypd(env, "--playbooks", pbdir, "run", "hello")
  t.eq({ rc, json.decode(out) }, { 0, "overridden" })
  rc, out = H.run_hypd({ HYPD_STATE = state, HYPD_PLAYBOOKS = pbdir }, "run", "extra", "n:=21")
  t.eq({ rc, json.decode(out) }, { 0, 42 })
end)

t.test("a playbook that sleeps 12 virtual minutes ends at once with the clock 12 minutes on", function()
  local pb = H.write(dir .. "/slow.lua", [[return { main = function()
    local t0 = hypd.now(); hypd.sleep(12 * 60); return hypd.now() - t0 end }]])
  local started = os.time()
  local rc, out = H.run_hypd({ HYPD_STATE = state, HYPD_CLOCK = "virtual" }, "run", pb)
  t.eq({ rc, json.decode(out) }, { 0, 720 })
  t.ok(os.time() - started < 30, "real time stays short")
end)

t.test("--timeout stops a playbook that loops forever", function()
  local pb = H.write(dir .. "/loop.lua", "return { main = function() while true do end end }")
  local rc, _, err = H.run_hypd(env, "run", "--timeout", "0.5", pb)
  t.eq(rc, 1)
  t.like(err, "^hypd: TIMEOUT: ")
end)

t.test("secrets printed by a playbook are redacted in the log", function()
  local pb = H.write(dir .. "/leak.lua", [[return { main = function()
    print("key AKIAIOSFODNN7EXAMPLE token hf_abcdefghijklmnopqrstuvwxyz0123")
    return "done" end }]])
  local rc, _, err = H.run_hypd(env, "run", pb)
  t.eq(rc, 0)
  t.like(err, "key %[REDACTED%] token %[REDACTED%]")
  t.ok(not err:find("AKIAIOSFODNN7EXAMPLE", 1, true), "the key id is not in the log")
end)

t.test("a bad HYPD_CLOCK or log level is refused with a clear message", function()
  local rc, _, err = H.run_hypd({ HYPD_STATE = state, HYPD_CLOCK = "fast" }, "run", "hello")
  t.eq(rc, 1)
  t.like(err, "HYPD_CLOCK 'fast' must be 'virtual' or 'real'")
  rc, _, err = H.run_hypd(env, "--log-level", "loud", "run", "hello")
  t.eq(rc, 1)
  t.like(err, "log level 'loud' is not one of")
end)

t.test("a committed phase survives kill -9 between two writes", function()
  local pb = H.write(dir .. "/crash.lua", [[return { main = function(a)
    if a.read then return { phase = hypd.state.get("phase") or "none" } end
    hypd.state.put("phase", "created")
    print("PHASE-COMMITTED")
    hypd.sleep(60)
    hypd.state.put("phase", "finished")
  end }]])
  local logf = dir .. "/crash.log"
  local p = io.popen(string.format("HYPD_STATE=%s %s run %s >/dev/null 2>%s & echo $!",
    H.quote(state), H.hypd, H.quote(pb), H.quote(logf)))
  local pid = p:read("l")
  p:close()
  local seen = false
  for _ = 1, 500 do
    if (H.read(logf) or ""):find("PHASE-COMMITTED", 1, true) then seen = true break end
    os.execute("sleep 0.02")
  end
  t.ok(seen, "the playbook reached its first phase")
  os.execute("kill -9 " .. pid)
  os.execute("sleep 0.1")
  local rc, out = H.run_hypd(env, "run", pb, "read:=true")
  t.eq({ rc, json.decode(out) }, { 0, { phase = "created" } })
  local _, integrity = H.sh("sqlite3 " .. H.quote(state .. "/hypd.db") .. " 'PRAGMA integrity_check'")
  t.eq(integrity, "ok\n")
end)

t.test("a C program embeds hypd through hypd.h", function()
  local rc, out = H.sh(string.format("HYPD_STATE=%s %s/embed hello '{\"name\":\"embedder\"}'",
    H.quote(state), H.build))
  t.eq(rc, 0)
  t.eq(json.decode(out).greeting, "hello, embedder")
  local rc2, _, err = H.sh(string.format("HYPD_STATE=%s %s/embed nosuch '{}'", H.quote(state), H.build))
  t.eq(rc2, 1)
  t.eq(json.decode(err).code, "NOT_FOUND")
  local rc3, _, err3 = H.sh(string.format("HYPD_STATE=%s %s/embed hello '[1,'", H.quote(state), H.build))
  t.eq(rc3, 1)
  t.eq(json.decode(err3).code, "VALIDATION")
end)

t.cleanup(function() os.execute("rm -rf " .. H.quote(dir)) end)
