-- hypd.playbook_api: the `hypd` table every playbook gets, the one API of
-- the built-in tools (lua/workflows/) and the operators' own. Documented
-- for people in docs/playbooks.md and for editors in lua/hypd/_meta/hypd.lua.
--
--   hypd.aws        call, try, pages, all (signed in C with the host's
--                   credentials, standard retries, idempotency tokens;
--                   opts: region, profile), region(), class()
--   hypd.k8s        connect{cluster, region} (default: the active cluster); log_line(line) ->
--                   time, text of a timestamps=true log line; time_key(time) -> sortable text
--                   -> get, list, create, apply, patch, delete, wait, watch, logs
--   hypd.tools      call(name, params): another tool, with the caller's scope
--   hypd.operations list, get, events, wait (a status tool's view of operations)
--   hypd.clusters   active(), set_active{name, region, arn}
--   hypd.cidr       IPv4 blocks; hypd.yaml decode, decode_all
--   hypd.manifests  load(name, vars), text, list: the Kubernetes manifests
--                   kept as YAML in the Lua tree (lua/manifests/)
--   hypd.recipes    list, get, validate, render: the training recipes (recipes/)
--   hypd.sleep, now, checkpoint, digest, spawn, http, json, log, errors, state, version
--
-- Every AWS and Kubernetes call passes the running tool's guardrail
-- (hypd.guard): the actions and verbs it declares, what its kind allows.
local aws = require "hypd.aws"
local cidr = require "hypd.cidr"
local clusters = require "hypd.clusters"
local config = require "hypd.config"
local errors = require "hypd.errors"
local guard = require "hypd.guard"
local http = require "hypd.http"
local json = require "hypd.json"
local log = require "hypd.log"
local store = require "hypd.store"
local task = require "hypd.task"

local M = {}

-- copy(t) -> a shallow copy (what a playbook gets of a shared library)
local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end
M.copy = copy

-- a task handle a playbook may hold without reaching the scheduler's state
local function task_handle(t)
  return {
    wait = function() return t:wait() end,
    cancel = function(_, reason) return t:cancel(reason) end,
    finished = function() return t:finished() end,
  }
end

local function state_api(name)
  local prefix = "playbook/" .. name .. "/"
  local function key(k)
    if type(k) ~= "string" or k == "" then error("state key must be a non-empty string", 3) end
    return prefix .. k
  end
  return {
    get = function(k) return store.get(key(k)) end,
    put = function(k, v) return store.put(key(k), v) end,
    delete = function(k) return store.delete(key(k)) end,
  }
end

local function k8s_api()
  return {
    connect = function(args)
      args = args or {}
      if not args.cluster then
        local act = clusters.active()
        if not act then
          errors.raise("NOT_FOUND", "hypd.k8s.connect: no cluster given and none is active (cluster_switch)",
            { field = "cluster" })
        end
        args = { cluster = act.name, region = args.region or act.region }
      end
      return require("hypd.k8s").connect { cluster = args.cluster, region = args.region, profile = args.profile }
    end,
    log_line = require("hypd.k8s").log_line,
    time_key = require("hypd.k8s").time_key,
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
    exists = function(tname) return require("hypd.tool").get(tname) ~= nil end,
    -- call(name, params) -> result (raises the tool's error). A staged tool
    -- called from inside an operation runs as its child operation and the
    -- call waits for it (its result, or its error); from a plan, it plans.
    call = function(tname, params)
      local tool = require "hypd.tool"
      local caller, g = caller_of(name)
      local def = tool.get(tname)
      local args = copy(params or {})
      if def and def.steps and g and g.plan then args.plan = true end
      local c = copy(caller)
      local op = require "hypd.op"
      local r, err
      if def and def.steps and g and g.op_id and not g.plan then
        c.parent = g.op_id
        -- resumed after a crash: the child this step started before
        local valid = tool.validate(def, args)
        local known = valid and op.child_of(g.op_id, def, valid)
        if known then r = { operation_id = known.id } end
      end
      if not r then r, err = tool.call(tname, args, c) end
      if r == nil then error(err, 0) end
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
  local op = require "hypd.op"
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
    cancel = function(id) return op.cancel(id, (caller_of("operations"))) end,
  }
end

-- hypd.json: hypd.json's functions and equal(a, b), JSON equality (the kit's)
local function json_api()
  local j = copy(json)
  j.equal = require("hypd.kit").same
  return j
end

-- build(name) -> the hypd table of playbook `name`
function M.build(name)
  local component = "playbook " .. name
  local l = {}
  for _, level in ipairs { "debug", "info", "warn", "error" } do
    l[level] = function(fmt, ...) log[level](component, fmt, ...) end
  end
  local yaml = require "hypd.yaml"
  return {
    version = config.version,
    sleep = task.sleep,
    now = task.now,
    checkpoint = task.checkpoint,
    -- digest("sha256" | "md5", data) -> hex (an S3 ETag, a content hash)
    digest = function(alg, data) return require("hypd.core").digest(alg, data, "hex") end,
    spawn = function(fn, opts, ...) return task_handle(task.spawn(fn, opts, ...)) end,
    http = { request = http.request, get = http.get },
    json = json_api(),
    log = l,
    errors = { new = errors.new, raise = errors.raise, fail = errors.fail, is = errors.is },
    state = state_api(name),
    aws = { call = aws.call, try = aws.try, pages = aws.pages, all = aws.all, class = aws.class,
      region = function(opts) return aws.region(opts or {}) end,
      hyperpod_types = function() return copy(require "hypd.aws.hyperpod_types") end,
      members = aws.members, signed_json = aws.signed_json },
    k8s = k8s_api(),
    tools = tools_api(name),
    operations = operations_api(),
    clusters = { active = clusters.active, set_active = clusters.set_active, record = clusters.record,
      get = clusters.get, list = clusters.list, forget = clusters.forget },
    cidr = copy(cidr),
    yaml = { decode = yaml.decode, decode_all = yaml.decode_all },
    -- regex.compile(src) -> re | nil, err (the JSON Schema pattern subset; re:test(s), re:match(s))
    regex = { compile = require("hypd.regex").compile },
    manifests = copy(require "hypd.manifests"),
    recipes = copy(require "hypd.recipes"),
  }
end

return M
