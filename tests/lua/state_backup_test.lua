-- hypd backup and hypd restore, as an operator runs them: a backup taken
-- while a real hypd serve writes its state holds the operations made before
-- it and restores into another state directory; the server keeps working;
-- a restore is refused while the server holds the state, and a corrupt, a
-- foreign or a newer file is refused, each leaving the state as it was; an
-- existing backup file is kept unless --force.
local t = require "hypd.tap"
local backup = require "hypd._backup"
local http = require "hypd.http"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local q = H.quote
local dir = H.tmpdir()
local state, other = dir .. "/state", dir .. "/other"
os.execute("mkdir -m 700 " .. q(state))
local srv, why = H.serve_process(state)
t.cleanup(function()
  if srv then srv.stop() end
  os.execute("rm -rf " .. q(dir))
end)

local function hypd(...)
  local args = {}
  for _, a in ipairs { ... } do args[#args + 1] = q(a) end
  return H.sh(H.hypd .. " " .. table.concat(args, " "))
end

local function request(method, path, body)
  local resp = assert(http.request { method = method, url = srv.url .. "/api/v1" .. path,
    body = body and json.encode(body), headers = { authorization = "Bearer " .. srv.token,
      ["content-type"] = body and "application/json" } })
  return resp.status, json.decode(resp.body) or {}
end

-- an operation the server records (it fails at once: the sandbox has no cluster yet)
local function operation(bucket)
  local st, v = request("POST", "/tools/storage_create_s3", { bucket = bucket })
  return (st == 202 or st == 200) and v.operation_id or nil, v
end

local function stored(state_dir, id)
  local rc, out = hypd("--state", state_dir, "call", "operation_get", "operation_id=" .. id)
  return rc == 0 and (json.decode(out) or {}) or nil
end

local before = {}
local file = dir .. "/state.backup"

t.test("a backup taken while the server writes holds the operations made before it", function()
  if not srv then return t.skip("hypd serve did not start: " .. tostring(why)) end
  if H.sh("command -v curl") ~= 0 then return t.skip("no curl to write beside the backup") end
  for i = 1, 5 do
    before[i] = operation("before-" .. i)
    t.ok(before[i], "the server records operation " .. i)
  end
  -- a writer beside the backup: 30 more operations through the REST API while it copies
  H.write(dir .. "/auth", "authorization: Bearer " .. srv.token .. "\ncontent-type: application/json\n")
  local writer = string.format("for i in $(seq 1 30); do curl -s -o /dev/null -H @%s -d '{\"bucket\":\"during-'$i'\"}'" ..
    " %s/api/v1/tools/storage_create_s3; done", q(dir .. "/auth"), srv.url)
  local rc, out, err = H.sh("{ (" .. writer .. ") & sleep 0.2; " .. H.hypd .. " --state " .. q(state) .. " backup " ..
    q(file) .. "; s=$?; wait; exit $s; }")
  t.eq(rc, 0, "hypd backup succeeds: " .. tostring(err))
  local bytes, schema, ops = out:match("to .-: (%d+) bytes, schema version (%d+), (%d+) operations")
  t.ok(bytes, "it prints what it wrote: " .. out)
  io.stdout:write("# the backup holds ", tostring(ops), " operations; the writer made 30 beside it\n")
  t.eq(tonumber(schema), backup.latest(), "the schema version")
  t.ok(tonumber(ops or 0) >= 5, "at least the 5 operations made before it: " .. tostring(ops))
  t.eq(tonumber(bytes), #(H.read(file) or ""), "the size it printed is the file's")
  t.eq((H.read(file) or ""):sub(1, 16), "SQLite format 3\0", "FILE is one SQLite database")
  t.eq(H.read(file .. ".tmp"), nil, "no FILE.tmp is left")
  t.eq(H.read(file .. "-wal"), nil, "and no WAL file beside it: it is self-contained")
  local _, mode = H.sh("stat -c %a " .. q(file))
  t.eq(mode, "600\n", "only its owner may read it")
  t.ok(not (out .. err):find(srv.token, 1, true), "the token appears in nothing it prints")
  local st, v = request("GET", "/operations?limit=200")
  t.eq(st, 200, "the server answers after the backup")
  t.ok(#(v.operations or {}) >= 35, "and holds its 35 operations: " .. #(v.operations or {}))
  t.ok(operation("after-1"), "and records new ones")
end)

t.test("the backup restores into another state directory with those operations", function()
  if not before[5] then return t.skip("no backup was made") end
  local rc, out, err = hypd("--state", other, "restore", file)
  t.eq(rc, 0, "hypd restore succeeds: " .. tostring(err))
  t.like(out, "restored .* into " .. other:gsub("%p", "%%%0") .. "/hypd%.db: %d+ bytes, schema version %d+, %d+ operations")
  t.ok(not out:find("before-restore", 1, true), "a new state directory had no state to keep")
  for i, id in ipairs(before) do
    local rec = stored(other, id)
    t.eq(rec and rec.tool, "storage_create_s3", "operation " .. i .. " is in the restored state")
    t.eq(rec and rec.params and rec.params.bucket, "before-" .. i, "with its parameters")
  end
end)

t.test("restore is refused while the server holds the state, naming its pid and lock; the state is unchanged",
  function()
    if not srv then return t.skip("hypd serve did not start") end
    local pid = (H.read(state .. "/lock") or ""):match("pid (%d+)")
    local rc, out, err = hypd("--state", state, "restore", file)
    t.eq(rc, 1, "exit status 1")
    t.eq(out, "", "nothing on stdout")
    t.like(err, "LOCKED")
    t.ok(pid and err:find("pid " .. pid, 1, true), "it names the server's pid " .. tostring(pid) .. ": " .. err)
    t.ok(err:find(state .. "/lock", 1, true), "and the lock file")
    t.like(err, "Stop it first")
    t.eq(H.read(state .. "/hypd.db.before-restore"), nil, "nothing was replaced")
    t.ok(stored(state, before[1]) and operation("after-2"), "the server's state still works")
  end)

-- files that are not a backup of a state this hypd can use, and what each must say
local function patched(name, offset, bytes)
  local path = dir .. "/" .. name
  H.write(path, H.read(file) or "")
  local f = assert(io.open(path, "r+b"))
  f:seek("set", offset)
  f:write(bytes)
  f:close()
  return path
end

t.test("a corrupt, a foreign or a newer file is refused, and the state is left as it was", function()
  if not H.read(other .. "/hypd.db") then return t.skip("no restored state to protect") end
  local latest = backup.latest()
  local cases = {
    { H.write(dir .. "/text.db", "not a database at all\n"), "not a usable SQLite database" },
    { patched("torn.db", 4096 + 8, string.rep("\255", 2000)), "damaged" },
    { patched("newer.db", 60, string.pack(">I4", latest + 1)),
      "schema version " .. (latest + 1) .. " but this hypd knows only versions up to " .. latest },
    { dir .. "/missing.db", "No such file" },
  }
  H.sh("sqlite3 " .. q(dir .. "/foreign.db") .. " 'CREATE TABLE t(x); PRAGMA user_version = 1'")
  if H.read(dir .. "/foreign.db") then cases[#cases + 1] = { dir .. "/foreign.db", "not a hypd state" } end
  local was = H.read(other .. "/hypd.db")
  for _, c in ipairs(cases) do
    local rc, out, err = hypd("--state", other, "restore", c[1])
    t.eq(rc, 1, c[1] .. ": exit status 1")
    t.eq(out, "", "nothing on stdout")
    t.ok(err:find(c[2], 1, true), c[1] .. " is refused saying " .. c[2] .. ": " .. err)
    t.ok(H.read(other .. "/hypd.db") == was, "the state database is byte for byte what it was")
    t.eq(H.read(other .. "/hypd.db.restore"), nil, "no copy of the file is left in the state directory")
    t.eq(H.read(other .. "/hypd.db.before-restore"), nil, "nothing was set aside")
  end
  t.eq(stored(other, before[2]).tool, "storage_create_s3", "and it still opens with its operations")
end)

t.test("a restore over a state keeps the old one as hypd.db.before-restore", function()
  if not H.read(other .. "/hypd.db") then return t.skip("no restored state") end
  local rc, _, err = hypd("--state", other, "backup", dir .. "/other.backup")
  t.eq(rc, 0, err)
  local was = H.read(dir .. "/other.backup")
  local out
  rc, out, err = hypd("--state", other, "restore", file)
  t.eq(rc, 0, err)
  t.like(out, "previous state is kept as " .. other:gsub("%p", "%%%0") .. "/hypd%.db%.before%-restore")
  -- the kept database is the old state: a backup of a directory holding only it is the same operations
  os.execute("mkdir -m 700 " .. q(dir .. "/kept") .. " && cp " .. q(other .. "/hypd.db.before-restore") .. " " ..
    q(dir .. "/kept/hypd.db"))
  t.ok(was and stored(dir .. "/kept", before[3]), "it opens and holds the old operations")
end)

t.test("backup refuses an existing FILE unless --force", function()
  if not H.read(state .. "/hypd.db") then return t.skip("no state") end
  local target = H.write(dir .. "/taken", "keep me\n")
  local rc, out, err = hypd("--state", state, "backup", target)
  t.eq(rc, 1, "exit status 1")
  t.eq(out, "")
  t.like(err, "EXISTS: .*taken exists: give %-%-force to replace it")
  t.eq(H.read(target), "keep me\n", "the file is untouched")
  t.eq(H.read(target .. ".tmp"), nil, "and nothing was written beside it")
  rc, out, err = hypd("--state", state, "backup", target, "--force")
  t.eq(rc, 0, "with --force it is replaced: " .. err)
  t.like(out, "^hypd: backed up ")
  t.eq((H.read(target) or ""):sub(1, 15), "SQLite format 3", "by the backup")
  rc, out, err = hypd("--state", dir .. "/nothing-here", "backup", dir .. "/x")
  t.eq(rc, 1, "a state directory without a database has nothing to back up")
  t.eq(out, "")
  t.like(err, "NOT_FOUND: there is no state database")
  t.eq(H.read(dir .. "/nothing-here/hypd.db"), nil, "and backup does not create one")
end)

t.test("hypd help lists backup and restore, and each has --help", function()
  local rc, out = hypd("help")
  t.eq(rc, 0)
  t.like(out, "\n  backup FILE %[%-%-force%] +copy the state database")
  t.like(out, "\n  restore FILE +replace the state database")
  for _, c in ipairs { "backup", "restore" } do
    local rc2, text = hypd(c, "--help")
    t.eq(rc2, 0, c .. " --help")
    t.like(text, "^usage: hypd " .. c .. " FILE")
  end
  local rc3, _, err = hypd("restore")
  t.eq(rc3, 2, "restore without FILE is a usage error")
  t.like(err, "restore needs a FILE")
end)
