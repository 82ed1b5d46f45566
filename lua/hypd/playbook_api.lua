-- hypd.playbook_api: the `hypd` table every playbook gets, the one API of
-- the built-in tools (lua/workflows/) and the operators' own. Documented
-- for people in docs/playbooks.md and for editors in lua/hypd/_meta/hypd.lua.
--
--   hypd.aws        call, try, pages, all (signed in C with the host's
--                   credentials, standard retries, idempotency tokens;
--                   opts: region, profile), region(), class(), tags (hypd.aws.tags)
--   hypd.k8s        connect{cluster, region} (default: the active cluster); log_line(line) ->
--                   time, text of a timestamps=true log line; time_key(time) -> sortable text
--                   -> get, list, create, apply, patch, delete, wait, watch, logs;
--                   cache{cluster, region, kinds, sample}: a watch-backed cache (hypd.k8s.cache)
--   hypd.tools      call(name, params): another tool, with the caller's scope; exists(name);
--                   check(name, args): would the call validate (placeholders <what> allowed)
--   hypd.operations list, get, events, wait (a status tool's view of operations);
--                   cancel (a mutating tool whose caller may call operation_cancel)
--   hypd.clusters   active(), get, list; set_active{name, region, arn} and
--                   record (a mutating or destructive tool), forget (a destructive one)
--   hypd.cidr       IPv4 blocks; hypd.yaml decode, decode_all
--   hypd.cost       estimate(things, region): on-demand prices (pricing:GetProducts)
--   hypd.manifests  load(name, vars), text, list: the Kubernetes manifests
--                   kept as YAML in the Lua tree (lua/manifests/)
--   hypd.recipes    list, get, validate, render: the training recipes (recipes/)
--   hypd.sleep, now, checkpoint, digest, spawn, http, json, log, errors, state, version
--
-- Every AWS and Kubernetes call passes the running tool's guardrail
-- (hypd.tool.guard): the actions and verbs it declares, what its kind allows.
-- The table and its parts are read-only views (hypd._readonly): one tool
-- cannot change what another gets. A playbook's top level, check and
-- target run under an inert guard: they call no tool and write no state.
local aws = require "hypd.aws"
local cidr = require "hypd.cidr"
local cost = require "hypd.cost"
local clusters = require "hypd.clusters"
local config = require "hypd.config"
local dispatch = require "hypd.tool.dispatch"
local eks = require "hypd.aws.eks"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local hints = require "hypd.hints"
local http = require "hypd.http"
local hyperpod_types = require "hypd.aws.hyperpod_types"
local json = require "hypd.json"
local k8s = require "hypd.k8s"
local k8s_cache = require "hypd.k8s.cache"
local kit = require "hypd.tool.kit"
local log = require "hypd.log"
local manifests = require "hypd.manifests"
local op = require "hypd.tool.operations"
local readonly = require "hypd._readonly"
local recipes = require "hypd.recipes"
local regex = require "hypd.regex"
local registry = require "hypd.tool.registry"
local signed = require "hypd.aws.signed"
local store = require "hypd.store"
local sys = require "hypd.sys"
local tags = require "hypd.aws.tags"
local task = require "hypd.task"
local yaml = require "hypd.yaml"

local M = {}

-- copy(t) -> a shallow copy (what a playbook gets of a shared library)
local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end
M.copy = copy

-- own(v) -> a deep copy of plain data (metatables kept: JSON's marks), so a
-- tool's result the caller gets is not the table the called tool keeps
local function own(v, seen)
  if type(v) ~= "table" then return v end
  seen = seen or {}
  if seen[v] then return seen[v] end
  local c = {}
  seen[v] = c
  for k, x in pairs(v) do c[own(k, seen)] = own(x, seen) end
  return setmetatable(c, getmetatable(v))
end

-- a task handle a playbook may hold without reaching the scheduler's state
local function task_handle(t)
  return {
    wait = function() return t:wait() end,
    cancel = function(_, reason) return t:cancel(reason) end,
    finished = function() return t:finished() end,
  }
end

-- refused(g, what, rule): a refusal is in hypd's audit log, as the guard's
-- requests are, with the tool and the caller
local function refused(g, what, rule)
  store.event("audit", g.op_id, { tool = g.tool and g.tool.name, action = what, outcome = "GUARDRAIL", rule = rule,
    caller = g.caller and g.caller.name, front = g.caller and g.caller.front })
end

-- inert(what) -> the current guard; raises GUARDRAIL when the code running
-- is a playbook's top level, a check or a target (hypd.tool.guard.inert): it
-- declares, it does not act. The error is final: the playbook's pcall
-- passes it on (hypd.playbook), so a file whose top level tries fails to
-- load even if it catches it.
local function inert(what)
  local g = guard.current()
  if g and g.inert then
    refused(g, what, "load, validate and target do not act")
    errors.raise("GUARDRAIL", string.format("%s may not %s: code that runs at load, in validate or in target " ..
      "declares, it does not act (do it in run or in a step)", g.tool.name, what), { tool = g.tool.name,
      action = what, rule = "load, validate and target do not act", final = true })
  end
  return g
end

-- aws_acting(fn), acting(what, fn) -> fn, refused first under an inert
-- guard (an AWS call, an HTTP request); the guard refuses the request
-- itself too, this makes the refusal one the playbook cannot swallow
local function aws_acting(fn)
  return function(service, operation, ...)
    inert("call " .. tostring(service) .. ":" .. tostring(operation))
    return fn(service, operation, ...)
  end
end
local function acting(what, fn)
  return function(...)
    inert(what)
    return fn(...)
  end
end

-- misuse_raises(fn): hypd.http for playbooks. A request hypd.http refuses
-- as malformed (VALIDATION: a field of the wrong type, aws = {} without its
-- service) is the playbook's mistake, not the world's: it raises in the
-- tool, with the field named, instead of answering nil, err that a playbook
-- might return as if it were a result. Transport failures still answer
-- nil, err.
local function misuse_raises(fn)
  return function(...)
    local r, err = fn(...)
    if r == nil and errors.is(err) and err.code == "VALIDATION" then error(err, 0) end
    return r, err
  end
end

-- KIND_RANK: what a tool's kind allows of hypd's own state
local KIND_RANK = { read = 1, mutating = 2, destructive = 3 }

-- may_change(what, kind): hypd's own state (the active cluster, the
-- clusters it knows, operations) changes only from a tool whose kind is at
-- least kind, never in a plan; a playbook run by the local user (hypd run,
-- no tool's guard) may. Refused: GUARDRAIL naming the rule.
local function may_change(what, kind)
  local g = inert(what)
  if not g then return end
  local def = g.tool or {}
  local rule
  if g.plan then
    rule = "a plan changes nothing"
  elseif (KIND_RANK[def.kind] or 1) < KIND_RANK[kind] then
    rule = string.format("it changes hypd's own state, which only a %s tool may (%s is %s)",
      kind == "mutating" and "mutating or destructive" or kind, tostring(def.name), tostring(def.kind))
  end
  if rule then
    refused(g, what, rule)
    errors.raise("GUARDRAIL", string.format("%s may not call %s: %s; nothing was changed", tostring(def.name), what,
      rule), { tool = def.name, action = what, rule = rule })
  end
end

local function state_api(name)
  local prefix = "playbook/" .. name .. "/"
  local function key(k)
    if type(k) ~= "string" or k == "" then error("state key must be a non-empty string", 3) end
    return prefix .. k
  end
  return {
    get = function(k) return store.get(key(k)) end,
    put = function(k, v) inert("write hypd.state"); return store.put(key(k), v) end,
    delete = function(k) inert("write hypd.state"); return store.delete(key(k)) end,
  }
end

local function k8s_api()
  return {
    connect = function(args)
      inert("connect to Kubernetes")
      args = args or {}
      if not args.cluster then
        local c, err = clusters.target { region = args.region }
        if not c then
          err.message = "hypd.k8s.connect: " .. err.message
          error(err, 0)
        end
        args = { cluster = c.name, region = c.region }
      end
      return k8s.connect { cluster = args.cluster, region = args.region, profile = args.profile }
    end,
    log_line = k8s.log_line,
    time_key = k8s.time_key,
    -- cache{cluster, region, kinds, sample}: the running tool's watch-backed
    -- cache of the cluster (hypd.k8s.cache), one per tool and cluster: its
    -- records are that tool's own (read them, do not change them)
    cache = function(spec)
      inert("open a Kubernetes cache")
      local g = guard.current()
      local c = k8s_cache.open { name = g and g.tool and g.tool.name or "playbook", cluster = spec.cluster,
        region = spec.region, kinds = spec.kinds, sample = spec.sample }
      return c:facade()
    end,
  }
end

-- the caller a playbook's nested tool calls act for: the running tool's
-- caller (its scope), else the playbook run itself (hypd run: the local user)
local function caller_of(name)
  local g = guard.current()
  if g and g.caller then return g.caller, g end
  return { name = "playbook:" .. name, scope = "admin", front = "playbook" }, g
end

local function tools_api(name)
  return {
    -- exists(name) -> true when a tool of that name is registered
    exists = function(tname) return registry.get(tname) ~= nil end,
    -- check(name, args) -> true | nil, problems (texts): would the call pass
    -- the tool's validation; a string value <what> is a placeholder the
    -- person fills (hypd.hints), so a required parameter it holds is given
    check = function(tname, args)
      local call = { tool = tname, args = {} }
      for k, v in pairs(args or {}) do
        local text = type(v) == "string" and v or json.encode(v)
        call.args[#call.args + 1] = { key = k, value = text, json = type(v) ~= "string",
          placeholder = type(v) == "string" and v:match(hints.PLACEHOLDER) ~= nil }
      end
      return hints.check(call)
    end,
    -- call(name, params) -> result (raises the tool's error). A staged tool
    -- called from inside an operation runs as its child operation and the
    -- call waits for it (its result, or its error); from a plan, it plans.
    call = function(tname, params)
      inert("call the tool " .. tostring(tname))
      local caller, g = caller_of(name)
      local def = registry.get(tname)
      local args = copy(params or {})
      if def and def.steps and g and g.plan then args.plan = true end
      local c = copy(caller)
      -- a plan's child plans after what its caller planned so far: what the
      -- caller deletes first is gone when the child's run gets there (the
      -- teardown's FSx file system before hyperpod_delete's subnet)
      if def and def.steps and g and g.plan and g.ctx then c.plan_before = own(g.ctx.planned or json.array()) end
      local r, err
      if def and def.steps and g and g.op_id and not g.plan then
        c.parent = g.op_id
        -- resumed after a crash: the child this step started before
        local valid = registry.validate(def, args)
        local known = valid and op.child_of(g.op_id, def, valid)
        if known then r = { operation_id = known.id } end
      end
      if not r then r, err = dispatch.call(tname, args, c) end
      if r == nil then error(err, 0) end
      r = own(r) -- the caller's copy: what the called tool keeps stays its own
      if def and def.steps and g and g.plan and g.ctx then
        g.ctx.planned = g.ctx.planned or json.array()
        for _, e in ipairs(r.plan or {}) do g.ctx.planned[#g.ctx.planned + 1] = e end
      end
      if c.parent and r.operation_id then
        local view = op.wait(r.operation_id)
        if view.status == "running" then
          -- the child's task here ended without finishing it: this host is
          -- stopping. The parent's slice ends too, not failed: both resume
          -- at the next start, where this call finds the child again
          local e = errors.new("CANCELLED", string.format("%s (operation %s) was interrupted: this host is " ..
            "stopping; it resumes at the next start", tname, r.operation_id), { operation_id = r.operation_id })
          e.abort = true
          error(e, 0)
        end
        if view.status ~= "succeeded" then
          -- a child that was cancelled fails its parent: CANCELLED raised
          -- here would read as this host stopping (the parent kept running)
          local code = view.error and view.error.code or "FAILED"
          if view.status == "cancelled" or code == "CANCELLED" then code = "FAILED" end
          errors.raise(code, string.format("%s (operation %s) %s: %s", tname,
            r.operation_id, tostring(view.status), tostring(view.error and view.error.message or view.phase)),
            { operation_id = r.operation_id })
        end
        return view.result or json.object()
      end
      return r
    end,
  }
end

local function operations_api()
  return {
    list = function(filter)
      local out = json.array()
      for i, rec in ipairs(op.list(filter or {})) do out[i] = op.view(rec) end
      return out
    end,
    get = function(id) return op.view(op.get(id)) end,
    state = function(id) return op.state(id) end,
    events = function(id, after, limit, wait) return op.events(id, after, limit, wait) end,
    wait = function(id, seconds) return op.wait_change(id, seconds) end,
    -- cancel(id): as operation_cancel does, and only where it may be
    -- called: from a mutating or destructive tool whose caller's scope
    -- allows operation_cancel (a read tool's token could not call it)
    cancel = function(id)
      may_change("hypd.operations.cancel", "mutating")
      local caller = caller_of("operations")
      local def = registry.get("operation_cancel")
      if def then
        local ok, err = registry.allowed(def, caller)
        if not ok then
          errors.raise("GUARDRAIL", "hypd.operations.cancel: " .. err.message, { action = "hypd.operations.cancel",
            rule = "the caller's scope must allow operation_cancel" })
        end
      end
      return op.cancel(id, caller)
    end,
  }
end

-- clusters: what hypd knows of clusters; the changes are refused to tools
-- whose kind does not allow them (may_change)
local function clusters_api()
  return {
    active = clusters.active, get = clusters.get, list = clusters.list, target = clusters.target, NONE = clusters.NONE,
    set_active = function(c)
      may_change("hypd.clusters.set_active", "mutating")
      return clusters.set_active(c)
    end,
    record = function(c)
      may_change("hypd.clusters.record", "mutating")
      return clusters.record(c)
    end,
    forget = function(n, region)
      may_change("hypd.clusters.forget", "destructive")
      return clusters.forget(n, region)
    end,
  }
end

-- regex: a compiled pattern is shared (hypd.regex caches it and the
-- registry validates with it): a playbook gets its own handle on it
local function regex_api()
  return {
    compile = function(src)
      local re, err = regex.compile(src)
      if not re then return nil, err end
      return { src = re.src, groups = re.groups or 0, test = function(_, x) return re:test(x) end,
        match = function(_, x) return re:match(x) end }
    end,
  }
end

-- hypd.json: hypd.json's functions and equal(a, b), JSON equality (the kit's)
local function json_api()
  local j = copy(json)
  j.equal = kit.same
  return j
end

-- build(name, sandbox) -> the hypd table of playbook `name`: a read-only
-- view (hypd._readonly), its parts too, so a playbook changes no binding.
-- sandbox: hypd.playbook, whose env the recipes run in (hypd.recipes)
function M.build(name, sandbox)
  return readonly.view(M.table(name, sandbox), "hypd", true)
end

-- table(name, sandbox) -> the hypd table itself (build gives its view)
function M.table(name, sandbox)
  local component = "playbook " .. name
  local l = {}
  for _, level in ipairs { "debug", "info", "warn", "error" } do
    l[level] = function(fmt, ...) log[level](component, fmt, ...) end
  end
  return {
    version = config.version,
    sleep = task.sleep,
    now = task.now,
    checkpoint = task.checkpoint,
    -- digest("sha256" | "md5", data) -> hex (an S3 ETag, a content hash)
    digest = function(alg, data) return sys.digest(alg, data, "hex") end,
    -- (the task keeps the guard of the code that started it: hypd._sched)
    spawn = function(fn, opts, ...)
      inert("start a task")
      return task_handle(task.spawn(fn, opts, ...))
    end,
    http = { request = acting("send an HTTP request", misuse_raises(http.request)),
      get = acting("send an HTTP request", misuse_raises(http.get)) },
    json = json_api(),
    log = l,
    -- kit.planned_id(kind, name), kit.is_planned(v): a plan's ids (hypd.kit)
    kit = { planned_id = kit.planned_id, is_planned = kit.is_planned },
    errors = { new = errors.new, raise = errors.raise, fail = errors.fail, is = errors.is, refuse = errors.refuse,
      refuse_all = errors.refuse_all },
    state = state_api(name),
    aws = { call = aws_acting(aws.call), try = aws_acting(aws.try), pages = aws_acting(aws.pages),
      all = aws_acting(aws.all), class = aws.class,
      region = function(opts) return aws.region(opts or {}) end,
      hyperpod_types = function() return copy(hyperpod_types) end,
      eks_cluster_name = eks.CLUSTER_NAME, -- EKS' rule for a cluster name, a JSON Schema pattern
      members = aws.members, signed_json = acting("send a signed AWS request", signed.request),
      tags = copy(tags) }, -- map(list), list(map): AWS tags as {key = value} and as [{Key, Value}]
    k8s = k8s_api(),
    tools = tools_api(name),
    operations = operations_api(),
    clusters = clusters_api(),
    cidr = copy(cidr),
    -- cost.estimate(things, region) -> cost | nil, cost_error (pricing:GetProducts; hypd.cost)
    cost = { estimate = cost.estimate, HOURS_PER_MONTH = cost.HOURS_PER_MONTH },
    yaml = { decode = yaml.decode, decode_all = yaml.decode_all },
    -- regex.compile(src) -> re | nil, err (the JSON Schema pattern subset; re:test(s), re:match(s))
    regex = regex_api(),
    manifests = copy(manifests),
    recipes = recipes.catalogue(sandbox),
  }
end

return M
