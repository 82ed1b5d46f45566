-- hypd.tool.kit: the workflow kit, the two primitives every staged tool is built
-- from (as ctx methods), so that no workflow hand-writes describe, create,
-- AlreadyExists, owner checks, retries and polling loops.
--
-- ctx:ensure(spec) -> obj, action: a resource that must exist.
--   spec.type      what it is ("ec2:vpc"), for plans, phases and errors
--   spec.name      its name ("hypd-demo-vpc")
--   spec.label     what people call it ("VPC"; default: type), for phases
--                  ("creating VPC hypd-demo-vpc") and errors
--   spec.key       the ctx.state field that remembers its id (resume)
--   spec.id        the id field of the object ("VpcId") or fn(obj) -> id
--   spec.find      fn(id) -> obj | nil: the object by remembered id
--   spec.search    fn() -> obj | nil: by name and tag (no id, or it is gone)
--   spec.needs     ids (or a table holding them) it hangs on: in a plan,
--                  when one is planned the resource cannot exist yet and
--                  find and search are not called (a read by name, which
--                  hypd.tool.guard cannot see is about a planned thing)
--   spec.owned     fn(obj) -> true | false, why: is it hypd's (for this tag)?
--                  An object that is not is a CONFLICT, never adopted.
--   spec.field     the parameter a CONFLICT names (e.g. "cluster_tag")
--   spec.create    fn() -> obj: the mutation (its phase is recorded first)
--   spec.exists    error codes that mean a lost answer or a race: created
--                  before, so search again instead of failing. After an
--                  ambiguous answer to create or update (a 5xx, a reset, a
--                  timeout after sending: hypd.tool.kit.ambiguous) the kit
--                  pauses and looks again (find, search) before deciding:
--                  found, it is adopted (it carries our name and tag); not
--                  there (or still differing), the call is made again, at
--                  most CREATE_TRIES times. A create that may have acted is
--                  not repeated without a search (a twin could result).
--   spec.fields    {field = value}: what create sets besides desired, for
--                  a plan to show
--   spec.desired   {field = value}: what must hold (the explicit diff); it
--                  is checked after a create as well, so create need only
--                  make the object and update makes the rest hold
--   spec.current   fn(obj) -> {field = value} (default: the object's fields)
--   spec.update    fn(obj, changes) -> obj | nil: makes changes hold;
--                  changes = {field = {from = v, to = v}}
--   spec.retry     fn(err) -> note | nil: an error of create, current or
--                  update that means "not yet" (eventual consistency: a role
--                  EKS does not see yet, a subnet EC2 does not know yet); tried again
--                  every spec.retry_every seconds (5) for spec.retry_for
--                  (60; retry_for / retry_every + 1 tries), then the last
--                  error is raised
--   spec.placeholder fn(id) -> obj: what a plan gives later steps for an
--                  object it would create (default {[id field] = id})
--   action: "created" | "changed" | "unchanged" (a plan: "create" |
--   "change" | "unchanged"). Found ids are saved in ctx.state[key].
--
-- ctx:poll(spec) -> the value check returned with done = true.
--   spec.what      what is awaited ("NAT gateway nat-1 to be available")
--   spec.check     fn(waited) -> done, note, value (note: the progress text); it
--                  raises when the wait cannot succeed (a failed resource)
--   spec.every     seconds between checks (the service's pace), or
--                  fn(waited) -> seconds: a pace that changes as the wait
--                  goes (rare checks while the thing cannot be ready, close
--                  ones when it is due), so a transition is seen quickly
--                  with few calls
--   spec.timeout   seconds after which no check is made: TIMEOUT once the
--                  next one would come later (default 30 minutes)
--   spec.since     when the wait began (default now): a resumed wait keeps
--                  counting from there
--   spec.phase     the phase recorded first (default "waiting for <what>";
--                  false records none)
--   spec.expired   fn(waited, note): called instead of raising TIMEOUT (it
--                  raises the error to report)
--   Every check that is not done records a progress event: the note (or
--   what), the time waited, and {wait = {what, seen = note, waited}}; a
--   pause between checks longer than PROGRESS_EVERY records one at least
--   that often (a note should carry the message the awaited thing's state
--   has: a status reason, a node's message, a pod's event).
--   Cancellable at every wait, instant under the virtual clock. A plan
--   does not wait: poll answers nil at once.
--
-- ctx:absent(spec) -> action, why: a resource that must not exist (teardown).
--   spec.type, spec.name, spec.label   as for ensure
--   spec.find      fn() -> obj | nil: the object as it is now
--   spec.owned     fn(obj) -> true | false, why: only hypd's is deleted;
--                  anything else is kept and reported
--   spec.keep      fn(obj) -> why | nil, or a reason (string): keep it
--                  although it is hypd's (it holds data, the caller did not
--                  force or did not ask)
--   spec.field     the parameter that named it: a thing the caller asked
--                  for by name that is not hypd's is a CONFLICT naming the
--                  field (nothing deleted), not kept
--   spec.delete    fn(obj): the deleting call (its phase is recorded first);
--                  spec.gone codes mean it went meanwhile
--   spec.gone      error codes of delete that mean "already gone"; after
--                  an ambiguous answer (a 5xx, as for ensure) find is asked
--                  again: gone is done, still there is deleted again
--   spec.every, spec.timeout   the wait until find answers nil (a delete
--                  that takes time: NAT gateways, clusters); no wait when
--                  every is not given
--   spec.retry, retry_every, retry_for   "not yet" errors of delete (a
--                  dependency still draining), as for ensure
--   spec.fields    what a plan shows of it
--   action: "deleted" | "absent" | "kept" (why says why); a plan: "delete"
--   | "absent" | "kept". What is kept is added to ctx.state.kept ({type,
--   name, id, why}) for the tool's report.
--
-- In plan mode (ctx.plan) the read half of each ensure runs; what it would
-- create or change is added to ctx.planned (the plan the call returns), a
-- planned id ("planned:ec2:vpc:hypd-demo-vpc") stands in for what does not
-- exist yet, and reads about planned ids answer empty without being sent
-- (hypd.tool.guard). The guardrail refuses every mutation of a plan.
local core = require "hypd.core"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local json = require "hypd.json"
local retry = require "hypd.aws.retry"

local M = {}

M.POLL_TIMEOUT = 30 * 60
M.PROGRESS_EVERY = 10 -- the longest a wait goes without a progress event (poll)
M.RETRY_EVERY, M.RETRY_FOR = 5, 60
M.CREATE_TRIES, M.CREATE_PAUSE = 5, 2 -- creates after ambiguous answers; the first pause (doubling)

-- planned_id(kind, name) -> the id a plan gives what it would create
-- ("planned:ec2:vpc:hypd-demo-vpc"; kind is the resource's type): what a
-- plan passes on where the real id would go, so that reads about it are
-- not sent (hypd.guard) and later steps plan on it
function M.planned_id(kind, name) return guard.PLANNED .. kind .. ":" .. tostring(name) end

-- is_planned(v) -> true when v is, or holds, a planned id
M.is_planned = guard.planned

-- ambiguous(err) -> "maybe" | "not" | nil: an AWS error of a call that
-- changes something that says nothing about the change: "maybe" it took
-- effect (a 5xx, a reset or a timeout after sending), it was "not" carried
-- out (throttling or a connection never made, past the client's retries),
-- or nil: a real answer (refused, invalid, not found) or no AWS error
function M.ambiguous(err)
  if type(err) ~= "table" or err.abort or not err.service or not err.operation then return nil end
  local kind = retry.classify(err)
  if kind == "throttling" or kind == "unsent" then return "not" end
  if kind then return "maybe" end
end

local ENSURE_KEYS = { type = true, name = true, label = true, key = true, id = true, find = true, search = true,
  needs = true, owned = true, field = true, create = true, exists = true, fields = true, desired = true,
  current = true, update = true, retry = true, retry_every = true, retry_for = true, placeholder = true }
local ABSENT_KEYS = { type = true, name = true, label = true, id = true, field = true, find = true, owned = true,
  keep = true,
  delete = true, gone = true, every = true, timeout = true, retry = true, retry_every = true, retry_for = true,
  fields = true }
local POLL_KEYS = { what = true, check = true, every = true, timeout = true, since = true, phase = true,
  expired = true }

local function check_keys(spec, keys, fn)
  for k in pairs(spec) do
    if not keys[k] then error(fn .. ": unknown key '" .. tostring(k) .. "'", 3) end
  end
end

-- elapsed(seconds) -> "4m10s"
function M.elapsed(s)
  s = math.max(0, math.floor(s + 0.5))
  if s < 60 then return s .. "s" end
  return string.format("%dm%02ds", s // 60, s % 60)
end

local function id_field(spec) return type(spec.id) == "string" and spec.id or "id" end

local function id_of(spec, obj)
  if type(spec.id) == "function" then return spec.id(obj) end
  return obj[id_field(spec)]
end

-- same(a, b) -> true when two JSON values are equal (also for hypd.tool.operations)
local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end
M.same = same

-- changes(spec, obj) -> {field = {from, to}} for the desired fields that differ
local function changes(spec, obj)
  if not spec.desired then return nil end
  local cur = spec.current and spec.current(obj) or obj
  local out, any = {}, false
  for k, want in pairs(spec.desired) do
    if not same(cur[k], want) then out[k], any = { from = cur[k], to = want }, true end
  end
  return any and out or nil
end

local function what(spec) return (spec.label or spec.type) .. " " .. spec.name end

-- the object each plan entry was planned from (what exists: the one it
-- changes, keeps or deletes), for what reads a plan beyond its fields
-- (hypd.cost prices a kept file system by its capacity)
local sources = setmetatable({}, { __mode = "k" })

local function plan_entry(ctx, action, spec, extra, obj)
  ctx.planned = ctx.planned or json.array()
  local e = { action = action, type = spec.type, name = spec.name }
  for k, v in pairs(extra or {}) do e[k] = v end
  ctx.planned[#ctx.planned + 1] = e
  if type(obj) == "table" then sources[e] = obj end
  return e
end

-- source(entry) -> the object a plan entry was planned from, or nil
function M.source(e) return sources[e] end

local function check_owned(ctx, spec, obj)
  if not spec.owned then return end
  local ok, why = spec.owned(obj)
  if not ok then
    errors.raise("CONFLICT", string.format("%s%s exists but is not hypd's for this cluster%s; hypd does not " ..
      "adopt it: delete or rename it%s", what(spec), ctx.region and (" in " .. ctx.region) or "",
      why and (" (" .. tostring(why) .. ")") or "", spec.field and (", or choose another " .. spec.field) or ""),
      { type = spec.type, name = spec.name, id = id_of(spec, obj), field = spec.field })
  end
end

local function locate(ctx, spec)
  if ctx.plan and spec.needs ~= nil and guard.planned(spec.needs) then return nil end
  local id = spec.key and ctx.state[spec.key]
  local obj
  if id and not guard.planned(id) and spec.find then obj = spec.find(id) end
  if not obj and spec.search then obj = spec.search() end
  return obj
end

local function is_exists(spec, err)
  if type(err) ~= "table" or not spec.exists then return false end
  for _, c in ipairs(type(spec.exists) == "table" and spec.exists or { spec.exists }) do
    if err.code == c then return true end
  end
  return false
end

-- attempt(ctx, spec, doing, fn, ...) -> fn's result, fn tried again while
-- its error is one spec.retry calls "not yet" (paced by poll, no new phase)
local function attempt(ctx, spec, doing, fn, ...)
  if not spec.retry then return fn(...) end
  local args, last = table.pack(...), nil
  return M.poll(ctx, { what = doing, phase = false, every = spec.retry_every or M.RETRY_EVERY,
    timeout = spec.retry_for or M.RETRY_FOR, expired = function() error(last, 0) end,
    check = function()
      local ok, r = pcall(fn, table.unpack(args, 1, args.n))
      if ok then return true, nil, r end
      -- a cancelled task (r.abort) is never "not yet"
      local note = type(r) == "table" and not r.abort and r.code ~= "CANCELLED" and spec.retry(r)
      if not note then error(r, 0) end
      last = r
      return false, note
    end })
end

-- converge(ctx, spec, obj) -> obj, changed: update makes the desired fields hold
local function converge(ctx, spec, obj)
  local diff
  if ctx.plan then
    diff = changes(spec, obj)
  else -- current() may read what was made a moment ago
    diff = attempt(ctx, spec, "reading " .. what(spec), changes, spec, obj)
  end
  if not diff then return obj, false end
  if ctx.plan then
    plan_entry(ctx, "change", spec, { id = id_of(spec, obj), changes = diff }, obj)
    return obj, true
  end
  if not spec.update then
    local names = {}
    for k in pairs(diff) do names[#names + 1] = k end
    table.sort(names)
    errors.raise("CONFLICT", string.format("%s differs from what it should be (%s) and hypd cannot change it in " ..
      "place", what(spec), table.concat(names, ", ")), { type = spec.type, name = spec.name,
      field = spec.field })
  end
  ctx:phase("updating " .. what(spec))
  local tries = 0
  while true do
    tries = tries + 1
    local ok, r = pcall(attempt, ctx, spec, "updating " .. what(spec), spec.update, obj, diff)
    if ok then
      obj = r or obj
      break
    end
    -- an ambiguous answer (hypd.tool.kit.ambiguous): read again after a pause;
    -- an update makes fields hold, so what still differs is updated again
    local kind = M.ambiguous(r)
    if not kind or tries >= M.CREATE_TRIES then error(r, 0) end
    local pause = M.CREATE_PAUSE * 2 ^ (tries - 1)
    ctx:progress(string.format("%s: %s %s answered %s; reading it again in %s", what(spec), tostring(r.service),
      tostring(r.operation), tostring(r.code), M.elapsed(pause)))
    ctx:sleep(pause)
    local again = locate(ctx, spec) or obj
    diff = attempt(ctx, spec, "reading " .. what(spec), changes, spec, again)
    if not diff then
      obj = again
      break
    end
  end
  if ctx.save then ctx:save() end
  return obj, true
end

local function remember(ctx, spec, obj)
  if spec.key then ctx.state[spec.key] = id_of(spec, obj) end
end

-- create(ctx, spec) -> the object spec.create made, or found made: after
-- an AlreadyExists (spec.exists) it is searched for; after an ambiguous
-- answer (hypd.tool.kit.ambiguous: a 5xx, a reset, a timeout after sending, or
-- throttling past the client's retries) the create may or may not have
-- taken effect, so after a pause it is searched for again (by id, name and
-- tag, the step's own find and search) and adopted when there (it carries
-- our name and tag: it is ours), created again when not: at most
-- M.CREATE_TRIES creates, each ambiguous answer noted as progress. With no
-- search, a create that may have acted is not repeated (a second one could
-- make a twin): its error is raised.
local function create(ctx, spec)
  local tries = 0
  while true do
    tries = tries + 1
    local ok, made = pcall(attempt, ctx, spec, "creating " .. what(spec), spec.create)
    if ok then return made end
    local obj
    if is_exists(spec, made) then
      obj = locate(ctx, spec) -- created before (its answer lost), or meanwhile
      if not obj then error(made, 0) end
      check_owned(ctx, spec, obj)
      return obj
    end
    local kind = M.ambiguous(made)
    if not kind or tries >= M.CREATE_TRIES or (kind == "maybe" and not spec.search) then error(made, 0) end
    local pause = M.CREATE_PAUSE * 2 ^ (tries - 1)
    ctx:progress(string.format("%s: %s %s answered %s (%s); %s in %s", what(spec), tostring(made.service),
      tostring(made.operation), tostring(made.code), kind == "maybe" and "it may have taken effect" or
      "it was not carried out", kind == "maybe" and "looking for it again" or "trying again", M.elapsed(pause)))
    ctx:sleep(pause)
    if kind == "maybe" then
      obj = locate(ctx, spec)
      if obj then
        check_owned(ctx, spec, obj)
        ctx:progress(what(spec) .. " was made after all: adopting it")
        return obj
      end
    end
  end
end

function M.ensure(ctx, spec)
  assert(type(spec) == "table" and spec.type and spec.name and spec.create, "ensure{type, name, create, ...}")
  check_keys(spec, ENSURE_KEYS, "ensure")
  local obj = locate(ctx, spec)
  if obj then
    check_owned(ctx, spec, obj)
    remember(ctx, spec, obj)
    local _, changed = converge(ctx, spec, obj)
    if not changed then return obj, "unchanged" end
    return obj, ctx.plan and "change" or "changed"
  end
  if ctx.plan then
    local id = M.planned_id(spec.type, spec.name)
    local fields
    for _, t in ipairs { spec.fields or {}, spec.desired or {} } do
      for k, v in pairs(t) do
        fields = fields or {}
        fields[k] = v
      end
    end
    plan_entry(ctx, "create", spec, { id = id, fields = fields })
    if spec.key then ctx.state[spec.key] = id end
    return spec.placeholder and spec.placeholder(id) or { [id_field(spec)] = id }, "create"
  end
  ctx:phase("creating " .. what(spec))
  obj = create(ctx, spec)
  remember(ctx, spec, obj)
  if ctx.save then ctx:save() end
  obj = converge(ctx, spec, obj)
  return obj, "created"
end

local function kept(ctx, spec, obj, why)
  local list = ctx.state.kept or json.array()
  for _, k in ipairs(list) do
    if k.type == spec.type and k.name == spec.name then return "kept", why end -- a resumed step: once
  end
  list[#list + 1] = { type = spec.type, name = spec.name, id = obj and id_of(spec, obj), why = why }
  ctx.state.kept = list
  if ctx.plan then plan_entry(ctx, "keep", spec, { id = obj and id_of(spec, obj), why = why }, obj) end
  if not ctx.plan then ctx:progress(what(spec) .. " kept: " .. tostring(why)) end
  return "kept", why
end

function M.absent(ctx, spec)
  assert(type(spec) == "table" and spec.type and spec.name and spec.find and spec.delete,
    "absent{type, name, find, delete, ...}")
  check_keys(spec, ABSENT_KEYS, "absent")
  local obj = spec.find()
  if not obj then return "absent" end
  if spec.owned then
    local ok, why = spec.owned(obj)
    if not ok and spec.field then
      errors.raise("CONFLICT", string.format("%s%s is not hypd's%s; hypd deletes only what it made: nothing was " ..
        "deleted", what(spec), ctx.region and (" in " .. ctx.region) or "", why and (" (" .. tostring(why) .. ")") or ""),
        { type = spec.type, name = spec.name, id = id_of(spec, obj), field = spec.field })
    end
    if not ok then return kept(ctx, spec, obj, "not hypd's" .. (why and (": " .. tostring(why)) or "")) end
  end
  local why = spec.keep
  if type(why) == "function" then why = why(obj) end
  if why then return kept(ctx, spec, obj, why) end
  if ctx.plan then
    plan_entry(ctx, "delete", spec, { id = id_of(spec, obj), fields = spec.fields }, obj)
    return "delete"
  end
  ctx:phase("deleting " .. what(spec))
  local tries = 0
  while true do
    tries = tries + 1
    local ok, err = pcall(attempt, ctx, spec, "deleting " .. what(spec), spec.delete, obj)
    if ok then break end
    local gone = false
    local codes = type(spec.gone) == "string" and { spec.gone } or spec.gone or {}
    for _, c in ipairs(codes) do gone = gone or (type(err) == "table" and err.code == c) end
    if gone then break end
    -- an ambiguous answer (hypd.tool.kit.ambiguous): look again after a pause;
    -- gone is done, still there is deleted again (a delete asked twice is
    -- one delete, or answers a spec.gone code)
    local kind = M.ambiguous(err)
    if not kind or tries >= M.CREATE_TRIES then error(err, 0) end
    local pause = M.CREATE_PAUSE * 2 ^ (tries - 1)
    ctx:progress(string.format("%s: %s %s answered %s; looking at it again in %s", what(spec),
      tostring(err.service), tostring(err.operation), tostring(err.code), M.elapsed(pause)))
    ctx:sleep(pause)
    obj = spec.find()
    if obj == nil then break end
  end
  if spec.every then
    M.poll(ctx, { what = what(spec) .. " to be gone", every = spec.every, timeout = spec.timeout,
      check = function()
        local now = spec.find()
        return now == nil, now and (what(spec) .. " still there") or nil
      end })
  end
  return "deleted"
end

function M.poll(ctx, spec)
  assert(type(spec) == "table" and spec.what and spec.check and spec.every, "poll{what, check, every}")
  check_keys(spec, POLL_KEYS, "poll")
  if ctx.plan then return nil end
  local started = spec.since or core.now()
  local limit = spec.timeout or M.POLL_TIMEOUT
  if spec.phase ~= false then ctx:phase(spec.phase or ("waiting for " .. spec.what)) end
  while true do
    local done, note, value = spec.check(core.now() - started)
    if done then return value end
    local waited = core.now() - started
    local every = type(spec.every) == "function" and spec.every(waited) or spec.every
    if waited + every > limit then -- the next check would come too late
      if spec.expired then spec.expired(waited, note) end
      errors.raise("TIMEOUT", string.format("%s: still waiting after %s%s", spec.what, M.elapsed(waited),
        note and (" (" .. note .. ")") or ""))
    end
    note = note and tostring(note)
    ctx:progress((note or spec.what) .. " (" .. M.elapsed(waited) .. ")",
      { wait = { what = spec.what, seen = note, waited = waited } })
    -- a pause longer than PROGRESS_EVERY (a service's slow pace: HyperPod
    -- is checked every 2 min) is slept in slices, each end noted with the
    -- time waited so far and when the next check comes (what was seen is
    -- the last check's), so a follower is never left without word
    local left = every
    while left > 0 do
      local slice = math.min(left, M.PROGRESS_EVERY)
      ctx:sleep(slice)
      left = left - slice
      if left > 0 then
        local w = core.now() - started
        ctx:progress(string.format("%s (%s; next check in %s)", note or spec.what, M.elapsed(w), M.elapsed(left)),
          { wait = { what = spec.what, seen = note, waited = w } })
      end
    end
  end
end

-- summary(ctx) -> {plan = [...], create = n, change = n, delete = n} (what
-- ctx.planned holds)
function M.summary(ctx)
  local plan = ctx.planned or json.array()
  local n = { create = 0, change = 0, delete = 0, keep = 0 }
  for _, e in ipairs(plan) do n[e.action] = (n[e.action] or 0) + 1 end
  return { plan = plan, create = n.create, change = n.change, delete = n.delete, keep = n.keep }
end

-- install(Ctx): the kit as methods of a context class
function M.install(Ctx)
  Ctx.ensure = M.ensure
  Ctx.absent = M.absent
  Ctx.poll = M.poll
end

return M
