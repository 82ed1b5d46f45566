-- hypd.tool.registry: the tool registry, the one backend the web UI, REST,
-- MCP and the command line share (they call through hypd.tool.dispatch).
-- A tool is one table:
--
--   tool.define {
--     name = "cluster_create_eks",             -- snake_case, grouped by prefix
--     summary = "one line", description = "written for an agent",
--     kind = "read" | "mutating" | "destructive",
--     params = { cluster_tag = { type = "string", required = true, pattern = "^[a-z]...$",
--                                decision = true, fixed = true, description = "..." }, ... },
--     result = { JSON Schema of the result } (optional),
--     status_tool = "cluster_get_creation_status",  -- mutating and destructive tools
--     target = function(params) return "eks/..." end, -- what one operation works on
--     run = function(ctx, params) return result end  -- read tools (and quick mutations)
--     steps = { { name = "network", run = function(ctx) end }, ... }, -- staged tools (hypd.tool.operations)
--       (a leading step with on_call = true, a check that only reads, runs on the call too,
--       before any operation is recorded: its refusal is the call's answer)
--     validate = function(params) end,  -- rules across fields (optional): raises VALIDATION
--     toolsets = { "capacity" },  -- sets its name does not put it in (hypd.tool.toolsets; optional)
--     raw = { "eks" },  -- destructive tools only: may send requests signed for these services
--                       -- that map to no modelled operation (hypd.tool.guard_request refuses them otherwise)
--   }
--
-- Param specs: type (string, integer, number, boolean, array, object, or a
-- list of them: {"boolean", "object"} takes either), required,
-- default, enum, pattern (an ECMAScript regex, as JSON Schema has it),
-- minimum, maximum, min_length, max_length, items (a spec), properties (an
-- object's fields, each a spec: any other field is refused), description,
-- decision (a person must make it), secret (never stored or logged), fixed
-- (cannot change once created); for a person's form: label (a human label,
-- "Cluster name"), help (what the choice means for a person: capacity,
-- cost, what cannot change later; description stays the agent's wording),
-- group (M.GROUPS: "decisions" shown first, "more" folded under more
-- options; absent: "decisions" for a decision or required parameter, else
-- "more") and order (an integer: its place in its group; a table's order is
-- lost in Lua).
-- A string value is at most max_length characters, M.MAX_STRING when the
-- spec gives none, checked before its pattern runs.
--
-- validate(def, args) runs before any work of a call: unknown fields,
-- missing required ones, wrong types, out-of-range values and bad patterns
-- all fail with VALIDATION and err.fields = { {field, rule, message}, ... };
-- then the tool's own validate(params), for rules across fields (two lists
-- that go together, blocks that must not overlap), whose VALIDATION error
-- is the call's answer too: a bad call starts no operation and no plan.
-- caller = { name, scope = "read"|"operate"|"admin", front = "rest"|"mcp"|"cli"|... }.
local core = require "hypd.core"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local json = require "hypd.json"
local regex = require "hypd.regex"
local toolsets = require "hypd.tool.toolsets"

local M = {}

M.PREFIXES = { "cluster_", "hyperpod_", "storage_", "model_", "training_", "job_", "inference_", "monitor_",
  "diagnose_", "operation_", "aws_" }
M.MAX_STRING = 4096 -- characters of a string parameter that declares no max_length
M.KINDS = { read = "read", mutating = "operate", destructive = "admin" }
local SCOPE_RANK = { read = 1, operate = 2, admin = 3 }
local TYPES = { string = true, integer = true, number = true, boolean = true, array = true, object = true }
local SPEC_KEYS = { type = true, required = true, default = true, enum = true, pattern = true, minimum = true,
  maximum = true, min_length = true, max_length = true, items = true, description = true, decision = true,
  secret = true, fixed = true, properties = true, pattern_help = true, label = true, help = true, group = true,
  order = true }
M.GROUPS = { decisions = 1, more = 2 } -- a form's groups of parameters, in the order they are shown

-- the keys a definition may have (tool{} and define refuse any other)
M.DEF_KEYS = { name = true, summary = true, description = true, kind = true, params = true, result = true,
  status_tool = true, target = true, run = true, steps = true, aws = true, k8s = true, audit = true, validate = true,
  calls = true, raw = true, toolsets = true }
M.K8S_VERBS = { get = true, list = true, watch = true, logs = true, proxy = true, create = true, apply = true,
  patch = true, update = true, delete = true }

-- a staged tool's plan parameter (added to every staged tool)
M.PLAN = { type = "boolean", default = false, label = "Only plan", group = "more", order = 1000,
  description = "Only plan: run the read half of every step and answer what would be created, changed or deleted " ..
    "(with the fields that differ), changing nothing." }

local registry, order = {}, {}
M.changed = nil -- fn(): the registry changed (MCP sends tools/list_changed)

-- bad_def(name, msg): a tool's name, or an owner already said ("recipe x")
local function bad_def(name, msg)
  local who = tostring(name)
  error((who:match("^recipe ") and who or "tool " .. who) .. ": " .. msg, 0)
end

-- types_of(spec) -> the list of types a spec takes (its type, or its list of types)
local function types_of(spec)
  if type(spec.type) == "table" then return spec.type end
  return { spec.type }
end
M.types_of = types_of

local function check_spec(tname, pname, spec)
  if type(spec) ~= "table" then bad_def(tname, "param " .. pname .. " needs a table") end
  for k in pairs(spec) do
    if not SPEC_KEYS[k] then bad_def(tname, "param " .. pname .. ": unknown key " .. tostring(k)) end
  end
  local ts = types_of(spec)
  local typed = #ts > 0
  for _, t in ipairs(ts) do typed = typed and TYPES[t] == true end
  if not typed then bad_def(tname, "param " .. pname .. ": type must be one of string, integer, " ..
    "number, boolean, array, object (or a list of them)") end
  if spec.properties ~= nil then
    if type(spec.properties) ~= "table" then bad_def(tname, "param " .. pname .. ": properties is a table of specs") end
    for k, v in pairs(spec.properties) do check_spec(tname, pname .. "." .. tostring(k), v) end
  end
  if spec.pattern_help ~= nil and (type(spec.pattern_help) ~= "string" or not spec.pattern) then
    bad_def(tname, "param " .. pname .. ": pattern_help is the pattern said in words (a string beside pattern)")
  end
  for _, k in ipairs({ "label", "help" }) do
    if spec[k] ~= nil and (type(spec[k]) ~= "string" or spec[k] == "") then
      bad_def(tname, "param " .. pname .. ": " .. k .. " is " .. (k == "label" and "a human label (a non-empty string)"
        or "the web help for a person (a non-empty string)"))
    end
  end
  if spec.group ~= nil and not M.GROUPS[spec.group] then
    bad_def(tname, "param " .. pname .. ": group is \"decisions\" or \"more\"")
  end
  if spec.order ~= nil and math.type(spec.order) ~= "integer" then
    bad_def(tname, "param " .. pname .. ": order is an integer (its place in its group)")
  end
  if spec.pattern and not regex.compile(spec.pattern) then
    bad_def(tname, "param " .. pname .. ": " .. select(2, regex.compile(spec.pattern)))
  end
  if spec.items then check_spec(tname, pname .. "[]", spec.items) end
end

-- check_def(def): raises what is wrong with a definition, registers
-- nothing (hypd playbook check); define() runs it first
local INTERNAL = { source = true, module = true, hash = true, modules = true, overrides = true, overridden = true,
  overridden_by = true } -- set by define
-- keys a tool no longer has, with what replaced them (said with the refusal)
local RENAMED = { check = "the rules across fields are validate = function(params) now (a step may still be " ..
  "named check)" }
function M.check_def(def)
  local name = def.name
  for k in pairs(def) do
    if not M.DEF_KEYS[k] and not INTERNAL[k] then
      local keys = {}
      for key in pairs(M.DEF_KEYS) do keys[#keys + 1] = key end
      table.sort(keys)
      bad_def(name, "unknown key '" .. tostring(k) .. "' (a tool has " .. table.concat(keys, ", ") .. ")" ..
        (RENAMED[k] and ("; " .. RENAMED[k]) or ""))
    end
  end
  if type(name) ~= "string" or not name:match("^[a-z][a-z0-9_]*[a-z0-9]$") then
    bad_def(name, "name must be snake_case")
  end
  local prefixed = false
  for _, p in ipairs(M.PREFIXES) do prefixed = prefixed or name:sub(1, #p) == p end
  if not prefixed then bad_def(name, "name must start with one of " .. table.concat(M.PREFIXES, " ")) end
  if not M.KINDS[def.kind] then bad_def(name, "kind must be read, mutating or destructive") end
  if type(def.summary) ~= "string" or type(def.description) ~= "string" then
    bad_def(name, "summary and description are required")
  end
  if (def.run == nil) == (def.steps == nil) then bad_def(name, "give either run or steps") end
  if def.kind ~= "read" and def.steps and (type(def.status_tool) ~= "string" or type(def.target) ~= "function") then
    bad_def(name, "a staged tool needs status_tool and target")
  end
  if def.kind ~= "read" and type(def.status_tool) ~= "string" then
    bad_def(name, "a " .. def.kind .. " tool names its status tool (status_tool), the read tool that shows what " ..
      "it did")
  end
  if def.status_tool and not def.description:find(def.status_tool, 1, true) then
    -- every mutating tool names its status tool where a reader looks
    def.description = def.description:gsub("%s*$", "") .. " Follow it with " .. def.status_tool .. "."
  end
  if def.aws ~= nil then
    if type(def.aws) ~= "table" or #def.aws == 0 then bad_def(name, "aws lists the AWS actions it calls") end
    for _, a in ipairs(def.aws) do
      if type(a) ~= "string" or not a:match("^[a-z0-9-]+:[A-Za-z0-9]+%*?$") then
        bad_def(name, "aws: '" .. tostring(a) .. "' is not service:Action (e.g. eks:DescribeCluster, ec2:Describe*)")
      end
    end
  end
  if def.raw ~= nil then
    if def.kind ~= "destructive" or type(def.raw) ~= "table" or #def.raw == 0 then
      bad_def(name, "raw lists the signing services (e.g. \"eks\") a destructive tool may send requests to " ..
        "that map to no modelled operation; only a destructive tool declares it")
    end
    for _, v in ipairs(def.raw) do
      if type(v) ~= "string" or not v:match("^[a-z0-9-]+$") then
        bad_def(name, "raw: '" .. tostring(v) .. "' is not a signing service name (eks, ec2, sagemaker, ...)")
      end
    end
  end
  if def.k8s ~= nil then
    if type(def.k8s) ~= "table" then bad_def(name, "k8s lists the Kubernetes verbs it uses") end
    for _, v in ipairs(def.k8s) do
      if not M.K8S_VERBS[v] then
        bad_def(name, "k8s: '" .. tostring(v) .. "' is not a verb (get, list, watch, logs, proxy, create, apply, patch, " ..
          "update, delete)")
      end
    end
  end
  if def.steps ~= nil then
    if type(def.steps) ~= "table" or #def.steps == 0 then bad_def(name, "steps is a list of {name, run}") end
    for i, st in ipairs(def.steps) do
      if type(st) ~= "table" or type(st.name) ~= "string" or type(st.run) ~= "function" then
        bad_def(name, "step " .. i .. " needs a name and a run function")
      end
    end
  end
  if def.toolsets ~= nil then
    if type(def.toolsets) ~= "table" or #def.toolsets == 0 then bad_def(name, "toolsets lists toolset names") end
    for _, v in ipairs(def.toolsets) do
      if not toolsets.KNOWN[v] then
        bad_def(name, "toolsets: '" .. tostring(v) .. "' is not a toolset (" .. table.concat(toolsets.NAMES, ", ") .. ")")
      end
    end
  end
  if def.run ~= nil and type(def.run) ~= "function" then bad_def(name, "run is a function(ctx, params)") end
  if def.validate ~= nil and type(def.validate) ~= "function" then
    bad_def(name, "validate is a function(params) that raises VALIDATION")
  end
  if def.steps and def.params and def.params.plan ~= nil and def.params.plan ~= M.PLAN then
    bad_def(name, "plan is the parameter every staged tool gets")
  end
  M.check_params(name, def.params)
end

-- check_params(owner, params): raises what is wrong with a table of param
-- specs (a tool's, a recipe's), naming owner
function M.check_params(owner, params)
  if params ~= nil and type(params) ~= "table" then bad_def(owner, "params is a table of param specs") end
  for pname, spec in pairs(params or {}) do
    if not tostring(pname):match("^[a-z][a-z0-9_]*$") then bad_def(owner, "param names are snake_case") end
    check_spec(owner, pname, spec)
  end
end

-- own(v) -> a copy of a definition's tables (functions and the shared PLAN
-- spec as they are): the registry keeps its own, so a playbook that holds
-- the table it returned cannot change its tool's kind, actions or params
-- once it is registered (hypd.tool.guard and the scope check read these). The
-- copy is of what the tables hold (next, not pairs) and keeps only JSON's
-- array and object marks: a metatable of the playbook's could answer
-- differently later (an aws list whose __index grows).
local JSON_MT = { [getmetatable(json.array())] = true, [getmetatable(json.object())] = true }
local function own(v)
  if type(v) ~= "table" or v == M.PLAN then return v end
  local c = {}
  for k, x in next, v do c[k] = own(x) end
  local mt = getmetatable(v)
  return JSON_MT[mt] and setmetatable(c, mt) or c
end

-- define(def [, origin]) -> the registered definition (a copy of def); a
-- bad definition is a programming error and raises. origin: {source =
-- "built-in" | a file path, module, hash (over every module it loads),
-- modules = {{name, file, hash, source, overrides}} (hypd.playbook.load)};
-- a definition of a name already registered replaces it (an operator's
-- playbook over a built-in tool, a reload), if it keeps at least the kind
-- of the built-in it overrides (weaker). overridden_by: the files of its
-- modules that take the place of built-in ones (a helper of the playbook
-- directory over the built-in one; its own file over a built-in tool)
function M.define(def, origin)
  if type(def) ~= "table" then bad_def("?", "a definition is a table") end
  def = own(def)
  M.check_def(def)
  local name = def.name
  def.params = def.params or {}
  if def.steps then def.params.plan = M.PLAN end
  origin = origin or {}
  def.source, def.module, def.hash = origin.source or "built-in", origin.module, origin.hash
  def.modules = own(origin.modules) or json.array()
  local prev = registry[name]
  local base = def.source ~= "built-in" and prev and (prev.source == "built-in" and prev or prev.overridden) or nil
  local why = M.weaker(def, base)
  if why then bad_def(name, why) end
  def.overridden = base
  if prev and prev.source == "built-in" and def.source ~= "built-in" then
    def.overrides = "built-in"
  elseif prev and prev.overrides and def.source ~= "built-in" then
    def.overrides = prev.overrides
  end
  local by = json.array()
  for _, m in ipairs(def.modules) do
    if m.overrides or (m.name == def.module and def.overrides) then by[#by + 1] = m.file end
  end
  def.overridden_by = #by > 0 and by or nil
  if not prev then order[#order + 1] = name end
  registry[name] = def
  if M.changed then M.changed() end
  return def
end

-- weaker(def, base) -> why | nil: an override keeps at least the kind of
-- the tool it replaces (read < mutating < destructive), else it would need
-- a lesser scope than that tool for what that tool does
local KIND_RANK = { read = 1, mutating = 2, destructive = 3 }
function M.weaker(def, base)
  if base and (KIND_RANK[def.kind] or 0) < (KIND_RANK[base.kind] or 0) then
    return string.format("it overrides the %s tool %s and is %s: an override keeps at least the kind of what it " ..
      "overrides (read < mutating < destructive), so it needs the same scope", base.kind, base.name,
      tostring(def.kind))
  end
end

-- remove(name): the tool is no longer registered (a reload dropped it)
function M.remove(name)
  if not registry[name] then return end
  registry[name] = nil
  for i, n in ipairs(order) do
    if n == name then table.remove(order, i) break end
  end
  if M.changed then M.changed() end
end

function M.get(name) return registry[name] end

-- list() -> definitions in the order they were defined
function M.list()
  local out = {}
  for _, n in ipairs(order) do out[#out + 1] = registry[n] end
  return out
end

-- schemas -----------------------------------------------------------------------

local function spec_schema(spec)
  local ty = spec.type
  if type(ty) == "table" then
    ty = json.array()
    for i, x in ipairs(spec.type) do ty[i] = x end
  end
  local s = { type = ty, description = spec.description, default = spec.default, pattern = spec.pattern,
    minimum = spec.minimum, maximum = spec.maximum, minLength = spec.min_length, maxLength = spec.max_length }
  if spec.enum then s.enum = json.array(); for i, v in ipairs(spec.enum) do s.enum[i] = v end end
  if not s.maxLength and not spec.enum then -- the bound validation holds a string to
    for _, t in ipairs(types_of(spec)) do if t == "string" then s.maxLength = M.MAX_STRING end end
  end
  if spec.items then s.items = spec_schema(spec.items) end
  local object = false
  for _, t in ipairs(types_of(spec)) do object = object or t == "object" end
  if object then
    s.properties = json.object()
    for k, v in pairs(spec.properties or {}) do s.properties[k] = spec_schema(v) end
    if spec.properties then
      s.additionalProperties = false
      local req = json.array()
      for k, v in pairs(spec.properties) do if v.required then req[#req + 1] = k end end
      table.sort(req)
      if #req > 0 then s.required = req end
    end
  end
  if spec.pattern_help then s["x-hypd-pattern-help"] = spec.pattern_help end
  if spec.secret then s.writeOnly = true end
  if spec.decision then s["x-hypd-decision"] = true end
  if spec.fixed then s["x-hypd-fixed"] = true end
  s["x-hypd-label"], s["x-hypd-help"], s["x-hypd-order"] = spec.label, spec.help, spec.order
  s["x-hypd-group"] = spec.group or ((spec.decision or spec.required) and "decisions" or "more")
  return s
end

-- input_schema(def) -> a JSON Schema 2020-12 object for the params
function M.input_schema(def)
  local props, required = json.object(), json.array()
  local names = {}
  for k in pairs(def.params) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    props[k] = spec_schema(def.params[k])
    if def.params[k].required then required[#required + 1] = k end
  end
  return { ["$schema"] = "https://json-schema.org/draft/2020-12/schema", type = "object", properties = props,
    required = #required > 0 and required or nil, additionalProperties = false }
end

-- shape(value, schema) -> value with its empty tables marked as the schema
-- says (an empty list goes out as [], not {}), so every front end's JSON
-- matches the tool's output schema
function M.shape(v, schema)
  if type(v) ~= "table" or type(schema) ~= "table" or v == json.null then return v end
  if schema.type == "array" then
    if next(v) == nil and not json.is_object(v) then return json.array() end
    if schema.items then for i, x in ipairs(v) do v[i] = M.shape(x, schema.items) end end
  elseif schema.type == "object" or schema.properties then
    if next(v) == nil and not json.is_array(v) then return json.object() end
    for k, s in pairs(schema.properties or {}) do
      if v[k] ~= nil then v[k] = M.shape(v[k], s) end
    end
  end
  return v
end

M.ACCEPTED = { type = "object", required = { "operation_id", "status", "status_tool", "poll_after_seconds" },
  properties = { operation_id = { type = "string" }, status = { type = "string" },
    status_tool = { type = "string" }, poll_after_seconds = { type = "integer" }, existing = { type = "boolean" } } }

-- what a staged tool called with plan = true answers; why: the reason a
-- resource is kept (or a stage planned later), which an agent shows the person
M.PLAN_RESULT = { type = "object", properties = { tool = { type = "string" }, target = { type = "string" },
  create = { type = "integer" }, change = { type = "integer" }, delete = { type = "integer" }, keep = { type = "integer" },
  plan = { type = "array", items = { type = "object", properties = {
    action = { type = "string", description = "create, change, delete, keep or later" },
    type = { type = "string" }, name = { type = "string" }, id = { type = "string" },
    fields = { type = "object" }, changes = { type = "object" }, why = { type = "string" } } } },
  cost = { type = "object", description = "what the plan creates or keeps costs an hour and a month (USD, on-demand " ..
    "list prices; monthly = 730 hours); items priced, unpriced with why; saved_*: what it deletes (hypd.cost)",
    properties = { items = { type = "array", items = { type = "object" } },
      unpriced = { type = "array", items = { type = "object" } } } },
  cost_error = { type = "string", description = "why no price could be read (the plan itself stands)" } } }

-- output_schema(def) -> the JSON Schema of what a call returns
function M.output_schema(def)
  if def.steps then return { type = "object", anyOf = { M.ACCEPTED, M.PLAN_RESULT } } end
  return def.result or { type = "object" }
end

-- validation ----------------------------------------------------------------------

local function type_is(t, v)
  if t == "string" then return type(v) == "string" end
  if t == "boolean" then return type(v) == "boolean" end
  -- an integer is exactly a 64-bit integer: 1e400, 2^63 or a 30-digit
  -- number is not one (math.tointeger refuses them), nor is 1.5
  -- (and a number: math.tointeger takes the text "8" too)
  if t == "integer" then return type(v) == "number" and math.tointeger(v) ~= nil end
  -- a number is finite: 1e400 reads as infinity
  if t == "number" then return type(v) == "number" and v == v and v > -math.huge and v < math.huge end
  if t == "array" then
    return type(v) == "table" and (json.is_array(v) or (not json.is_object(v) and (v[1] ~= nil or next(v) == nil)))
  end
  if t == "object" then return type(v) == "table" and not json.is_array(v) end
  return false
end

-- type_ok(spec, v) -> the first of the spec's types v has, or nil
local function type_ok(spec, v)
  for _, t in ipairs(types_of(spec)) do
    if type_is(t, v) then return t end
  end
end

local function describe(v)
  if v == json.null then return "null" end
  if type(v) == "table" then return json.is_array(v) and "an array" or "an object" end
  if type(v) == "number" then return errors.echo(string.format(math.type(v) == "integer" and "%d" or "%.17g", v)) end
  return type(v) == "string" and "a string" or type(v) == "boolean" and "a boolean" or "a number"
end

local TYPE_RULE = {
  integer = "an integer (a whole number from -9223372036854775808 to 9223372036854775807)",
  number = "a finite number", array = "an array", object = "an object",
}

-- what a decision parameter's absence says, by the tool's area
local WHO = { cluster = "the cluster", hyperpod = "the HyperPod cluster", storage = "the storage",
  model = "the model", training = "the training job", job = "the job", inference = "the inference endpoint" }

local function decision_note(tname)
  return " (a decision: ask the person who wants " .. (WHO[tname:match("^([a-z]+)_")] or "this done") .. ")"
end

local function type_rule(spec)
  local words = {}
  for i, t in ipairs(types_of(spec)) do words[i] = TYPE_RULE[t] or ("a " .. t) end
  return table.concat(words, " or ")
end

local check_value

-- check_fields(props, v, prefix, fields, owner, note, out) -> out: the
-- fields of object v checked against props (name -> spec): an unknown one
-- refused, a missing required one named (note(spec) adds to its message),
-- defaults filled. prefix names nested fields ("feature."); owner is who
-- takes them (a tool, or the parameter of an object)
local function check_fields(props, v, prefix, fields, owner, note, out)
  local names = {}
  for k in pairs(v) do names[#names + 1] = tostring(k) end
  table.sort(names)
  local known = {}
  for k in pairs(props) do known[#known + 1] = k end
  table.sort(known)
  for _, k in ipairs(names) do
    if not props[k] then
      local shown = prefix .. errors.echo(k, 40)
      fields[#fields + 1] = { field = shown, rule = "unknown", message = shown .. ": unknown field (" .. owner ..
        " takes " .. (#known > 0 and table.concat(known, ", ") or "no arguments") .. ")" }
    end
  end
  for _, k in ipairs(known) do
    local spec, x = props[k], v[k]
    if x == nil or x == json.null then
      if spec.required then
        fields[#fields + 1] = { field = prefix .. k, rule = "required", message = prefix .. k .. ": required" ..
          (note and note(spec) or "") }
      elseif spec.default ~= nil then
        out[k] = spec.default
      end
    else
      -- a secret is masked before anything can echo it, valid or not; as
      -- a caller-given one, which other callers' secrets evict but never
      -- the host's or a running operation's (log.h)
      if spec.secret and type(x) == "string" then core.add_secret(x, "caller") end
      local nv = check_value(spec, x, prefix .. k, fields)
      if nv ~= nil then out[k] = nv end
    end
  end
  return out
end

function check_value(spec, v, field, fields)
  local function add(rule, msg) fields[#fields + 1] = { field = field, rule = rule, message = field .. ": " .. msg } end
  local vt = type_ok(spec, v)
  if not vt then
    add("type", "must be " .. type_rule(spec) .. "; got " .. describe(v))
    return
  end
  if type(v) == "string" and utf8.len(v) == nil then
    add("utf8", "must be UTF-8 text (it holds bytes that are not)")
    return
  end
  if vt == "integer" then v = math.tointeger(v) end
  if spec.enum then
    local hit = false
    for _, e in ipairs(spec.enum) do hit = hit or e == v end
    if not hit then
      local shown = {}
      for i, e in ipairs(spec.enum) do shown[i] = tostring(e) end
      add("enum", "must be one of " .. table.concat(shown, ", ") .. "; got " ..
        (spec.secret and "another value" or errors.echo(v)))
    end
  end
  if type(v) == "string" then
    if spec.min_length and utf8.len(v) and utf8.len(v) < spec.min_length then
      add("min_length", "must be at least " .. spec.min_length .. " characters")
    end
    -- the length first: a value past it is refused before any pattern
    -- reads it (a string with no max_length has M.MAX_STRING)
    local max = spec.max_length or M.MAX_STRING
    local long = (utf8.len(v) or #v) > max
    if long then
      add("max_length", "must be at most " .. max .. " characters" ..
        (spec.max_length and "" or " (the bound of a string parameter that declares no max_length)"))
    end
    if spec.pattern and not long and not regex.compile(spec.pattern):test(v) then
      local rule = spec.pattern_help or (#spec.pattern <= 40 and "text matching " .. spec.pattern) or
        "text in the format its schema's pattern gives"
      add("pattern", "must be " .. rule .. (spec.secret and "" or "; got '" .. errors.echo(v) .. "'"))
    end
  elseif type(v) == "number" then
    if spec.minimum and v < spec.minimum then add("minimum", "must be at least " .. spec.minimum .. "; got " .. v) end
    if spec.maximum and v > spec.maximum then add("maximum", "must be at most " .. spec.maximum .. "; got " .. v) end
  elseif vt == "array" and spec.items then
    for i, x in ipairs(v) do
      if spec.items.secret and type(x) == "string" then core.add_secret(x, "caller") end
      check_value(spec.items, x, field .. "[" .. (i - 1) .. "]", fields)
    end
  elseif vt == "object" and spec.properties then
    v = check_fields(spec.properties, v, field .. ".", fields, field, nil, json.object())
  end
  return v
end

-- validate(def, args) -> params (defaults filled, integers normalised) | nil, VALIDATION err
function M.validate(def, args)
  if args == nil or args == json.null then args = {} end
  if type(args) ~= "table" or json.is_array(args) then
    return errors.fail("VALIDATION", def.name .. ": arguments must be a JSON object",
      { fields = { { field = "", rule = "type", message = "arguments must be a JSON object" } } })
  end
  local fields = {}
  local out = check_fields(def.params, args, "", fields, def.name, function(spec)
    return spec.decision and decision_note(def.name) or ""
  end, {})
  if #fields > 0 then
    local msgs = {}
    for i, f in ipairs(fields) do msgs[i] = f.message end
    return errors.fail("VALIDATION", def.name .. ": " .. table.concat(msgs, "; "), { fields = fields })
  end
  if def.validate then -- rules across fields, on the validated values; it checks, it does not act (hypd.tool.guard.inert)
    local ok, e = pcall(guard.confine, def.name .. " validate", def.validate, out)
    if not ok then
      if errors.is(e) or (type(e) == "table" and e.code) then return nil, setmetatable(e, errors.mt) end
      return errors.fail("INTERNAL", def.name .. ": its validate failed: " .. tostring(e))
    end
  end
  return out
end

-- public(params, def) -> a copy of params without secrets (for records and logs)
function M.public(def, params)
  local out = json.object()
  for k, v in pairs(params or {}) do
    out[k] = (def.params[k] and def.params[k].secret) and "[REDACTED]" or v
  end
  return out
end

-- describe(def) -> what every front end says about a tool (REST GET
-- /tools, MCP tools/list, hypd tools --json, the web UI): one description;
-- modules = {{name, file, hash, source = "built-in"|"operator", overrides}}
-- are the files it loads, overridden_by those of them that take the place
-- of built-in ones (absent when none does)
function M.describe(def)
  local input = M.input_schema(def)
  local aws = def.aws and json.array() or nil
  for i, a in ipairs(def.aws or {}) do aws[i] = a end
  local k8s = def.k8s and json.array() or nil
  for i, v in ipairs(def.k8s or {}) do k8s[i] = v end
  -- every file it loads, and the ones of them that take the place of built-in ones
  local modules = json.array()
  for i, m in ipairs(def.modules or {}) do
    modules[i] = { name = m.name, file = m.file, hash = m.hash, source = m.source, overrides = m.overrides }
  end
  local by = def.overridden_by and json.array() or nil
  for i, f in ipairs(def.overridden_by or {}) do by[i] = f end
  local sets, of = json.array(), toolsets.of(def)
  for _, n in ipairs(toolsets.NAMES) do if of[n] and n ~= "all" then sets[#sets + 1] = n end end
  return { name = def.name, kind = def.kind, scope = M.KINDS[def.kind], summary = def.summary, toolsets = sets,
    description = def.description, status_tool = def.status_tool, staged = def.steps ~= nil,
    input_schema = input, output_schema = M.output_schema(def), aws = aws, k8s = k8s,
    source = def.source or "built-in", overrides = def.overrides, overridden_by = by, hash = def.hash,
    modules = modules }
end

-- registry_view() -> every tool's description, in definition order
function M.registry_view()
  local out = json.array()
  for i, def in ipairs(M.list()) do out[i] = M.describe(def) end
  return out
end

-- coerce(params, name, text) -> the value for a text given for param
-- `name` (a key=value word, a query string), read by the param's spec:
-- integers, numbers and booleans from their text, arrays and objects from
-- JSON (an array of strings also from "a,b,c"); anything that does not
-- parse stays text, for validation to name
local function coerce_as(spec, t, text)
  if t == "integer" then
    local n = math.tointeger(tonumber(text))
    if n then return n end
  elseif t == "number" then
    local n = tonumber(text)
    if n then return n end
  elseif t == "boolean" then
    local l = text:lower()
    if l == "true" or l == "yes" or l == "1" then return true end
    if l == "false" or l == "no" or l == "0" then return false end
  elseif t == "array" or t == "object" then
    local v = json.decode(text)
    if type(v) == "table" then return v end
    if t == "array" and (not spec.items or spec.items.type == "string") then
      local out = json.array()
      for item in text:gmatch("[^,]+") do out[#out + 1] = item end
      return out
    end
  end
  return nil
end

function M.coerce(params, name, text)
  local spec = params and params[name]
  if not spec or type(text) ~= "string" then return text end
  for _, t in ipairs(types_of(spec)) do
    local v = coerce_as(spec, t, text)
    if v ~= nil then return v end
  end
  return text
end

-- scopes -------------------------------------------------------------------------

-- allowed(def, caller, plan) -> true | nil, FORBIDDEN err. plan: the call
-- asks a staged tool for its plan, which changes nothing (its steps run
-- under a guard that refuses every mutation: hypd.tool.guard), so a read
-- scope may ask; applying needs the tool's own scope.
function M.allowed(def, caller, plan)
  local need = (plan and def.steps) and "read" or M.KINDS[def.kind]
  local have = caller and caller.scope or "read"
  if (SCOPE_RANK[have] or 0) < SCOPE_RANK[need] then
    return errors.fail("FORBIDDEN", string.format("%s is a %s tool and needs a token with scope %s; this one " ..
      "has %s%s", def.name, def.kind, need, tostring(have), def.steps and " (it may still plan: plan = true)" or ""))
  end
  return true
end

return M
