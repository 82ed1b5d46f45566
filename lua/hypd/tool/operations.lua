-- hypd.tool.operations: operations, the record of every mutating call. A staged tool's
-- call creates the record first and returns at once with
-- {operation_id, status, status_tool, poll_after_seconds}; a task then runs
-- the steps. Each step is idempotent; the record names the step running and
-- its phase, and ctx.state (the step's scratch: ids found or created) is
-- persisted, so after a crash or restart resume() continues every running
-- operation from its last step. A second call for the same tool and target
-- while one runs returns that one (agents retry; people double-click).
-- Cancellation stops at the next wait or step boundary and is recorded.
--
-- Step context: ctx.params, ctx.op_id, ctx.region, ctx.state, ctx:save(),
-- ctx:phase(text), ctx:progress(text), ctx:call/try(service, op, params),
-- ctx:sleep(s), ctx:check_cancel().
local aws = require "hypd.aws"
local clusters = require "hypd.clusters"
local core = require "hypd.core"
local cost = require "hypd.cost"
local ctx_base = require "hypd.tool.ctx"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local json = require "hypd.json"
local kit = require "hypd.tool.kit"
local log = require "hypd.log"
local readonly = require "hypd._readonly"
local registry = require "hypd.tool.registry"
local secrets = require "hypd.secrets"
local statelock = require "hypd.statelock"
local store = require "hypd.store"
local sys = require "hypd.sys"
local task = require "hypd.task"

local M = {}
M.POLL_AFTER = 30        -- what callers are told to wait between status calls
local running = {}       -- op id -> task
local subscribers = {}   -- id -> fn(event)
local next_sub = 0

local function state_key(id) return "op/" .. id .. "/state" end
local function meta_key(id) return "op/" .. id .. "/meta" end
local function child_prefix(id) return "op/" .. id .. "/child/" end
local function cancel_key(id) return "op/" .. id .. "/cancel" end

-- subscribe(fn(event)) -> unsubscribe function. Events: {kind =
-- "operation.started"|"operation.phase"|"operation.progress"|"operation.finished"|
-- "operation.failed"|"operation.cancelled", operation_id, tool, target, phase, status, message, at}
function M.subscribe(fn)
  next_sub = next_sub + 1
  local id = next_sub
  subscribers[id] = fn
  return function() subscribers[id] = nil end
end

local emit

-- relay(rec, ev): a child operation's event, as a progress note on its
-- parent (and so on up): whoever follows cluster_create (a CLI, a page, an
-- MCP client) sees what its running child waits for, not only the parent's
-- step ("hyperpod_create: waiting for ...")
local parent_of = {} -- operation id -> its parent's id, or false (fixed at creation: read once)
local function relay(rec, ev)
  local parent = parent_of[rec.id]
  if parent == nil then
    parent = (store.get(meta_key(rec.id)) or {}).parent or false
    parent_of[rec.id] = parent
  end
  local prec = parent and store.op_get(parent)
  if not prec then return end
  local text = ev.message or (ev.kind == "operation.phase" and ev.phase) or
    (ev.kind ~= "operation.progress" and (ev.kind:gsub("^operation%.", ""))) or nil
  if not text then return end
  emit("operation.progress", prec, { message = rec.tool .. ": " .. tostring(text), wait = ev.wait,
    child = { operation_id = rec.id, tool = rec.tool, phase = rec.phase, status = rec.status } })
end

function emit(kind, rec, extra, persist)
  local ev = { kind = kind, operation_id = rec.id, tool = rec.tool, target = rec.target, phase = rec.phase,
    status = rec.status, at = core.now() }
  for k, v in pairs(extra or {}) do ev[k] = v end
  if persist ~= false then store.event(kind, rec.id, ev) end
  for _, fn in pairs(subscribers) do
    local ok, err = pcall(fn, ev)
    if not ok then log.warn("op", "an event subscriber failed: %s", tostring(err)) end
  end
  if persist ~= false then relay(rec, ev) end
end

-- changed(resource, data): a state change that is not an operation's
-- (e.g. the active cluster), as a "resource.changed" event to subscribers
-- and the event log
function M.changed(resource, data)
  local ev = { kind = "resource.changed", resource = resource, at = core.now() }
  for k, v in pairs(data or {}) do ev[k] = v end
  store.event("resource.changed", nil, ev)
  for _, fn in pairs(subscribers) do
    local ok, err = pcall(fn, ev)
    if not ok then log.warn("op", "an event subscriber failed: %s", tostring(err)) end
  end
end
clusters.on_change = M.changed

-- region_of(def, params, state) -> the region an operation works in: its
-- parameter, the one it recorded, else the configured one (only for tools
-- that use AWS)
local function region_of(def, params, state)
  if def.aws ~= nil or params.region ~= nil or state.region ~= nil then
    return params.region or state.region or aws.region { region = params.region }
  end
end

-- run_steps(ctx, def, params, o): the one loop over a tool's steps, for an
-- operation, a plan and a call's on_call checks. ctx.region is settled
-- first; each step's returned table is merged into ctx.state. What a
-- plan only reads, ctx.plan and the guard the caller set say; the loop
-- differs only by o:
--   o.record   the operation's record: a step it marks done is skipped (a
--              resumed operation), each other one sees cancellation first,
--              is recorded running (its phase) and then done, with
--              ctx.state saved in between
--   o.on_call  only the leading steps marked on_call
-- Without a record, ctx:phase(name) tells each step's start.
local function run_steps(ctx, def, params, o)
  local rec = o.record
  ctx.region = region_of(def, params, ctx.state)
  ctx.state.region = ctx.region
  for i, step in ipairs(def.steps) do
    if o.on_call and not step.on_call then break end
    local s = rec and rec.steps[i]
    if not (s and s.status == "done") then
      if s then
        ctx:check_cancel()
        s.status, s.started_at = "running", s.started_at or core.now()
        rec.phase = step.name
        assert(store.op_update(rec.id, { steps = rec.steps, phase = step.name }))
        emit("operation.phase", rec)
      else
        ctx:phase(step.name)
      end
      local out = step.run(ctx)
      if type(out) == "table" then for k, v in pairs(out) do ctx.state[k] = v end end
      if s then
        ctx:save()
        s.status, s.finished_at = "done", core.now()
        s.seconds = s.finished_at - s.started_at
        assert(store.op_update(rec.id, { steps = rec.steps }))
      end
    end
  end
end

-- view(record) -> what callers see of an operation
-- The record's companions in the store: op/<id>/meta = {parent, source,
-- hash, scope} (the playbook the operation runs, its content hash, the
-- caller's scope for the tools it calls), op/<parent>/child/<id> = {tool}.
function M.view(rec)
  if not rec then return nil end
  local def = registry.get(rec.tool)
  local meta = store.get(meta_key(rec.id)) or {}
  local children
  for key in pairs(store.list(child_prefix(rec.id)) or {}) do
    local c = store.op_get(key:sub(#child_prefix(rec.id) + 1))
    if c then
      children = children or json.array()
      children[#children + 1] = { operation_id = c.id, tool = c.tool, status = c.status, phase = c.phase,
        created_at = c.created_at }
    end
  end
  if children then table.sort(children, function(a, b) return a.created_at < b.created_at end) end
  return { operation_id = rec.id, tool = rec.tool, target = rec.target, status = rec.status, phase = rec.phase,
    params = rec.params, caller = rec.caller, frontend = rec.frontend, steps = rec.steps, result = rec.result,
    error = rec.error, created_at = rec.created_at, updated_at = rec.updated_at, finished_at = rec.finished_at,
    seconds = (rec.finished_at or core.now()) - rec.created_at, status_tool = def and def.status_tool,
    parent = meta.parent, children = children, source = meta.source, source_hash = meta.hash,
    cancelled_by = rec.status == "cancelled" and store.get(cancel_key(rec.id)) or nil }
end

function M.get(id) return store.op_get(id) end

-- state(id) -> what the operation's steps keep (ids found or made) | nil
function M.state(id) return store.get(state_key(id)) end

-- list{status, tool, target, limit} -> records, newest first
function M.list(filter)
  return store.op_list(filter) or {}
end

-- a staged tool's context: hypd.tool.ctx's, with a persisted state, recorded
-- phases and notes, and cancellation
-- (its methods find the operation in `record`, not in ctx.op_id, which the
-- tool's code could change: a ctx writes only its own operation)
local Ctx = readonly.class(setmetatable({}, { __index = ctx_base.Ctx }))
local record = setmetatable({}, { __mode = "k" }) -- ctx -> its operation's record

function Ctx:save() assert(store.put(state_key(record[self].id), self.state)) end

function Ctx:phase(text)
  local rec = record[self]
  rec.phase = text
  assert(store.op_update(rec.id, { phase = text }))
  emit("operation.phase", rec)
  log.info("op", "%s %s: %s", rec.tool, rec.id, text)
end

-- progress(text): a note on the current phase, kept with the operation's
-- events so that every follower (a CLI over --api, a reloaded page) sees
-- the same notes as one in this process
-- (extra.wait = {what, seen, waited}: a wait's progress, from hypd.tool.kit's poll)
function Ctx:progress(text, extra)
  local wait = type(extra) == "table" and type(extra.wait) == "table" and extra.wait or nil
  if wait then
    wait = { what = core.redact(tostring(wait.what)), seen = wait.seen and core.redact(tostring(wait.seen)),
      waited = tonumber(wait.waited) }
  end
  emit("operation.progress", record[self], { message = core.redact(tostring(text)), wait = wait })
end

function Ctx:check_cancel()
  local id = record[self].id
  if store.get(cancel_key(id)) then errors.raise("CANCELLED", "operation " .. id .. " was cancelled") end
end


-- error_view(e) -> the error as the record keeps it: through the log's
-- redaction, without the position of the Lua code that raised it (that
-- goes to the log), so no stored or returned surface carries a secret or a
-- playbook's path
local function error_view(e)
  if not errors.is(e) and type(e) == "table" and e.code then setmetatable(e, errors.mt) end
  if not errors.is(e) then e = errors.new("INTERNAL", tostring(e)) end
  local msg = tostring(e.message or e.code)
  repeat
    local n
    msg, n = msg:gsub("^[^%s:]*%.lua:%d+: ", "", 1)
  until n == 0
  local fields
  if type(e.fields) == "table" then
    fields = json.array()
    for i, f in ipairs(e.fields) do
      fields[i] = { field = f.field, rule = f.rule, message = f.message and core.redact(tostring(f.message)) }
    end
  end
  return { code = tostring(e.code), message = core.redact(msg), status = e.status, fields = fields }
end

-- shown(v) -> a copy of v with every string through the log's redaction:
-- a result is stored in the record every reader of operations sees, so a
-- secret (or a transform of it) a careless tool returns is masked there
local function shown(v, depth)
  depth = depth or 0
  if type(v) == "string" then return core.redact(v) end
  if type(v) ~= "table" or depth > 64 then return v end
  local out = setmetatable({}, getmetatable(v)) -- json.array/object marks kept
  for k, x in pairs(v) do out[k] = shown(x, depth + 1) end
  return out
end

-- A graceful stop never fails an operation. While this process stops
-- (SIGTERM, Ctrl-C: the engine's interrupt flag, then hypd serve's grace)
-- the interrupt strikes whatever task runs Lua at that moment: a step, a
-- child operation a parent waits for, the in-process sandbox answering a
-- request (a 500). What a step then raises is the stop's doing, not the
-- operation's: the record stays running and resume() continues it at the
-- next start (a real failure fails again there, recorded then).
local halting = false

-- halt(): this process is stopping (hypd serve's stop, before the grace)
function M.halt() halting = true end

-- stopping() -> true once this process is stopping
function M.stopping() return halting or core.interrupted() end

-- run(rec, params): the operation's task body; continues from the first step
-- not done
local function run(rec, def, params)
  local meta = store.get(meta_key(rec.id)) or {}
  local caller = { name = rec.caller, front = rec.frontend, scope = meta.scope or "operate" }
  local shown_tool, shown_caller = ctx_base.shown(def, caller)
  local ctx = setmetatable({ op_id = rec.id, params = params, tool = shown_tool, caller = shown_caller,
    state = store.get(state_key(rec.id)) or json.object() }, Ctx)
  record[ctx] = rec
  local steps = rec.steps
  -- every AWS and Kubernetes call of the steps passes the tool's guardrail
  task.current().guard = guard.new { tool = def, op_id = rec.id, caller = caller }
  -- everything that can fail is inside: an operation that fails at any
  -- point, before its first step too, ends recorded as failed
  local ok, err = pcall(run_steps, ctx, def, params, { record = rec })
  running[rec.id] = nil
  local e0 = not ok and error_view(err)
  local asked = not ok and store.get(cancel_key(rec.id)) ~= nil
  if not ok and not asked and (e0.code == "CANCELLED" or M.stopping()) then
    -- the host is stopping (SIGTERM, Ctrl-C), not a person cancelling: the
    -- record stays running and resume() continues it on the next start
    log.info("op", "%s %s interrupted at %s (%s); it resumes when a host opens this state again", rec.tool,
      rec.id, tostring(rec.phase), e0.code)
    return
  end
  secrets.drop(rec.id) -- the operation has ended: its secrets go
  if ok then
    rec.status, rec.phase = "succeeded", "done"
    store.op_update(rec.id, { status = "succeeded", phase = "done", result = shown(ctx.state.result or json.object()),
      finished_at = true })
    emit("operation.finished", rec)
    return
  end
  local e = e0
  if type(err) == "table" and err.traceback then log.debug("op", "%s %s: %s", rec.tool, rec.id, err.traceback) end
  log.debug("op", "%s %s raised: %s", rec.tool, rec.id, tostring(type(err) == "table" and err.message or err))
  local cancelled = e.code == "CANCELLED" or asked
  for _, s in ipairs(steps) do
    if s.status == "running" then s.status = cancelled and "cancelled" or "failed"; s.error = e.message end
  end
  rec.status = cancelled and "cancelled" or "failed"
  store.op_update(rec.id, { status = rec.status, steps = steps, error = e, finished_at = true,
    phase = cancelled and ("cancelled during " .. tostring(rec.phase)) or rec.phase })
  emit(cancelled and "operation.cancelled" or "operation.failed", rec, { message = e.message })
  log.warn("op", "%s %s %s: %s", rec.tool, rec.id, rec.status, e.message)
end

local function launch(rec, def, params)
  running[rec.id] = task.spawn(run, { name = "operation " .. rec.id .. " " .. rec.tool, daemon = true },
    rec, def, params)
end

local function new_id()
  return "op-" .. (sys.random_bytes(8):gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function accepted(rec, def, existing)
  return { operation_id = rec.id, status = rec.status, status_tool = def.status_tool,
    poll_after_seconds = M.POLL_AFTER, existing = existing or nil }
end

local same = kit.same

-- differing(def, rec, params, compare_secrets) -> sorted names of the
-- parameters in which a call differs from the running operation rec, and
-- the sorted names of the secret ones either of them has. Secrets are
-- compared with the ones kept for it (never shown) only when
-- compare_secrets says so.
local function differing(def, rec, params, compare_secrets)
  local public, kept = registry.public(def, params), nil
  local names, secret_names, seen = {}, {}, {}
  for k in pairs(public) do seen[k] = true end
  for k in pairs(rec.params or {}) do seen[k] = true end
  for k in pairs(seen) do
    local spec = def.params[k]
    if spec and spec.secret then
      secret_names[#secret_names + 1] = k
      if compare_secrets then
        kept = kept or secrets.get(rec.id) or {}
        if not same(kept[k], params[k]) then names[#names + 1] = k end
      end
    elseif not same((rec.params or {})[k], public[k]) then
      names[#names + 1] = k
    end
  end
  table.sort(names)
  table.sort(secret_names)
  return names, secret_names
end

-- target_of(def, params) -> the operation's target key, with no secret in it
-- (a target is shown in records, events and lists)
local function target_of(def, params)
  -- target names what the operation works on; it does not act (hypd.tool.guard.inert)
  local target = tostring(guard.confine(def.name .. " target", def.target, params))
  for k, spec in pairs(def.params) do
    local v = params[k]
    if spec.secret and type(v) == "string" and v ~= "" then
      local i = target:find(v, 1, true)
      while i do
        target = target:sub(1, i - 1) .. "[REDACTED]" .. target:sub(i + #v)
        i = target:find(v, i + 10, true)
      end
    end
  end
  return core.redact(target)
end

-- plan(def, params, caller) -> {tool, target, plan = [...], create, change,
-- delete}: the steps run with ctx.plan in this task, read-only by the
-- guardrail; nothing is recorded (hypd.tool.kit says how ensure plans)
-- prices(def) -> true when the tool reads prices (declares pricing:GetProducts)
local function prices(def)
  for _, a in ipairs(def.aws or {}) do
    if a == "pricing:GetProducts" then return true end
  end
  return false
end

function M.plan(def, params, caller)
  local ctx = ctx_base.new { tool = def, params = params, caller = caller, plan = true,
    progress = caller and caller.progress }
  -- a plan inside an operation (cluster_create's check) is as patient as it
  local g = guard.new { tool = def, caller = caller, plan = true, patient = caller and caller.parent ~= nil }
  g.ctx = ctx -- a staged tool its steps call (hypd.tools.call) plans too, into this plan
  local ok, err = pcall(guard.with, g, run_steps, ctx, def, params, {})
  if not ok then return nil, errors.is(err) and err or errors.new("INTERNAL", tostring(err)) end
  local out = kit.summary(ctx)
  out.tool, out.target = def.name, target_of(def, params)
  if prices(def) then -- what it creates or keeps costs this much (hypd.cost); a price not read never fails a plan
    local okc, c, why = pcall(guard.with, g, cost.of_plan, out.plan, ctx.region or params.region, kit.source)
    if okc then out.cost, out.cost_error = c, why else out.cost_error = tostring(c) end
  end
  return out
end

-- child_of(parent_id, def, params) -> the record of the parent's child
-- operation of this tool and target that is running or succeeded, or nil:
-- a parent that resumes after a crash finds its child again instead of
-- starting another
function M.child_of(parent_id, def, params)
  local target = target_of(def, params)
  local best
  for key in pairs(store.list(child_prefix(parent_id)) or {}) do
    local c = store.op_get(key:sub(#child_prefix(parent_id) + 1))
    if c and c.tool == def.name and c.target == target and (c.status == "running" or c.status == "succeeded") then
      if not best or c.created_at > best.created_at then best = c end
    end
  end
  return best
end

-- on_call(def, params, caller) -> true | nil, err: the tool's leading steps
-- marked on_call (a check that only reads: a fixed-at-create value, a
-- missing operator, a type the service does not offer), run in the call
-- under a read-only guardrail before anything is recorded, so what the
-- parameters and a few reads decide is the call's answer, not an
-- operation that fails. The operation runs them again as its first steps
-- (the world may change in between; they are idempotent reads).
local function on_call(def, params, caller)
  if not (def.steps[1] and def.steps[1].on_call) then return true end
  -- no progress notes: the operation's own run of the step says them
  local ctx = ctx_base.new { tool = def, params = params, caller = caller }
  local g = guard.new { tool = def, caller = caller, plan = true, patient = caller and caller.parent ~= nil }
  local ok, err = pcall(guard.with, g, run_steps, ctx, def, params, { on_call = true })
  if ok then return true end
  -- the error as a plan of the step gives it (front ends show it through hypd.errors.view)
  if type(err) == "table" and err.code and not errors.is(err) then setmetatable(err, errors.mt) end
  return nil, errors.is(err) and err or errors.new("INTERNAL", tostring(err))
end

-- joined(def, params, caller, target) -> accepted | nil, err | false: the
-- running operation of this tool and target that the call joins (or the
-- CONFLICT with it); false when none runs
local joined
-- create(def, params, caller, target) -> accepted: the operation recorded and its task started
local create

-- start(def, params, caller) -> accepted | nil, err: the record first, then
-- the task. A call for a target an operation of the same tool is already
-- working on joins it when its parameters are the same, and is refused
-- (CONFLICT, naming the operation and the parameters that differ) when not;
-- nil, LOCKED err when another process owns the state directory.
--
-- Secret parameters are compared only for the caller that started the
-- operation (who gave its secrets). Any other caller whose call or the
-- operation has a secret parameter never joins: the answer is CONFLICT
-- naming the public parameters that differ, or, when none do, saying the
-- secrets are not compared; the same whatever secret it sent, so no answer
-- tells whether a guess equals the running operation's secret.
function M.start(def, params, caller)
  local held, lerr = statelock.check("starting " .. def.name)
  if not held then return nil, lerr end
  if def.aws then
    -- what can be checked before anything is recorded is checked first, so
    -- the caller gets the error as the answer, not an operation that fails
    local region, rerr = errors.try(aws.region, { region = params.region })
    if not region then return nil, rerr end
    local creds, cerr = errors.try(aws.credentials)
    if not creds then
      return errors.fail("CREDENTIALS", "no AWS credentials: " .. tostring(errors.public(cerr).message) ..
        " (hypd doctor shows what it found)")
    end
  end
  local target, terr = errors.try(target_of, def, params)
  if not target then return nil, terr end
  local j, jerr = joined(def, params, caller, target)
  if j ~= false then return j, jerr end
  local checked, cerr = on_call(def, params, caller)
  if not checked then return nil, cerr end
  -- from here to the record nothing yields: two calls cannot both miss
  -- each other's operation
  j, jerr = joined(def, params, caller, target)
  if j ~= false then return j, jerr end
  return create(def, params, caller, target)
end

function joined(def, params, caller, target)
  local running_same = store.op_list { tool = def.name, target = target, status = "running", limit = 1 }
  if running_same and running_same[1] then
    local rec = running_same[1]
    local starter = (caller and caller.name or "local") == rec.caller
    local diff, secret_names = differing(def, rec, params, starter)
    if #diff == 0 and (starter or #secret_names == 0) then return accepted(rec, def, true) end
    local fields = json.array()
    if #diff == 0 then
      for i, k in ipairs(secret_names) do
        fields[i] = { field = k, rule = "conflict", message = k .. ": a secret parameter, not compared with the " ..
          "running operation " .. rec.id .. "'s (only its caller can join it)" }
      end
      return errors.fail("CONFLICT", string.format("%s is already running for %s as operation %s, started by " ..
        "another caller; secret parameters (%s) are not compared, so this call cannot join it: follow it with %s, " ..
        "or cancel it with operation_cancel", def.name, target, rec.id, table.concat(secret_names, ", "),
        def.status_tool or "operation_get"), { fields = fields, operation_id = rec.id })
    end
    for i, k in ipairs(diff) do
      fields[i] = { field = k, rule = "conflict", message = k .. ": differs from the running operation " .. rec.id }
    end
    local join = (starter or #secret_names == 0) and ", or call again with its parameters to join it" or
      " (its secret parameters are not compared, and only its caller can join it)"
    return errors.fail("CONFLICT", string.format("%s is already running for %s as operation %s with other " ..
      "parameters (%s differ%s); follow it with %s, cancel it with operation_cancel%s", def.name, target, rec.id,
      table.concat(diff, ", "), #diff == 1 and "s" or "", def.status_tool or "operation_get", join),
      { fields = fields, operation_id = rec.id })
  end
  return false
end

function create(def, params, caller, target)
  local steps = json.array()
  for i, s in ipairs(def.steps) do steps[i] = { name = s.name, status = "pending" } end
  local rec = { id = new_id(), tool = def.name, target = target, status = "running", phase = "queued",
    params = registry.public(def, params), caller = caller and caller.name or "local",
    frontend = caller and caller.front or "lua", steps = steps }
  local hidden = {}
  for k, spec in pairs(def.params) do
    if spec.secret and params[k] ~= nil then hidden[k] = params[k] end
  end
  -- the record and its companions in one transaction: a crash leaves all or none
  local meta = { parent = caller and caller.parent, source = def.source or "built-in", hash = def.hash,
    scope = caller and caller.scope }
  assert(store.transaction(function()
    assert(store.op_create(rec))
    assert(store.put(meta_key(rec.id), meta))
    if meta.parent then assert(store.put(child_prefix(meta.parent) .. rec.id, { tool = def.name })) end
    return true
  end))
  local kept, serr = secrets.put(rec.id, hidden)
  if not kept then
    store.op_update(rec.id, { status = "failed", finished_at = true, error = { code = serr.code, message =
      "cannot keep the secret parameters for this operation: " .. tostring(serr.message) } })
    return nil, serr
  end
  rec = store.op_get(rec.id)
  store.event("audit", rec.id, { tool = def.name, caller = rec.caller, front = rec.frontend, target = target,
    params = rec.params })
  emit("operation.started", rec)
  launch(rec, def, params)
  return accepted(rec, def)
end

-- resume() -> n: every operation still running in the store continues
-- (after a restart); one whose tool is gone fails with a clear record.
-- nil, LOCKED err when another process owns the state directory.
function M.resume()
  local held, lerr = statelock.check("resuming operations")
  if not held then return nil, lerr end
  local n = 0
  for _, rec in ipairs(M.list { status = "running" }) do
    if not running[rec.id] then
      local def = registry.get(rec.tool)
      if not def or not def.steps then
        store.op_update(rec.id, { status = "failed", finished_at = true,
          error = { code = "STATE", message = "tool " .. rec.tool .. " is not registered in this hypd" } })
      else
        local params = rec.params or {}
        local kept = secrets.get(rec.id) or {}
        local missing
        for k, spec in pairs(def.params) do
          if spec.secret then
            params[k] = kept[k]
            if params[k] == nil and spec.required then missing = k end
          end
        end
        if missing then
          store.op_update(rec.id, { status = "failed", finished_at = true, error = { code = "STATE",
            message = "the secret parameter " .. missing .. " is gone (its file under secrets/ was removed); " ..
              "call " .. rec.tool .. " again" } })
        else
          log.info("op", "resuming %s %s at %s", rec.tool, rec.id, tostring(rec.phase))
          launch(rec, def, params)
          n = n + 1
        end
      end
    end
  end
  return n
end

-- running_descendants(id) -> the running operations under id (its
-- children, theirs, ...), parents before their children
local function running_descendants(id, out, seen)
  out, seen = out or {}, seen or { [id] = true }
  for key in pairs(store.list(child_prefix(id)) or {}) do
    local cid = key:sub(#child_prefix(id) + 1)
    local c = not seen[cid] and store.op_get(cid)
    if c then
      seen[cid] = true
      if c.status == "running" then out[#out + 1] = c end
      running_descendants(cid, out, seen)
    end
  end
  return out
end

-- cancel(id, caller) -> view | nil, err. The operation's running children
-- (and theirs) are cancelled with it: a child left running would go on
-- making what the caller stopped, and a later call would find it done.
-- Every one is marked first, so none of them reads the others' end as a
-- failure; then the parent stops (it starts nothing more), then each
-- child. The view's cancelled lists what was stopped.
function M.cancel(id, caller)
  local rec = store.op_get(id)
  if not rec then return errors.fail("NOT_FOUND", "no operation " .. tostring(id), { field = "operation_id" }) end
  if rec.status ~= "running" then
    return errors.fail("CONFLICT", "operation " .. id .. " is already " .. rec.status, { field = "operation_id" })
  end
  local by, at = caller and caller.name or "local", core.now()
  local under = running_descendants(id)
  assert(store.put(cancel_key(id), { by = by, at = at }))
  for _, c in ipairs(under) do assert(store.put(cancel_key(c.id), { by = by, at = at, with = id })) end
  store.event("audit", id, { tool = "operation_cancel", caller = caller and caller.name, front = caller and caller.front })
  local function stop(oid, why)
    local t = running[oid]
    if t then
      -- the task and every task it started: the parts a step runs side by
      -- side (cluster_create's role and buckets beside its EKS stage) stop
      -- too; not the task asking (one a step started, e.g. an event
      -- subscriber's), which would stop itself half way
      local me = task.current()
      local function tree(x)
        for c in pairs(x.children or {}) do tree(c) end
        if x ~= me then x:cancel(why) end
      end
      tree(t)
      t:wait()
    end
    local now = store.op_get(oid)
    if now and now.status == "running" and not running[oid] and oid ~= id then
      -- no task of this process runs it (not resumed yet): it ends here
      local r = { id = oid, tool = now.tool, target = now.target, status = "cancelled" }
      store.op_update(oid, { status = "cancelled", finished_at = true, phase = "cancelled during " ..
        tostring(now.phase), error = { code = "CANCELLED", message = why } })
      emit("operation.cancelled", r, { message = why })
    end
  end
  stop(id, "operation " .. id .. " was cancelled by " .. tostring(by))
  for _, c in ipairs(under) do stop(c.id, "operation " .. c.id .. " was cancelled with " .. id .. " by " .. by) end
  local view = M.view(store.op_get(id))
  view.cancelled = json.array { { operation_id = id, tool = rec.tool, status = view.status, phase = view.phase } }
  for _, c in ipairs(under) do
    local now = store.op_get(c.id) or c
    view.cancelled[#view.cancelled + 1] = { operation_id = c.id, tool = c.tool, status = now.status,
      phase = now.phase }
  end
  return view
end

-- wait(id [, timeout]) -> view once the operation is no longer running (or
-- timeout seconds passed, or its task here ended without finishing it: the
-- host is stopping). Never spins: it waits on the task or sleeps.
function M.wait(id, timeout)
  local deadline = timeout and core.now() + timeout
  while true do
    local rec = store.op_get(id)
    if not rec or rec.status ~= "running" then return M.view(rec) end
    local t = running[id]
    if t and not deadline then
      t:wait()
      if running[id] == nil and (store.op_get(id) or {}).status == "running" then return M.view(store.op_get(id)) end
    else
      if deadline and core.now() >= deadline then return M.view(rec) end
      task.sleep(0.5)
    end
  end
end

local TERMINAL = { ["operation.finished"] = true, ["operation.failed"] = true, ["operation.cancelled"] = true }
M.TERMINAL = TERMINAL

local function event_rows(id, after, limit)
  local rows = store.query("SELECT seq, at, kind, data FROM events WHERE operation_id = ?1 AND seq > ?2 " ..
    "ORDER BY seq LIMIT ?3", id, after, limit) or {}
  local out = json.array()
  for i, r in ipairs(rows) do
    local d = json.decode(r.data, { bytes = true }) or {}
    out[i] = { seq = r.seq, at = r.at, kind = r.kind, phase = d.phase, status = d.status, message = d.message,
      wait = d.wait, child = d.child }
  end
  return out
end

-- events(id, after, limit [, wait_seconds]) -> {events, next, status}: the
-- operation's events after seq `after` (phases, progress notes, the end),
-- oldest first. With wait_seconds, answers as soon as there is one or the
-- operation is no longer running, at the latest after that many seconds.
function M.events(id, after, limit, wait)
  after, limit = after or 0, limit or 100
  local deadline = core.now() + (wait or 0)
  while true do
    local rec = store.op_get(id)
    if not rec then return errors.fail("NOT_FOUND", "no operation " .. id, { field = "operation_id" }) end
    local evs = event_rows(id, after, limit)
    if #evs > 0 or rec.status ~= "running" or core.now() >= deadline then
      return { events = evs, next = #evs > 0 and evs[#evs].seq or after, status = rec.status, phase = rec.phase }
    end
    task.sleep(math.min(0.25, math.max(0.01, deadline - core.now())))
  end
end

-- wait_change(id, wait) -> view: the operation once its phase or status
-- differs from now, or after wait seconds (status tools' wait_seconds)
function M.wait_change(id, wait)
  local rec = store.op_get(id)
  if not rec then return nil end
  local deadline = core.now() + (wait or 0)
  while rec.status == "running" and core.now() < deadline do
    task.sleep(math.min(0.25, math.max(0.01, deadline - core.now())))
    local now = store.op_get(id)
    if not now or now.status ~= rec.status or now.phase ~= rec.phase then return M.view(now) end
  end
  return M.view(rec)
end

function M.active() return running end

return M
