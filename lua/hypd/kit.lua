-- hypd.kit: the workflow kit, the two primitives every staged tool is built
-- from (as ctx methods), so that no workflow hand-writes describe, create,
-- AlreadyExists, owner checks and polling loops.
--
-- ctx:ensure(spec) -> obj, action: a resource that must exist.
--   spec.type      what it is ("ec2:vpc"), for plans, phases and errors
--   spec.name      its name ("hypd-demo-vpc")
--   spec.key       the ctx.state field that remembers its id (resume)
--   spec.id        the id field of the object ("VpcId") or fn(obj) -> id
--   spec.find      fn(id) -> obj | nil: the object by remembered id
--   spec.search    fn() -> obj | nil: by name and tag (no id, or it is gone)
--   spec.owned     fn(obj) -> true | false, why: is it hypd's (for this tag)?
--                  An object that is not is a CONFLICT, never adopted.
--   spec.create    fn() -> obj: the mutation (its phase is recorded first)
--   spec.exists    error codes that mean a lost answer: created before, so
--                  search again instead of failing (AlreadyExists, ...)
--   spec.desired   {field = value}: what must hold (the explicit diff)
--   spec.current   fn(obj) -> {field = value} (default: the object's fields)
--   spec.update    fn(obj, changes) -> obj | nil: makes changes hold;
--                  changes = {field = {from = v, to = v}}
--   spec.placeholder fn(id) -> obj: what a plan gives later steps for an
--                  object it would create (default {[id field] = id})
--   action: "created" | "changed" | "unchanged" (a plan: "create" |
--   "change" | "unchanged"). Found ids are saved in ctx.state[key].
--
-- ctx:poll(spec) -> the value check returned with done = true.
--   spec.what      what is awaited ("NAT gateway nat-1 available")
--   spec.check     fn() -> done, note, value (note: the progress text)
--   spec.every     seconds between checks (the service's pace)
--   spec.timeout   seconds before TIMEOUT (default 30 minutes)
--   Cancellable at every wait, instant under the virtual clock. A plan
--   does not wait: poll answers nil at once.
--
-- In plan mode (ctx.plan) the read half of each ensure runs; what it would
-- create or change is added to ctx.planned (the plan the call returns), a
-- planned id ("planned:ec2:vpc:hypd-demo-vpc") stands in for what does not
-- exist yet, and reads about planned ids answer empty without being sent
-- (hypd.guard). The guardrail refuses every mutation of a plan.
local core = require "hypd.core"
local errors = require "hypd.errors"
local guard = require "hypd.guard"
local json = require "hypd.json"

local M = {}

M.POLL_TIMEOUT = 30 * 60

-- elapsed(seconds) -> "4m10s"
function M.elapsed(s)
  s = math.max(0, math.floor(s + 0.5))
  if s < 60 then return s .. "s" end
  return string.format("%dm%02ds", s // 60, s % 60)
end

local function id_of(spec, obj)
  if type(spec.id) == "function" then return spec.id(obj) end
  return obj[spec.id or "id"]
end

local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- changes(spec, obj) -> {field = {from, to}} for the desired fields that differ
local function changes(spec, obj)
  local cur = spec.current and spec.current(obj) or obj
  local out, any = {}, false
  for k, want in pairs(spec.desired or {}) do
    if not same(cur[k], want) then out[k], any = { from = cur[k], to = want }, true end
  end
  return any and out or nil
end

local function what(spec) return spec.type .. " " .. spec.name end

local function plan_entry(ctx, action, spec, extra)
  ctx.planned = ctx.planned or json.array()
  local e = { action = action, type = spec.type, name = spec.name }
  for k, v in pairs(extra or {}) do e[k] = v end
  ctx.planned[#ctx.planned + 1] = e
  return e
end

local function check_owned(spec, obj)
  if not spec.owned then return end
  local ok, why = spec.owned(obj)
  if not ok then
    errors.raise("CONFLICT", string.format("%s %s exists but is not hypd's for this cluster (%s); hypd does not " ..
      "adopt it: delete or rename it, or choose another cluster_tag", spec.type, spec.name, tostring(why or "")),
      { type = spec.type, name = spec.name, id = id_of(spec, obj) })
  end
end

local function locate(ctx, spec)
  local st = ctx.state
  local id = spec.key and st[spec.key]
  local obj
  if id and not guard.planned(id) and spec.find then obj = spec.find(id) end
  if not obj and spec.search then obj = spec.search() end
  return obj
end

local function is_exists(spec, err)
  for _, c in ipairs(type(spec.exists) == "table" and spec.exists or { spec.exists }) do
    if err.code == c then return true end
  end
  return false
end

function M.ensure(ctx, spec)
  assert(type(spec) == "table" and spec.type and spec.name and spec.create, "ensure{type, name, create, ...}")
  local st = ctx.state
  local obj = locate(ctx, spec)
  if obj then
    check_owned(spec, obj)
  elseif ctx.plan then
    local id = guard.PLANNED .. spec.type .. ":" .. spec.name
    plan_entry(ctx, "create", spec, { fields = spec.desired })
    if spec.key then st[spec.key] = id end
    obj = spec.placeholder and spec.placeholder(id) or { [type(spec.id) == "string" and spec.id or "id"] = id }
    return obj, "create"
  else
    ctx:phase("creating " .. what(spec))
    local ok, made = pcall(spec.create)
    if not ok then
      if not (type(made) == "table" and spec.exists and is_exists(spec, made)) then error(made, 0) end
      obj = locate(ctx, spec) -- created before, its answer lost
      if not obj then error(made, 0) end
      check_owned(spec, obj)
    else
      obj = made
    end
    if spec.key then st[spec.key] = id_of(spec, obj) end
    if ctx.save then ctx:save() end
    return obj, "created"
  end
  if spec.key then st[spec.key] = id_of(spec, obj) end
  local diff = changes(spec, obj)
  if not diff then return obj, "unchanged" end
  if ctx.plan then
    plan_entry(ctx, "change", spec, { id = id_of(spec, obj), changes = diff })
    return obj, "change"
  end
  if not spec.update then
    errors.raise("CONFLICT", string.format("%s differs from what it should be (%s) and hypd cannot change it in " ..
      "place", what(spec), table.concat((function()
        local ks = {}
        for k in pairs(diff) do ks[#ks + 1] = k end
        table.sort(ks)
        return ks
      end)(), ", ")), { type = spec.type, name = spec.name })
  end
  ctx:phase("updating " .. what(spec))
  obj = spec.update(obj, diff) or obj
  if ctx.save then ctx:save() end
  return obj, "changed"
end

function M.poll(ctx, spec)
  assert(type(spec) == "table" and spec.what and spec.check and spec.every, "poll{what, check, every}")
  if ctx.plan then return nil end
  local started = core.now()
  local limit = spec.timeout or M.POLL_TIMEOUT
  ctx:phase("waiting for " .. spec.what)
  while true do
    local done, note, value = spec.check()
    if done then return value end
    local waited = core.now() - started
    if waited > limit then
      errors.raise("TIMEOUT", string.format("%s: still waiting after %s%s", spec.what, M.elapsed(waited),
        note and (" (" .. note .. ")") or ""))
    end
    ctx:progress((note or spec.what) .. " (" .. M.elapsed(waited) .. ")")
    ctx:sleep(spec.every)
  end
end

-- plan(ctx) -> {plan = [...], create = n, change = n} (what ctx.planned holds)
function M.summary(ctx)
  local plan = ctx.planned or json.array()
  local n = { create = 0, change = 0, delete = 0 }
  for _, e in ipairs(plan) do n[e.action] = (n[e.action] or 0) + 1 end
  return { plan = plan, create = n.create, change = n.change, delete = n.delete }
end

-- install(Ctx): the kit as methods of a context class
function M.install(Ctx)
  Ctx.ensure = M.ensure
  Ctx.poll = M.poll
end

return M
