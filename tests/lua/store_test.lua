-- The store's Lua binding (hypd.store) with the real SQLite store of the
-- host under test. Checks run in order as the file loads (they build on
-- each other); each becomes one TAP line.
local t = require "hypd.tap"
local store = require("hypd.store")
local json = require("hypd.json")
local function ok(c, name)
  local passed = c and true or false
  t.test(name, function() t.ok(passed, name) end)
end

ok(store.schema_version() == 2, "schema version is 2")
ok(store.put("a", {x = 1, y = {1, 2}}) == true, "put a table")
local v = store.get("a")
ok(v.x == 1 and v.y[2] == 2, "get decodes the table")
ok(store.put("s", "str") and store.get("s") == "str", "strings round trip")
ok(store.put("n", 1.5) and store.get("n") == 1.5, "numbers round trip")
ok(store.put("b", false) and store.get("b") == false, "false round trips")
ok(store.get("missing") == nil, "absent key is nil")
ok(store.delete("s") == true and store.delete("s") == false, "delete says whether it existed")
store.put("p%1", 1); store.put("p%2", 2); store.put("px3", 3)
local l = store.list("p%")
local c = 0; for _ in pairs(l) do c = c + 1 end
ok(c == 2 and l["p%1"] == 1, "list prefix literal %")
ok(not pcall(store.put, "k"), "put without a value raises")
ok(not pcall(store.put, "k", function() end), "put of a function raises")
ok(not pcall(store.get, 1 and {}), "get with a table key raises")

ok(store.op_create{id = "o1", tool = "t", target = "c/a", status = "running",
  params = {n = 3}, steps = json.array(), caller = "me", frontend = "mcp"} == true, "op_create")
local r, e = store.op_create{id = "o1", tool = "t", status = "running"}
ok(r == nil and e.code == "EXISTS", "duplicate op id: EXISTS " .. tostring(e))
ok(not pcall(store.op_create, {id = "o2", tool = "t", status = "x", stauts = 1}), "unknown field raises")
ok(not pcall(store.op_create, {id = "o2", status = "x"}), "missing tool raises")
local op = store.op_get("o1")
ok(op.params.n == 3 and json.is_array(op.steps) and op.result == nil and op.status == "running"
   and op.finished_at == nil and type(op.created_at) == "number", "op_get decodes")
ok(store.op_update("o1", {phase = "p1", steps = {{name = "a"}}}) == true, "op_update")
op = store.op_get("o1")
ok(op.phase == "p1" and op.steps[1].name == "a" and op.status == "running" and op.updated_at > op.created_at, "patch semantics")
store.op_update("o1", {status = "failed", error = {code = "X"}, finished_at = true})
op = store.op_get("o1")
ok(op.error.code == "X" and op.finished_at, "error and finished_at")
store.op_update("o1", {error = json.null})
ok(store.op_get("o1").error == nil, "json.null clears error")
r, e = store.op_update("nope", {status = "x"})
ok(r == nil and e.code == "NOT_FOUND", "op_update missing: NOT_FOUND")
ok(not pcall(store.op_update, "o1", {status = json.null}), "clearing status raises")
ok(store.op_get("nope") == nil, "op_get missing is nil")
store.op_create{id = "o2", tool = "t", target = "c/b", status = "running"}
store.op_create{id = "o3", tool = "u", target = "c/a", status = "running"}
local ls = store.op_list()
ok(#ls == 3 and ls[1].id == "o3" and ls[3].id == "o1", "op_list newest first")
ls = store.op_list{status = "running", tool = "t"}
ok(#ls == 1 and ls[1].id == "o2", "op_list filters")
ok(#store.op_list{limit = 2} == 2, "op_list limit")
ok(not pcall(store.op_list, {limit = "x"}), "bad limit raises")

local s1 = store.event("k1", "o1", {a = 1})
local s2 = store.event("k2", nil, nil)
ok(math.type(s1) == "integer" and s2 > s1, "event returns seq")
local evs = store.events(0)
ok(#evs == 2 and evs[1].data.a == 1 and evs[2].operation_id == nil and evs[1].kind == "k1", "events list")
ok(#store.events(s1, 10) == 1, "events after")

ok(store.exec("CREATE TABLE t(a, b)") == 0, "exec ddl")
ok(store.exec("INSERT INTO t VALUES(?, ?)", 1, "x") == 1, "exec insert")
store.exec("INSERT INTO t VALUES(?, ?)", true, nil)
store.exec("INSERT INTO t VALUES(?, ?)", 2.5, "y\0z")
local rows = store.query("SELECT a, b FROM t ORDER BY rowid")
ok(#rows == 3 and rows[1].a == 1 and rows[1].b == "x" and rows[2].a == 1 and rows[2].b == nil
   and rows[3].a == 2.5 and rows[3].b == "y\0z", "query rows typed")
ok(not pcall(store.query, "SELEC"), "bad sql raises")
ok(not pcall(store.query, "SELECT 1; SELECT 2"), "two statements raise")
ok(not pcall(store.exec, "INSERT INTO t VALUES(?, ?)", {}, 1), "table arg raises")
r, e = store.exec("INSERT INTO kv(key) VALUES('z')")
ok(r == nil and e.code == "STORE", "constraint failure returns nil, err: " .. tostring(e))

-- transactions
local a, b = store.transaction(function() store.put("tx", 1); return 1, 2 end)
ok(a == 1 and b == 2 and store.get("tx") == 1, "transaction commits and returns results")
local okk, err = pcall(store.transaction, function() store.put("tx", 2); error({code = "BOOM"}) end)
ok(not okk and err.code == "BOOM" and store.get("tx") == 1, "transaction rolls back and re-raises")
store.transaction(function()
  store.put("tx", 3)
  pcall(store.transaction, function() store.put("tx", 4); error("inner") end)
  ok(store.get("tx") == 3, "nested rollback keeps outer")
end)
ok(store.get("tx") == 3, "outer committed")
local co = coroutine.wrap(function() return pcall(store.transaction, function() coroutine.yield() end) end)
local cok = co()
ok(cok == false, "yield inside a transaction is refused")
ok(store.transaction(function() return store.get("tx") end) == 3, "store usable after")
store.op_create{id = "e1", tool = "t", status = "s", steps = {}, params = {}}
local raw = store.query("SELECT steps, params FROM operations WHERE id = 'e1'")[1]
ok(raw.steps == "[]" and raw.params == "{}", "empty steps table is stored as [] and params as {}")
store.op_update("e1", {steps = json.object(), phase = "p", target = "t"})
raw = store.query("SELECT steps FROM operations WHERE id = 'e1'")[1]
ok(raw.steps == "{}", "a marked table keeps its mark")
store.op_update("e1", {phase = json.null, target = json.null})
local e1 = store.op_get("e1")
ok(e1.phase == nil and e1.target == nil, "json.null clears string fields")
ok(not pcall(store.op_create, {id = "e2", tool = "t", status = "s", phase = json.null}), "json.null in op_create raises")
-- stored text that is not JSON
store.exec("UPDATE kv SET value = '{bad' WHERE key = 'a'")
r, e = store.get("a")
ok(r == nil and e.code == "STORE" and e.message:find("not JSON"), "corrupt kv value: nil, err " .. tostring(e))
r, e = store.list("")
ok(r == nil and e.code == "STORE", "corrupt kv value in list: nil, err")
store.exec("UPDATE operations SET steps = '[' WHERE id = 'o2'")
r, e = store.op_get("o2")
ok(r == nil and e.message:find("steps"), "corrupt op: nil, err " .. tostring(e))
r, e = store.op_list()
ok(r == nil and e.code == "STORE", "corrupt op in list: nil, err")
store.exec("UPDATE events SET data = 'x' WHERE seq = ?", s2)
r, e = store.events()
ok(r == nil and e.code == "STORE", "corrupt event: nil, err " .. tostring(e))
ok(store.exec("DELETE FROM events") == 2, "exec counts deleted rows")
ok(store.exec("SELECT 1") == 0, "exec of a select changes nothing")
