-- Golden plans: the plan (or the refusal) of every staged tool of the
-- registry, on fixed sandbox states, is the one recorded in
-- tests/data/plans/golden.txt. A refactoring that must not change
-- behaviour keeps every plan identical: actions, types, names, reasons,
-- fields, counts and their order.
--
-- The states, built one after the other in one sandbox:
--   nothing   a fresh account: no cluster
--   eks       the EKS cluster hypd-gold made by cluster_create_eks
--   half      cluster_create of gold stopped as its HyperPod stage began
--   all       that cluster_create resumed to its end (S3 and FSx storage,
--             the training operator), a CPU group added, a container served
-- In each state every staged tool plans with the parameters of PARAMS
-- below (the cluster named, never the active one).
--
-- Recorded as lines: "== <state> <tool>", then "ok <summary>" and one line
-- per plan entry (canonical JSON, keys sorted), or "refused <code>
-- <message>" and its fields. What varies between runs of the sandbox is
-- normalised: each distinct generated id (vpc-..., subnet-..., an
-- operation id, ...) becomes <id:N>, numbered in order of first appearance
-- in that tool's section; an ISO timestamp becomes <time>. The sandbox
-- lists what exists in no fixed order, so two things are sorted: a run of
-- consecutive entries of one action and type that name found resources
-- (an id that is not "planned:"), by their text with the ids masked; and
-- a list of ids in parentheses in a reason. Everything a tool decides
-- (what it plans, in what order, and why) is compared as it is.
--
-- A staged tool of the registry with no PARAMS entry fails the test: a new
-- staged tool is added to PARAMS, and the file is written again.
-- To write the file (on a tree whose plans are right, before a change):
--   HYPD_GOLDEN_WRITE=1 /path/to/hypd test tests/lua/plans_golden_test.lua
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local srv = H.sandbox_here()
require("hypd.tool.loader").load()
local E = dofile("tests/lua/eks_helpers.lua")
local json, op, tool = require "hypd.json", require "hypd.tool.operations", require "hypd.tool.registry"
local dispatch = require "hypd.tool.dispatch"
local WHO = { name = "tester", scope = "admin", front = "test" }
local FILE = "tests/data/plans/golden.txt"
local WRITE = (os.getenv("HYPD_GOLDEN_WRITE") or "") ~= ""

local TAG, EKS = "gold", "hypd-gold"
local HP = { instance_type = "ml.g5.12xlarge", instance_count = 2, availability_zone = "us-west-2a" }
local SGLANG = { "python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/qwen", "--host", "0.0.0.0" }

local function create_params()
  return { cluster_tag = TAG, instance_type = HP.instance_type, instance_count = HP.instance_count,
    availability_zone = HP.availability_zone, fsx_storage = true, features = { training_operator = true } }
end

-- each staged tool's parameters (cluster = EKS is added to every tool that takes a cluster)
local PARAMS = {
  cluster_create = create_params(),
  cluster_create_eks = { cluster_tag = TAG },
  cluster_configure_dependencies = { kuberay = true },
  cluster_delete = { cluster_tag = TAG },
  cluster_delete_node_group = { node_group = "system" },
  cluster_scale_node_group = { node_group = "system", desired_size = 2 },
  hyperpod_add_instance_group = { instance_group = "gpu2", instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a" },
  hyperpod_create = { instance_type = HP.instance_type, instance_count = HP.instance_count,
    availability_zone = HP.availability_zone },
  hyperpod_delete = {},
  hyperpod_delete_instance_group = { instance_group = "cpu" },
  hyperpod_disable_advanced_features = { features = { "training_operator" } },
  hyperpod_scale_instance_group = { instance_group = "cpu", instance_count = 2 },
  hyperpod_update_advanced_features = { inference_operator = true, kuberay_operator = true },
  hyperpod_update_software = { instance_groups = { "cpu" } },
  inference_assign_pool_pod = { pool = "web", model = "qwen", count = 1 },
  inference_delete = { name = "web" },
  inference_deploy_container = { name = "warm", engine = "sglang", command = SGLANG,
    instance_type = "ml.g5.12xlarge", gpus = 1, replicas = 2, service = "pool" },
  inference_deploy_jumpstart = { name = "llama", model_id = "meta-textgeneration-llama-3-2-1b-instruct",
    instance_type = "ml.g5.12xlarge", accept_eula = true },
  inference_deploy_managed = { name = "qwen", model_source = "s3",
    s3_bucket = "hypd-gold-data-123456789012-us-west-2", model_location = "models/qwen2-5-7b",
    instance_type = "ml.g5.12xlarge", replicas = 1, image = "vllm/vllm-openai:v0.8.5",
    args = { "--model", "/opt/ml/model", "--port", "8000", "--served-model-name", "qwen" }, port = 8000, gpus = 1 },
  inference_deploy_router = { workers = { "web" } },
  inference_release_pool_pod = { pool = "web", model = "qwen", count = 1 },
  inference_scale = { name = "web", replicas = 2 },
  inference_set_autoscaling = { name = "web", max_replicas = 3,
    query = "sum(rate(http_requests_total{service=\"web\"}[1m]))", threshold = 10 },
  job_delete = { name = "nosuchjob" },
  model_download = { model_id = "Qwen/Qwen2.5-0.5B-Instruct" },
  storage_create_fsx = {},
  storage_create_s3 = {},
  storage_delete = { claim_name = "fsx-claim", delete_file_system = true },
  training_delete_job = { name = "demo" },
  training_setup_mlflow = {},
  training_submit = { recipe = "pytorch-torchrun", params = { job_name = "demo", instance_type = "ml.g5.12xlarge",
    script = "scripts/train.py", replicas = 2 } },
}

-- canonical(v, norm) -> JSON text with sorted keys (an empty table: {})
local function canonical(v, norm)
  if type(v) == "string" then return json.encode(norm(v)) end
  if type(v) ~= "table" then return json.encode(v) end
  if #v > 0 or getmetatable(v) == getmetatable(json.array()) then
    local parts = {}
    for i = 1, #v do parts[i] = canonical(v[i], norm) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = json.encode(norm(k)) .. ":" .. canonical(v[k], norm) end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- the generated ids of AWS, Kubernetes and hypd: normalised, each in order of first appearance
local ID_PATTERNS = {
  "%f[%w](%l%l?%l?%l?%l?%l?%l?%l?%-%x%x%x%x%x%x%x%x+)%f[^%w]", -- vpc-0abc..., subnet-..., fs-..., op-...
  "%f[%w](%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x)%f[^%w]", -- a UUID
  "%f[%w](" .. ("%x"):rep(32) .. ")%f[^%w]", -- an OIDC issuer's id
  "cluster/(" .. ("%x"):rep(12) .. ")%f[^%w]", -- a HyperPod cluster's ARN
}

-- each_pattern(s, fn) -> s with fn(id) for every id, pattern by pattern. A
-- UUID is set aside while the first pattern runs: a group of it that is
-- all letters ("...-beef-0123456789ab") would read as a prefixed id
local UUID = ID_PATTERNS[2]
local function each_pattern(s, fn)
  local held = {}
  s = s:gsub(UUID, function(id) held[#held + 1] = id; return "\1" .. #held .. "\1" end)
  s = s:gsub(ID_PATTERNS[1], fn)
  s = s:gsub("\1(%d+)\1", function(i) return held[tonumber(i)] end)
  for i = 2, #ID_PATTERNS do s = s:gsub(ID_PATTERNS[i], fn) end
  return s
end

local function masked(s)
  return each_pattern(s, function() return "<id>" end)
end

local function normaliser()
  local seen, n = {}, 0
  return function(s)
    s = each_pattern(s, function(id)
      if not seen[id] then n = n + 1; seen[id] = "<id:" .. n .. ">" end
      return seen[id]
    end)
    -- a list of ids in a reason ("(<id:1>, <id:2>)") is in the sandbox's listing order: sorted
    s = s:gsub("%((<id:%d+>[^()]*)%)", function(list)
      if list:gsub("<id:%d+>", ""):gsub(", ", "") ~= "" then return nil end
      local ids = {}
      for id in list:gmatch("<id:%d+>") do ids[#ids + 1] = id end
      table.sort(ids)
      return "(" .. table.concat(ids, ", ") .. ")"
    end)
    return (s:gsub("%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d[%.%d]*Z?", "<time>"))
  end
end

local function same(s) return s end

-- listed(entries) -> entries, where each run of consecutive entries of one
-- action and type that name resources found in the world (an id that is
-- not planned) is sorted by its text with the ids masked: the sandbox lists
-- them in no fixed order (what a tool plans keeps its order)
local function listed(entries)
  local out, i = {}, 1
  local function found(e) return type(e.id) == "string" and not e.id:find("^planned:") end
  while i <= #entries do
    local e, j = entries[i], i
    if found(e) then
      while entries[j + 1] and found(entries[j + 1]) and entries[j + 1].action == e.action and
        entries[j + 1].type == e.type do j = j + 1 end
    end
    local run = {}
    for k = i, j do run[#run + 1] = { key = masked(canonical(entries[k], same)), e = entries[k] } end
    table.sort(run, function(a, b) return a.key < b.key end)
    for _, r in ipairs(run) do out[#out + 1] = r.e end
    i = j + 1
  end
  return out
end

local function params_of(d)
  local p = {}
  for k, v in pairs(PARAMS[d.name]) do p[k] = v end
  if d.params.cluster then p.cluster = EKS end
  p.plan = true
  return p
end

-- lines(d) -> the recorded lines of tool d's plan in the state now
local function lines(d)
  local norm = normaliser()
  local out = {}
  local r, err = dispatch.call(d.name, params_of(d), WHO)
  if r then
    local entries = listed(r.plan or {})
    local head = {}
    -- the plan's cost (and cost_error) is the Price List's, checked against it by cost_test
    for k, v in pairs(r) do if k ~= "plan" and k ~= "cost" and k ~= "cost_error" then head[k] = v end end
    out[1] = "ok " .. canonical(head, norm)
    for _, e in ipairs(entries) do out[#out + 1] = "  " .. canonical(e, norm) end
  else
    err = type(err) == "table" and err or { code = "?", message = tostring(err) }
    out[1] = "refused " .. tostring(err.code) .. " " .. norm(tostring(err.message))
    if err.fields then out[2] = "  fields " .. canonical(err.fields, norm) end
  end
  return out
end

local staged = {}
for _, d in ipairs(tool.list()) do if d.steps then staged[#staged + 1] = d end end
table.sort(staged, function(a, b) return a.name < b.name end)

local got = {} -- "<state> <tool>" -> lines, in ORDER
local ORDER = {}
local function record(state)
  for _, d in ipairs(staged) do
    if PARAMS[d.name] then
      local key = state .. " " .. d.name
      ORDER[#ORDER + 1] = key
      got[key] = lines(d)
    end
  end
end

local function run(name, params)
  local acc = assert(dispatch.call(name, params, WHO))
  return op.wait(acc.operation_id)
end

t.test("every staged tool of the registry has its parameters here", function()
  local missing = {}
  for _, d in ipairs(staged) do if not PARAMS[d.name] then missing[#missing + 1] = d.name end end
  t.eq(missing, {}, "staged tools with no PARAMS entry in " .. "tests/lua/plans_golden_test.lua (add one, write " ..
    FILE .. " again)")
  t.ok(#staged > 0, "the registry has staged tools")
end)

t.test("the states are made", function()
  record("nothing")
  local v = run("cluster_create_eks", { cluster_tag = TAG })
  t.eq(v.status, "succeeded", "cluster_create_eks: " .. json.encode(v.error))
  record("eks")
  E.stop_at("creating HyperPod cluster " .. EKS .. "-hp", "")
  local acc = assert(dispatch.call("cluster_create", create_params(), WHO))
  t.eq(op.wait(acc.operation_id).status, "running", "cluster_create stopped as its HyperPod stage began")
  record("half")
  t.ok(op.resume() >= 1, "the stopped operation resumes")
  v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", "cluster_create: " .. json.encode(v.error))
  v = run("hyperpod_add_instance_group", { cluster = EKS, instance_group = "cpu", instance_type = "ml.m5.2xlarge",
    instance_count = 1, availability_zone = "us-west-2a" })
  t.eq(v.status, "succeeded", "hyperpod_add_instance_group: " .. json.encode(v.error))
  v = run("inference_deploy_container", { cluster = EKS, name = "web", engine = "custom",
    image = "ghcr.io/acme/server:1", port = 8080, gpus = 0, instance_type = "ml.m5.2xlarge" })
  t.eq(v.status, "succeeded", "inference_deploy_container: " .. json.encode(v.error))
  record("all")
end)

-- the recorded file: "== <key>" then its lines
local function read_golden()
  local text = H.read(FILE)
  if not text then return nil end
  local want, order, cur = {}, {}, nil
  for line in text:gmatch("([^\n]*)\n") do
    local key = line:match("^== (.+)$")
    if key then
      cur = {}
      want[key], order[#order + 1] = cur, key
    elseif cur then
      cur[#cur + 1] = line
    end
  end
  return want, order
end

if WRITE then
  t.test("the golden file is written", function()
    local parts = {}
    for _, key in ipairs(ORDER) do
      parts[#parts + 1] = "== " .. key
      for _, l in ipairs(got[key]) do parts[#parts + 1] = l end
    end
    os.execute("mkdir -p tests/data/plans")
    H.write(FILE, table.concat(parts, "\n") .. "\n")
    t.skip("compared: the file was written (" .. #ORDER .. " plans)")
  end)
else
  t.test("every plan is the recorded one", function()
    local want, order = read_golden()
    t.ok(want, FILE .. " is there")
    if not want then return end
    local diffs = {} -- one line per tool whose plan differs, with its first differing line
    for _, key in ipairs(ORDER) do
      local w, g = want[key], got[key]
      if not w then
        diffs[#diffs + 1] = key .. ": no recorded plan (a new staged tool or state: write the file again)"
      else
        local first
        for i = 1, math.max(#w, #g) do
          if w[i] ~= g[i] then first = i break end
        end
        if first then
          diffs[#diffs + 1] = string.format("%s: the plan differs at its line %d\n    recorded: %s\n    now:      %s",
            key, first, tostring(w[first]), tostring(g[first]))
        end
      end
    end
    local now = {}
    for _, key in ipairs(ORDER) do now[key] = true end
    for _, key in ipairs(order) do
      if not now[key] then diffs[#diffs + 1] = key .. ": recorded but not planned now (a tool gone or renamed)" end
    end
    t.ok(#diffs == 0, #diffs .. " of " .. #ORDER .. " plans differ from " .. FILE .. ":\n  " ..
      table.concat(diffs, "\n  "))
    t.ok(#ORDER >= 4 * 30, "the plans of four states were compared: " .. #ORDER)
  end)
end

t.cleanup(function()
  E.restore_all()
  require("hypd.core").virtual(false)
  srv:stop()
end)
