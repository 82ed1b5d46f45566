-- Every tool of the registry called over REST as a client would, with
-- minimal valid parameters (each required one from the tool's schema: its
-- enum's first value, or a fixture value for its name), then with the
-- decisions it takes given as well, with plan and without, against three accounts: an empty one, one with an EKS cluster
-- only, and one with a whole cluster (EKS, HyperPod, no features). No
-- answer is INTERNAL or HTTP 500, nor is any operation's end. Every tool
-- call an answer suggests (an error's message and fields, a result's
-- `next`, an operation's error and progress notes) is a complete call: the
-- tool exists, every required parameter is there (a value or a placeholder
-- <what>, hypd.hints), every value passes its schema, and it runs as
-- written (a read tool is called, a staged one planned: not refused
-- VALIDATION). Reads and plans see each account as it is; then the
-- mutations run in order, each seeing what the earlier ones made, and the
-- destructive tools go last.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local hints = require "hypd.hints"
local http = require "hypd.http"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"

local H = dofile("tests/lua/helpers.lua")
H.sandbox_here()
require("hypd.tool.loader").load()

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local BASE = "http://127.0.0.1:" .. srv.port
local ADMIN = auth.create { name = "sweeper", scope = "admin" }
local WHO = { name = "sweeper", scope = "admin", front = "test" }

-- fixture values of required parameters, by name; {tag} is the account's
-- cluster tag. A tool's own entry wins over the name's.
local FIXTURES = {
  cluster_tag = "{tag}", cluster = "hypd-{tag}", instance_type = "ml.g5.12xlarge", instance_count = 1,
  instance_group = "sweep-ig", node_group = "sweep-ng", desired_size = 1, nodes = { "i-0123456789abcdef0" },
  features = { "training_operator" }, name = "sweep", model = "sweep-model", pool = "sweep-pool",
  workers = { "sweep-a", "sweep-b" }, replicas = 1, max_replicas = 2, gpus = 1,
  image = "vllm/vllm-openai:v0.6.3", claim_name = "sweep-claim", recipe = "pytorch-torchrun",
  operation_id = "op-00000000000000ff", model_id = "Qwen/Qwen2.5-0.5B-Instruct", job = "sweep-job",
}
local PER_TOOL = {
  inference_deploy_jumpstart = { model_id = "meta-textgeneration-llama-3-2-1b-instruct" },
}

-- the second pass gives the decisions too (minimal + these, where a tool
-- takes them), so the calls go past "that is a decision" into the work
local DECIDED = {
  availability_zone = "us-west-2a", image = "vllm/vllm-openai:v0.6.3", s3_bucket = "sweep-models",
  prompt = "hello", count = 1,
}
local DECIDED_PER_TOOL = {
  training_submit = { params = { job_name = "sweep-job", instance_type = "ml.g5.12xlarge", script = "train.py" } },
  training_render = { params = { job_name = "sweep-job", instance_type = "ml.g5.12xlarge", script = "train.py" } },
  hyperpod_update_advanced_features = { training_operator = true },
  cluster_get_creation_status = { cluster_tag = "{tag}" },
  cluster_get_node_group_status = { node_group = "sweep-ng" },
  job_get_status = { name = "sweep" },
  storage_list_contents = { claim_name = "s3-claim" },
  training_get_metrics = { name = "sweep-job" },
  inference_release_pool_pod = { model = "sweep-model" },
}

local function fill(v, tag)
  if type(v) == "string" then return (v:gsub("{tag}", tag)) end
  if type(v) == "table" then
    local out = json.array()
    for i, x in ipairs(v) do out[i] = fill(x, tag) end
    return out
  end
  return v
end

-- minimal(def, tag) -> the tool's minimal valid arguments
local function minimal(def, tag)
  local args = json.object()
  for k, spec in pairs(def.params) do
    if spec.required then
      local v = (PER_TOOL[def.name] or {})[k]
      if v == nil then v = FIXTURES[k] end
      if v == nil and spec.enum then v = spec.enum[1] end
      if v == nil and spec.items and spec.items.enum then v = { spec.items.enum[1] } end
      assert(v ~= nil, def.name .. ": no fixture for required parameter " .. k .. " (add one to FIXTURES)")
      args[k] = fill(v, tag)
    end
  end
  return args
end

-- decided(def, tag) -> minimal(def, tag) with the decisions it takes
local function decided(def, tag)
  local args = minimal(def, tag)
  for k, v in pairs(DECIDED) do
    if def.params[k] and args[k] == nil then args[k] = v end
  end
  for k, v in pairs(DECIDED_PER_TOOL[def.name] or {}) do
    args[k] = type(v) == "table" and json.object() or fill(v, tag)
    if type(v) == "table" then for kk, vv in pairs(v) do args[k][kk] = vv end end
  end
  return args
end

local function rest(name, args)
  assert(srv.port, "the server runs") -- held here: a server nobody holds is collected and stops
  local r = assert(http.request { method = "POST", url = BASE .. "/api/v1/tools/" .. name, timeout = 600,
    headers = { authorization = "Bearer " .. ADMIN, ["content-type"] = "application/json" },
    body = json.encode(args) })
  return r.status, json.decode(r.body ~= "" and r.body or "null")
end

-- the findings of the whole sweep, reported by the tests below (SWEEP_DEBUG=1
-- prints every call, operation end and suggested call as a TAP comment)
local internal, incomplete, calls, suggested = {}, {}, 0, 0

-- runs(c) -> nil | why the suggested call c does not run as written: a
-- read tool is called, a staged one planned (both change nothing); a call
-- with a placeholder, or of a tool that changes things at once, is checked
-- against the schema only
local ran = {}
local function runs(c)
  local def = tool.get(c.tool)
  if not def or (def.kind ~= "read" and not def.steps) or ran[c.text] ~= nil then return ran[c.text] or nil end
  local args = json.object()
  for _, a in ipairs(c.args) do
    if a.placeholder then return nil end
    args[a.key] = a.json and json.decode(a.value) or tool.coerce(def.params, a.key, a.value)
  end
  if def.steps then args.plan = true end
  local _, err = dispatch.call(c.tool, args, WHO)
  local why = false
  if err and (err.code == "VALIDATION" or err.code == "INTERNAL") then
    why = "it answers " .. err.code .. ": " .. tostring(err.message)
  end
  ran[c.text] = why
  return why or nil
end

local function check_hints(where, v)
  for _, c in ipairs(hints.scan(v)) do
    suggested = suggested + 1
    if os.getenv("SWEEP_DEBUG") then print("# HINT " .. where .. " :: " .. c.text) end
    local ok, problems = hints.check(c)
    if not ok then
      incomplete[#incomplete + 1] = where .. " suggests `" .. c.text .. "`: " .. table.concat(problems, "; ")
    else
      local why = runs(c)
      if why then incomplete[#incomplete + 1] = where .. " suggests `" .. c.text .. "`, which " .. why end
    end
  end
end

local function notes_of(id)
  local out = {}
  for _, e in ipairs((op.events(id, 0, 1000) or {}).events or {}) do
    if e.message then out[#out + 1] = e.message end
  end
  assert(#out > 0 or (op.events(id, 0, 1000) or {}).events, "the events of " .. id .. " are read")
  return out
end

-- one(def, tag, plan): the call, its answer judged; a started operation
-- followed to its end (or cancelled after a simulated hour)
local function one(def, tag, plan, account, deep)
  local args = (deep and decided or minimal)(def, tag)
  if plan then args.plan = true end
  local where = account .. ": " .. def.name .. (deep and " (decided)" or "") .. (plan and " plan" or "")
  calls = calls + 1
  local status, body = rest(def.name, args)
  local err = type(body) == "table" and body.error
  if status >= 500 or (err and err.code == "INTERNAL") then
    internal[#internal + 1] = where .. " answered HTTP " .. status .. " " .. json.encode(err or body)
  end
  if os.getenv("SWEEP_DEBUG") then
    print("# CALL " .. where .. " -> " .. status .. " " .. (err and (err.code .. " " .. tostring(err.message)) or ""))
  end
  check_hints(where, body)
  if status == 202 and type(body) == "table" and body.operation_id then
    local v = op.wait(body.operation_id, 3600)
    if v.status == "running" then op.cancel(body.operation_id, WHO); v = op.wait(body.operation_id) end
    if os.getenv("SWEEP_DEBUG") then
      print("# OP " .. where .. " -> " .. v.status .. " " ..
        (v.error and (v.error.code .. " " .. tostring(v.error.message)) or ""))
    end
    if v.error and v.error.code == "INTERNAL" then
      internal[#internal + 1] = where .. ": its operation failed INTERNAL: " .. json.encode(v.error)
    end
    check_hints(where .. " (its operation)", { v.error, v.result, notes_of(body.operation_id) })
  end
end

local KIND_ORDER = { read = 1, mutating = 2, destructive = 3 }

-- sweep(account, tag): every tool, reads first, then plans, then
-- mutations, destructive ones last
local function sweep(account, tag)
  local defs = {}
  for _, def in ipairs(tool.list()) do
    if not def.name:match("^diagnose_") or def.source == "built-in" then defs[#defs + 1] = def end
  end
  table.sort(defs, function(a, b)
    if KIND_ORDER[a.kind] ~= KIND_ORDER[b.kind] then return KIND_ORDER[a.kind] < KIND_ORDER[b.kind] end
    return a.name < b.name
  end)
  for _, deep in ipairs { false, true } do
    for _, def in ipairs(defs) do if def.steps then one(def, tag, true, account, deep) end end
  end
  for _, def in ipairs(defs) do
    for _, deep in ipairs { false, true } do one(def, tag, false, account, deep) end
  end
end

local function report(account)
  local i, c, n, m = internal, incomplete, calls, suggested
  internal, incomplete, calls, suggested, ran = {}, {}, 0, 0, {}
  t.ok(n >= #tool.list(), account .. ": every tool was called (" .. n .. " calls, " .. m .. " suggested calls)")
  t.eq(i, {}, account .. ": no answer is INTERNAL or HTTP 500")
  t.eq(c, {}, account .. ": every suggested call is complete")
end

t.test("an empty account: no tool answers INTERNAL, and every call an answer suggests is complete", function()
  sweep("empty", "sweep-none")
  report("empty")
end)

t.test("an account with an EKS cluster only: the same", function()
  local acc = assert(dispatch.call("cluster_create_eks", { cluster_tag = "sweep-eks" }, WHO))
  t.eq(op.wait(acc.operation_id).status, "succeeded", "cluster_create_eks")
  sweep("eks-only", "sweep-eks")
  report("eks-only")
end)

t.test("an account with a whole cluster without features: the same", function()
  local acc = assert(dispatch.call("cluster_create", { cluster_tag = "sweep-full", instance_type = "ml.g5.12xlarge",
    instance_count = 1, availability_zone = "us-west-2a" }, WHO))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", "cluster_create: " .. json.encode(v.error))
  sweep("full", "sweep-full")
  report("full")
end)

t.test("the checker of suggested calls refuses an incomplete one: the issue's hint, an unknown tool or " ..
  "parameter, a value its schema refuses; a placeholder stands for a required value", function()
  local function problems(text)
    local cs = hints.extract(text)
    t.eq(#cs, 1, "one call in: " .. text)
    local ok, why = hints.check(cs[1])
    return ok and {} or why
  end
  -- seen: model_download's hint, refused for its missing instance_group
  local p = problems("add a CPU instance group (hyperpod_add_instance_group instance_type=ml.m5.2xlarge " ..
    "instance_count=1) or an EKS node group")
  t.like(table.concat(p, "; "), "instance_group: required")
  t.like(table.concat(problems("see hyperpod_add_group instance_count=1"), "; "), "no tool named hyperpod_add_group")
  t.like(table.concat(problems("call storage_list_contents claim=x"), "; "), "claim: storage_list_contents has no such")
  t.like(table.concat(problems("aws_get_instance_types zone=... what a zone offers"), "; "), "zone: must be")
  t.eq(problems("pass it to aws_get_instance_types zone=<zone>."), {}, "a placeholder is a value to fill in")
  t.eq(problems("hyperpod_add_instance_group cluster=hypd-x instance_group=system instance_type=ml.m5.2xlarge " ..
    "instance_count=1 availability_zone=<zone>"), {})
  t.eq(problems("'training_submit recipe=<recipe> params:=<json-object>'"), {})
  t.eq(#hints.extract("follow it with operation_get, then hyperpod_create (the model's name)"), 0,
    "a tool named without arguments in prose is a reference, not a call")
  t.eq(#hints.scan({ next = "operation_get" }), 1, "in a result's next it is a call")
  t.like(table.concat(select(2, hints.check(hints.scan({ next = "operation_get" })[1])), "; "),
    "operation_id: required")
end)
