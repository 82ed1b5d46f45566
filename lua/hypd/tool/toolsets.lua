-- hypd.tool.toolsets: the toolsets, named groups of tools an MCP client
-- loads instead of every tool (`hypd mcp --toolsets a,b`, /mcp?toolsets=a,b).
-- An agent pays for every tool it loads, so each set holds what one kind of
-- work needs. The one place that says which tool is in which set: the rules
-- below, on the tool's name and kind, and a tool's own `toolsets = {...}`
-- (hypd.tool.registry DEF_KEYS) for what its name does not tell.
--
--   NAMES                  the sets, in the order docs and errors list them
--   ABOUT[name]            one line on what the set is for
--   DEFAULT                the set `hypd mcp` and /mcp give with no choice
--   of(def) -> {set = true, ...}   the sets a tool is in
--   parse(text|list) -> {set = true} | nil, VALIDATION err (names the sets)
--   select(defs, sets) -> the defs in any of the sets (sets nil: all)
--   has(def, sets) -> bool
--   holding(def) -> "a, b": the sets a tool is in (for refusals)
local errors = require "hypd.errors"

local M = {}

M.NAMES = { "default", "cluster", "capacity", "storage", "training", "inference", "jobs", "observe", "operation",
  "readonly", "all" }
M.DEFAULT = "default"
M.ABOUT = {
  default = "create, operate and diagnose a HyperPod cluster: cluster, capacity (not EKS node groups), operation, " ..
    "monitor_* and diagnose_*",
  cluster = "EKS and HyperPod clusters: list, create, status, dependencies, software, features, delete",
  capacity = "instance groups, nodes (reboot, replace), EKS node groups, zones and instance types",
  storage = "S3 and FSx for Lustre storage: create, list, browse, delete",
  training = "training jobs, recipes and MLflow",
  inference = "inference endpoints, routers, autoscaling, JumpStart and model downloads",
  jobs = "batch jobs and their logs",
  observe = "every status, list, get and logs tool, monitor_* and diagnose_*",
  operation = "follow, list and cancel operations",
  readonly = "every read tool",
  all = "every tool",
}

local KNOWN = {}
for _, n in ipairs(M.NAMES) do KNOWN[n] = true end
M.KNOWN = KNOWN

-- what a name says: the area of its prefix, then a few names that belong
-- to a second area as well
local AREA = { cluster = "cluster", hyperpod = "cluster", storage = "storage", training = "training",
  inference = "inference", job = "jobs", model = "inference", operation = "operation", aws = "cluster" }
local CAPACITY = { "^hyperpod_.*instance_group", "^hyperpod_node_", "^hyperpod_list_nodes$", "node_group",
  "^cluster_list_instance_groups$", "^aws_" }
local OBSERVE = { "^monitor_", "^diagnose_", "_get", "_list", "_logs" }

local function any(name, patterns)
  for _, p in ipairs(patterns) do if name:find(p) then return true end end
  return false
end

function M.of(def)
  local name, out = def.name, { all = true }
  local area = AREA[name:match("^([a-z]+)_") or ""]
  if area then out[area] = true end
  if any(name, CAPACITY) then out.capacity = true end
  if def.kind == "read" then
    out.readonly = true
    if any(name, OBSERVE) then out.observe = true end
  end
  for _, s in ipairs(def.toolsets or {}) do out[s] = true end
  -- the default: what creating, operating and diagnosing a HyperPod
  -- cluster takes (the advanced features, dependency add-ons and EKS node
  -- groups have their own skills, which load cluster or capacity)
  local aside = name:find("advanced_features") or name:find("dependenc") or name:find("node_group")
  if ((out.cluster or out.capacity) and not aside) or out.operation or name:find("^monitor_") or
      name:find("^diagnose_") then
    out.default = true
  end
  return out
end

function M.has(def, sets)
  if sets == nil then return true end
  local of = M.of(def)
  for s in pairs(sets) do if of[s] then return true end end
  return false
end

function M.select(defs, sets)
  local out = {}
  for _, d in ipairs(defs) do if M.has(d, sets) then out[#out + 1] = d end end
  return out
end

function M.holding(def)
  local of, out = M.of(def), {}
  for _, n in ipairs(M.NAMES) do if of[n] and n ~= "all" then out[#out + 1] = n end end
  return table.concat(out, ", ")
end

-- parse("cluster,observe") -> {cluster = true, observe = true}
function M.parse(v)
  local list = {}
  if type(v) == "string" then
    for w in v:gmatch("[^,%s]+") do list[#list + 1] = w end
  elseif type(v) == "table" then
    list = v
  end
  if #list == 0 then
    return errors.fail("VALIDATION", "toolsets: name at least one of " .. table.concat(M.NAMES, ", "),
      { fields = { { field = "toolsets", rule = "enum", message = "toolsets: empty" } } })
  end
  local out = {}
  for _, w in ipairs(list) do
    if not KNOWN[w] then
      local msg = "toolsets: unknown set '" .. errors.echo(tostring(w), 40) .. "' (the sets are " ..
        table.concat(M.NAMES, ", ") .. ")"
      return errors.fail("VALIDATION", msg, { fields = { { field = "toolsets", rule = "enum", message = msg } } })
    end
    out[w] = true
  end
  return out
end

return M
