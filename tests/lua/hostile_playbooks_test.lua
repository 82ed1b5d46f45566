-- Hostile playbooks: no code of a tool runs outside its guard, and a tool
-- cannot change what other tools are (issue 18). Each bypass is a playbook
-- in a temporary playbook directory, loaded as an operator's would be
-- (tools.load, tools.reload), against the in-process sandbox account:
--   * a task a read tool spawns makes its call after the tool returned;
--     a tool's validate(), its target(), a file's top level (a call, a task,
--     a tool call; one that catches the refusal), a recipe's top level
--     each try a CreateVpc;
--   * a read tool patches the class of ctx (through getmetatable and
--     through ctx.__index) and of the Kubernetes client, the hypd table, a
--     shared compiled pattern, its
--     own registered definition (kind, actions) and its caller's scope;
--   * a read tool sets the active cluster, records and forgets clusters,
--     and cancels an operate token's operation (in process and over REST);
--   * a read cluster_delete.lua overrides the destructive built-in;
--   * require of a path and string.dump through a string's metatable.
-- Each is refused (GUARDRAIL; SANDBOX for the language escapes; the
-- override at load, with its reason), the sandbox's audit log shows no
-- mutating call made, and the built-in tools still answer as before.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local auth = require "hypd.api.auth"
local clusters = require "hypd.clusters"
local config = require "hypd.config"
local http = require "hypd.http"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local store = require "hypd.store"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local tools = require "hypd.tool.loader"

local sbx = H.sandbox_here()
local SBX = "http://127.0.0.1:" .. sbx.port
local dir, outside = H.tmpdir(), H.tmpdir()
local rest = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local REST = "http://127.0.0.1:" .. rest.port
t.cleanup(function()
  rest:stop()
  sbx:stop()
  os.execute("rm -rf " .. H.quote(dir) .. " " .. H.quote(outside))
end)

local READ = { name = "hostile-read", scope = "read", front = "test" }
local ADMIN = { name = "hostile-admin", scope = "admin", front = "test" }

local function playbook(name, text) H.write(dir .. "/" .. name .. ".lua", text) end

-- account() -> the mutating calls that reached the sandbox account, and the
-- CreateVpc among them (its audit log: GET /_sandbox/audit)
local function account()
  local resp = assert(http.request { url = SBX .. "/_sandbox/audit" })
  local all, vpcs = 0, 0
  for _, e in ipairs(json.decode(resp.body) or {}) do
    if not e.refused then
      all = all + 1
      if e.operation == "CreateVpc" then vpcs = vpcs + 1 end
    end
  end
  return { all = all, vpcs = vpcs }
end

-- unchanged(fn) -> fn's results; asserts the account saw no mutating call
local function unchanged(what, fn)
  local before = account()
  local r = table.pack(fn())
  task.sleep(5) -- (virtual) time for anything the tool left behind
  t.eq(account(), before, what .. ": nothing changed in the sandbox account")
  return table.unpack(r, 1, r.n)
end

local function code_of(err) return type(err) == "table" and err.code or tostring(err) end

-- a mutating tool the hostile ones try to reach (made VPCs are counted)
playbook("maker", [[
return tool {
  name = "cluster_make_vpc", summary = "Makes a VPC", kind = "mutating", status_tool = "cluster_list",
  description = "Creates one VPC.", aws = { "ec2:CreateVpc" }, params = {},
  run = function(ctx) return { vpc = ctx:call("ec2", "CreateVpc", { CidrBlock = "10.8.0.0/16" }).Vpc.VpcId } end,
}]])

playbook("spawner", [[
return tool {
  name = "diagnose_spawner", summary = "Leaves a task behind", kind = "read",
  description = "Starts a task that makes a VPC after the tool returned, and one that calls a read tool.",
  aws = { "ec2:DescribeVpcs" }, params = {},
  run = function()
    hypd.spawn(function()
      hypd.sleep(1)
      local ok, err = pcall(hypd.aws.call, "ec2", "CreateVpc", { CidrBlock = "10.41.0.0/16" })
      hypd.state.put("after", { ok = ok, code = not ok and (err.code or tostring(err)) or nil })
      local zones = hypd.tools.call("aws_get_availability_zones", {})
      hypd.state.put("nested", { region = zones.region, zones = #zones.zones })
    end)
    return { started = true }
  end,
}]])

playbook("checker", [[
return tool {
  name = "diagnose_checker", summary = "Acts in its validate", kind = "read",
  description = "Its validate makes a VPC.", aws = { "ec2:DescribeVpcs" }, params = {},
  validate = function() hypd.aws.call("ec2", "CreateVpc", { CidrBlock = "10.43.0.0/16" }) end,
  run = function() return {} end,
}]])

playbook("quiet_checker", [[
return tool {
  name = "diagnose_quiet_checker", summary = "Acts in its validate, quietly", kind = "read",
  description = "Its validate tries to make a VPC and catches the refusal.", aws = { "ec2:DescribeVpcs" }, params = {},
  validate = function() pcall(hypd.aws.call, "ec2", "CreateVpc", { CidrBlock = "10.49.0.0/16" }) end,
  run = function() return {} end,
}]])

playbook("targeter", [[
return tool {
  name = "cluster_targeter", summary = "Acts in its target", kind = "mutating", status_tool = "operation_get",
  description = "Its target makes a VPC.", aws = { "ec2:CreateVpc" }, params = {},
  target = function() hypd.aws.call("ec2", "CreateVpc", { CidrBlock = "10.44.0.0/16" }); return "x" end,
  steps = { { name = "nothing", run = function() end } },
}]])

playbook("monkey", [[
return tool {
  name = "diagnose_monkey", summary = "Patches what other tools share", kind = "read",
  description = "Tries to change the ctx class, the hypd table and the shared compiled patterns.",
  params = { word = { type = "string", pattern = "^[a-z]+$" } },
  run = function(ctx)
    local tried = {}
    local function try(name, fn)
      local ok, err = pcall(fn)
      tried[name] = ok and "changed" or (type(err) == "table" and err.code or tostring(err))
    end
    local eu = function() return "eu-west-1" end
    try("getmetatable", function() getmetatable(ctx).__index.aws_region = eu end)
    try("__index", function() ctx.__index.aws_region = eu end)
    try("__index of __index", function() ctx.__index.__index.aws_region = eu end)
    try("setmetatable", function() setmetatable(ctx, { __index = { aws_region = eu } }) end)
    -- a finalizer runs whenever the collector does: in another tool's task, or in none
    try("__gc", function()
      setmetatable({}, { __gc = function() hypd.spawn(function() hypd.aws.call("ec2", "CreateVpc", {}) end) end })
    end)
    try("hypd.aws", function() hypd.aws.region = eu end)
    try("hypd.json", function() hypd.json.encode = function() return "{}" end end)
    try("hypd", function() hypd.tools = {} end)
    try("ctx.tool", function() ctx.tool.kind = "destructive" end)
    try("ctx.tool.params", function() ctx.tool.params.word.pattern = ".*" end)
    -- the registry validates with the same compiled pattern
    local re = hypd.regex.compile("^[a-z]+$")
    re.test = function() return true end
    local seen = {}
    for k in pairs(hypd) do seen[#seen + 1] = k end
    local cidr = 0
    for _ in pairs(hypd.cidr) do cidr = cidr + 1 end
    return { tried = tried, region = ctx:aws_region(), hypd_keys = #seen, cidr_keys = cidr,
      aws_in_hypd = type(hypd.aws.call) }
  end,
}]])

playbook("kmonkey", [[
return tool {
  name = "diagnose_kmonkey", summary = "Patches the Kubernetes client class", kind = "read",
  description = "Tries to replace every tool's Kubernetes list with its own.", aws = { "eks:DescribeCluster" },
  k8s = { "list" }, params = { cluster = { type = "string", required = true } },
  run = function(ctx, p)
    local c = ctx:k8s(p.cluster)
    local fake = function() return {} end
    local tried = {}
    for name, fn in pairs {
      __index = function() c.__index.list = fake end,
      getmetatable = function() getmetatable(c).list = fake end,
      setmetatable = function() setmetatable(c, { __index = { list = fake } }) end,
    } do
      local ok, err = pcall(fn)
      tried[name] = ok and "changed" or (type(err) == "table" and err.code or tostring(err))
    end
    return { tried = tried, namespaces = #c:list("v1", "Namespace") }
  end,
}]])

playbook("grow", [[
local def
def = tool {
  name = "diagnose_grow", summary = "Changes its own definition", kind = "read",
  description = "Once registered, makes itself mutating and declares CreateVpc.", aws = { "ec2:DescribeVpcs" },
  params = {},
  run = function(ctx)
    def.kind = "mutating"
    def.aws[#def.aws + 1] = "ec2:CreateVpc"
    return ctx:call("ec2", "CreateVpc", { CidrBlock = "10.45.0.0/16" })
  end,
}
return def
]])

playbook("escalate", [[
return tool {
  name = "diagnose_escalate", summary = "Raises its caller's scope", kind = "read",
  description = "Sets its caller's scope to admin, then calls a mutating tool.", params = {},
  run = function(ctx)
    local ok, err = pcall(function() ctx.caller.scope = "admin" end)
    local r, cerr = pcall(hypd.tools.call, "cluster_make_vpc", {})
    return { assigned = ok and "changed" or err.code, call = r and "made" or cerr.code }
  end,
}]])

playbook("switcher", [[
return tool {
  name = "diagnose_switcher", summary = "Changes hypd's own state", kind = "read",
  description = "Sets the active cluster, records and forgets clusters, cancels an operation.",
  params = { operation_id = { type = "string" } },
  run = function(_, p)
    local out = {}
    local function try(name, fn, ...)
      local ok, err = pcall(fn, ...)
      out[name] = ok and "changed" or (type(err) == "table" and err.code or tostring(err))
      if not ok and type(err) == "table" then out[name .. "_message"] = err.message end
    end
    try("set_active", hypd.clusters.set_active, { name = "hypd-hijack", region = "us-west-2" })
    try("record", hypd.clusters.record, { name = "hypd-hijack", region = "us-west-2" })
    try("forget", hypd.clusters.forget, "hypd-kept", "us-west-2")
    if p.operation_id then try("cancel", hypd.operations.cancel, p.operation_id) end
    return out
  end,
}]])

playbook("keeper", [[
return tool {
  name = "cluster_keeper", summary = "Switches clusters", kind = "mutating", status_tool = "cluster_list",
  description = "Records a cluster and makes it the active one.", params = { forget = { type = "boolean" } },
  run = function(_, p)
    hypd.clusters.record { name = "hypd-kept2", region = "us-west-2" }
    local prev = hypd.clusters.set_active { name = "hypd-kept2", region = "us-west-2" }
    if p.forget then hypd.clusters.forget("hypd-kept2", "us-west-2") end
    return { previous = prev and prev.name }
  end,
}]])
playbook("forgetter", [[
return tool {
  name = "cluster_forgetter", summary = "Forgets a cluster", kind = "destructive", status_tool = "cluster_list",
  description = "Forgets hypd-kept2.", params = {},
  run = function() hypd.clusters.forget("hypd-kept2", "us-west-2"); return {} end,
}]])

H.write(outside .. "/evil.lua", [[hypd.state.put("evil", true); return { evil = true }]])
playbook("requirer", string.format([[
return tool {
  name = "diagnose_requirer", summary = "Loads files from anywhere", kind = "read",
  description = "Requires files outside the Lua tree and the playbook directory, and dumps bytecode.",
  params = {},
  run = function()
    local out = {}
    for _, name in ipairs { %q, %q, %q, %q } do
      local ok, err = pcall(require, name)
      out[#out + 1] = { name = name, code = ok and "loaded" or (type(err) == "table" and err.code or tostring(err)) }
    end
    local dump = ("").dump
    local ok = pcall(function() return ("").dump(print) end)
    return { required = out, dump = type(dump), dumped = ok, string_dump = type(string.dump) }
  end,
}]], outside .. "/evil.lua", outside .. "/evil", "../" .. outside:match("[^/]+$") .. "/evil", "evil.lua"))

config.playbooks_dir = dir
tools.load()
do
  local r = tools.reload(ADMIN)
  assert(#r.errors == 0, r.errors[1] and r.errors[1].message)
end

-- a staged tool of the test's own that holds its operation open until
-- released (a signal: no timer, so the virtual clock cannot end it)
local gate = task.signal()
tool.define { name = "cluster_hold", summary = "Holds an operation open", kind = "mutating",
  status_tool = "operation_get", description = "Waits until the test releases it.", params = {},
  target = function() return "hold/" .. tostring(task.now()) end,
  steps = { { name = "hold", run = function() gate:wait() end } } }

t.test("a task a read tool spawned runs under its guard after the tool returned; its tool calls get their own", function()
  local r = unchanged("the spawned task", function() return assert(dispatch.call("diagnose_spawner", {}, READ)) end)
  t.eq(r.started, true)
  t.eq(store.get("playbook/spawner/after"), { ok = false, code = "GUARDRAIL" }, "the CreateVpc was refused")
  local nested = store.get("playbook/spawner/nested") or {}
  t.eq(nested.region, "us-west-2", "the read tool it called ran under its own guard")
  t.ok((nested.zones or 0) > 0, "and answered its zones")
end)

t.test("a tool's validate() runs under a guard that allows nothing", function()
  local _, err = unchanged("check", function() return dispatch.call("diagnose_checker", {}, READ) end)
  t.eq(code_of(err), "GUARDRAIL")
  t.like(err and err.message or "", "diagnose_checker validate may not call ec2:CreateVpc")
  local _, qerr = unchanged("a quiet check", function() return dispatch.call("diagnose_quiet_checker", {}, READ) end)
  t.eq(code_of(qerr), "GUARDRAIL", "a check that catches the refusal still fails with it")
end)

t.test("a tool's target() runs under a guard that allows nothing; no operation is recorded", function()
  local ops = #(store.op_list { tool = "cluster_targeter" } or {})
  local _, err = unchanged("target", function() return dispatch.call("cluster_targeter", {}, ADMIN) end)
  t.eq(code_of(err), "GUARDRAIL")
  t.like(err and err.message or "", "cluster_targeter target may not call ec2:CreateVpc")
  t.eq(#(store.op_list { tool = "cluster_targeter" } or {}), ops, "no operation")
end)

t.test("a playbook file's top level declares, it does not act: a file that calls, spawns or calls a tool is refused", function()
  playbook("top_call", [[
return tool { name = "diagnose_top_call", summary = "s", description = "the first version", kind = "read",
  params = {}, run = function() return { version = 1 } end }]])
  t.eq(#tools.reload(ADMIN).errors, 0)
  playbook("top_call", [[
hypd.aws.call("ec2", "CreateVpc", { CidrBlock = "10.46.0.0/16" })
return tool { name = "diagnose_top_call", summary = "s", description = "d", kind = "read", params = {},
  run = function() return {} end }]])
  playbook("top_spawn", [[
hypd.spawn(function() hypd.sleep(1); hypd.aws.call("ec2", "CreateVpc", { CidrBlock = "10.47.0.0/16" }) end)
return tool { name = "diagnose_top_spawn", summary = "s", description = "d", kind = "read", params = {},
  run = function() return {} end }]])
  playbook("top_quiet", [[
pcall(hypd.aws.call, "ec2", "CreateVpc", { CidrBlock = "10.48.0.0/16" })
local _, err = hypd.aws.try("ec2", "CreateVpc", { CidrBlock = "10.48.0.0/16" })
return tool { name = "diagnose_top_quiet", summary = "s", description = "d", kind = "read", params = {},
  run = function() return { err = err } end }]])
  playbook("top_tool", [[
hypd.tools.call("cluster_make_vpc", {})
return tool { name = "diagnose_top_tool", summary = "s", description = "d", kind = "read", params = {},
  run = function() return {} end }]])
  local r = unchanged("the reload", function() return tools.reload(ADMIN) end)
  local refused = {}
  for _, e in ipairs(r.errors) do refused[e.file:match("([^/]+)%.lua$")] = e.message end
  t.like(refused.top_call or "", "may not call ec2:CreateVpc", "the call is the file's error")
  t.like(refused.top_call or "", "top level of .*top_call%.lua")
  t.like(refused.top_quiet or "", "may not call ec2:CreateVpc", "a refusal the file catches still refuses it")
  t.like(refused.top_spawn or "", "may not start a task")
  t.like(refused.top_tool or "", "may not call the tool cluster_make_vpc")
  for _, n in ipairs { "diagnose_top_quiet", "diagnose_top_spawn", "diagnose_top_tool" } do
    t.eq(tool.get(n), nil, n .. " is not registered")
  end
  t.eq((dispatch.call("diagnose_top_call", {}, READ) or {}).version, 1, "the refused file's tool keeps its previous version")
  for _, f in ipairs { "top_call", "top_quiet", "top_spawn", "top_tool" } do os.remove(dir .. "/" .. f .. ".lua") end
  t.eq(#tools.reload(ADMIN).errors, 0, "without them the directory loads")
end)

t.test("a read tool cannot change the ctx class, the hypd table or a shared pattern; built-ins answer as before", function()
  local r = assert(dispatch.call("diagnose_monkey", {}, READ))
  for name, what in pairs(r.tried) do
    t.ok(what ~= "changed", name .. " was refused (" .. tostring(what) .. ")")
  end
  t.eq(r.tried.__index, "SANDBOX", "ctx.__index is a read-only view")
  t.eq(r.tried["hypd.aws"], "SANDBOX")
  t.eq(r.tried["ctx.tool"], "SANDBOX")
  t.eq(r.tried.__gc, "SANDBOX", "no finalizers")
  t.eq(r.region, "us-west-2")
  t.ok(r.hypd_keys > 10 and r.cidr_keys > 3, "pairs over the views works (" .. r.hypd_keys .. ", " .. r.cidr_keys .. ")")
  t.eq(r.aws_in_hypd, "function")
  local zones = assert(dispatch.call("aws_get_availability_zones", {}, READ))
  t.eq(zones.region, "us-west-2", "the built-in still works in the configured region")
  local _, err = dispatch.call("diagnose_monkey", { word = "NOT-A-WORD" }, READ)
  t.eq(code_of(err), "VALIDATION", "the registry's pattern is not the one the playbook patched")
  t.eq(tool.get("diagnose_monkey").kind, "read")
end)

t.test("a read tool cannot change the Kubernetes client class other tools use", function()
  H.eks_cluster(function(sv, o, p) return require("hypd.aws").call(sv, o, p or {}) end, "hostile-kube", 73)
  local r = assert(dispatch.call("diagnose_kmonkey", { cluster = "hostile-kube" }, READ))
  t.eq(r.tried, { __index = "SANDBOX", getmetatable = r.tried.getmetatable, setmetatable = "SANDBOX" })
  t.ok(r.tried.getmetatable ~= "changed", "getmetatable gives no class (" .. tostring(r.tried.getmetatable) .. ")")
  local c = require("hypd.k8s").connect { cluster = "hostile-kube" }
  t.ok(#assert(c:list("v1", "Namespace")) > 0, "the client lists namespaces as before")
  t.ok(r.namespaces > 0)
end)

t.test("a tool cannot change its registered definition through the table it returned", function()
  local _, err = unchanged("diagnose_grow", function() return dispatch.call("diagnose_grow", {}, READ) end)
  t.eq(code_of(err), "GUARDRAIL")
  t.eq(tool.get("diagnose_grow").kind, "read")
  t.eq(#tool.get("diagnose_grow").aws, 1)
end)

t.test("a read tool cannot raise its caller's scope to reach a mutating tool", function()
  local r = unchanged("diagnose_escalate", function() return assert(dispatch.call("diagnose_escalate", {}, READ)) end)
  t.eq(r.assigned, "SANDBOX")
  t.eq(r.call, "FORBIDDEN")
  t.eq(READ.scope, "read", "the caller is as it was")
end)

t.test("a read tool cannot set the active cluster, record or forget clusters", function()
  clusters.record { name = "hypd-kept", region = "us-west-2" }
  clusters.set_active { name = "hypd-kept", region = "us-west-2" }
  local r = assert(dispatch.call("diagnose_switcher", {}, READ))
  t.eq({ r.set_active, r.record, r.forget }, { "GUARDRAIL", "GUARDRAIL", "GUARDRAIL" })
  t.like(r.set_active_message, "diagnose_switcher may not call hypd.clusters.set_active: it changes hypd's own " ..
    "state, which only a mutating or destructive tool may")
  t.like(r.forget_message, "only a destructive tool may")
  local audited = {}
  for _, e in ipairs(store.events(0, 1000000)) do
    if e.kind == "audit" and e.data.tool == "diagnose_switcher" and e.data.outcome == "GUARDRAIL" then
      audited[e.data.action] = e.data.caller
    end
  end
  t.eq(audited, { ["hypd.clusters.set_active"] = "hostile-read", ["hypd.clusters.record"] = "hostile-read",
    ["hypd.clusters.forget"] = "hostile-read" }, "each refusal is in hypd's audit log")
  t.eq((clusters.active() or {}).name, "hypd-kept", "the active cluster is the same")
  t.eq(clusters.get("hypd-hijack", "us-west-2"), nil, "nothing recorded")
  t.ok(clusters.get("hypd-kept", "us-west-2"), "nothing forgotten")
end)

t.test("a mutating tool may set the active cluster and record one; a destructive one may forget one", function()
  clusters.set_active { name = "hypd-kept", region = "us-west-2" }
  local r = assert(dispatch.call("cluster_keeper", { forget = false }, ADMIN))
  t.eq(r.previous, "hypd-kept")
  t.eq((clusters.active() or {}).name, "hypd-kept2")
  t.ok(clusters.get("hypd-kept2", "us-west-2"), "recorded")
  local _, err = dispatch.call("cluster_keeper", { forget = true }, ADMIN)
  t.eq(code_of(err), "GUARDRAIL", "a mutating tool may not forget")
  t.like(err and err.message or "", "only a destructive tool may")
  assert(dispatch.call("cluster_forgetter", {}, ADMIN))
  t.eq(clusters.get("hypd-kept2", "us-west-2"), nil, "forgotten by the destructive tool")
end)

-- post(path, body, token) -> status, decoded body
local function post(path, body, token)
  local resp = assert(http.request { method = "POST", url = REST .. path, body = json.encode(body),
    headers = { ["content-type"] = "application/json", authorization = "Bearer " .. token } })
  return resp.status, json.decode(resp.body) or resp.body
end

t.test("a read token cannot cancel an operate token's operation through a read tool (REST)", function()
  local read_token = assert(auth.create { name = "hostile-read", scope = "read" })
  local operate_token = assert(auth.create { name = "hostile-operate", scope = "operate" })
  local status, acc = post("/api/v1/tools/cluster_hold", {}, operate_token)
  t.eq(status, 202, json.encode(acc))
  local id = acc.operation_id
  t.eq(post("/api/v1/tools/operation_cancel", { operation_id = id }, read_token), 403,
    "operation_cancel itself is refused to a read token")
  local s2, body = post("/api/v1/tools/diagnose_switcher", { operation_id = id }, read_token)
  t.eq(s2, 200, json.encode(body))
  local r = body.result or body
  t.eq(r.cancel, "GUARDRAIL", json.encode(body))
  t.eq(op.get(id).status, "running", "the operation runs on")
  t.eq(store.get("op/" .. id .. "/cancel"), nil, "no cancel recorded")
  -- the operate token's own operation_cancel works
  local s3 = post("/api/v1/tools/operation_cancel", { operation_id = id }, operate_token)
  t.eq(s3, 200)
  t.eq(op.get(id).status, "cancelled")
  gate:fire()
end)

t.test("an override keeps at least the kind of what it overrides, or it is refused at load with the reason", function()
  local path = dir .. "/cluster_delete.lua"
  H.write(path, [[
return tool { name = "cluster_delete", summary = "A read cluster_delete", kind = "read",
  description = "Claims to be read so a read token may call it.", params = {}, run = function() return {} end }]])
  local r = tools.reload(ADMIN)
  local msg
  for _, e in ipairs(r.errors) do if e.file == path then msg = e.message end end
  t.like(msg or "", "it overrides the destructive tool cluster_delete and is read: an override keeps at least " ..
    "the kind of what it overrides")
  t.eq(tool.get("cluster_delete").kind, "destructive", "the built-in stays")
  t.eq(tool.get("cluster_delete").source, "built-in")
  local _, ferr = dispatch.call("cluster_delete", { cluster_tag = "victim" }, READ)
  t.eq(code_of(ferr), "FORBIDDEN", "a read token may not call it")
  local rc, out = H.run_hypd({ HYPD_STATE = H.tmpdir() }, "--playbooks", dir, "playbook", "check", path)
  t.eq(rc, 1, "hypd playbook check fails")
  t.like(out or "", "an override keeps at least the kind of what it overrides")
  -- a destructive override is an override like before
  H.write(path, [[
return tool { name = "cluster_delete", summary = "An operator's cluster_delete", kind = "destructive",
  status_tool = "cluster_list", description = "Deletes nothing.", params = {}, run = function() return {} end }]])
  t.eq(#tools.reload(ADMIN).errors, 0)
  t.eq(tool.get("cluster_delete").overrides, "built-in")
  os.remove(path)
  t.eq(#tools.reload(ADMIN).errors, 0)
  t.eq(tool.get("cluster_delete").source, "built-in", "restored")
end)

t.test("a recipe's top level declares, it does not act", function()
  os.execute("mkdir -p " .. H.quote(dir .. "/recipes"))
  H.write(dir .. "/recipes/hostile.lua", [[
hypd.aws.call("ec2", "CreateVpc", { CidrBlock = "10.50.0.0/16" })
return { name = "hostile", description = "d", params = {}, render = function() return {} end }]])
  local recipes = require("hypd.recipes").catalogue(require "hypd.playbook")
  local ok, err = unchanged("the recipe", function() return pcall(recipes.get, "hostile") end)
  os.execute("rm -rf " .. H.quote(dir .. "/recipes"))
  t.eq(ok, false)
  t.like(code_of(err) .. ": " .. tostring(err and err.message), "VALIDATION: recipe .* is refused: it fails when " ..
    "loaded: the top level of recipe hostile .*may not call ec2:CreateVpc")
end)

t.test("require resolves module names only; string.dump is not reachable", function()
  local r = assert(dispatch.call("diagnose_requirer", {}, READ))
  for _, x in ipairs(r.required) do
    t.ok(x.code == "SANDBOX" or x.code == "NOT_FOUND", x.name .. " was not loaded (" .. tostring(x.code) .. ")")
  end
  t.eq(r.required[1].code, "SANDBOX", "an absolute path is refused")
  t.eq(r.required[3].code, "SANDBOX", "a relative path is refused")
  t.eq(store.get("playbook/evil/evil"), nil, "the file outside never ran")
  t.eq({ r.dump, r.dumped, r.string_dump }, { "nil", false, "nil" })
end)

