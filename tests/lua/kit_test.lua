-- hypd.tool.kit's contract, on resources kept in a Lua table (no AWS) through a
-- hypd.tool.ctx context: ensure finds by id then by search, checks the owner,
-- creates only what is missing, makes the desired fields hold after a create
-- and on a found object, searches again after an "exists" error, retries
-- "not yet" errors (never a cancellation), looks again after an ambiguous
-- answer (a 5xx after the work or before it) and adopts or creates again,
-- plans without calling create, update, or the reads of what hangs on a
-- planned id; poll waits, keeps counting from since, gives up with TIMEOUT
-- or the caller's error. The EKS
-- stage (workflow_eks_create_test, plan_test) is the kit on AWS.
local t = require "hypd.tap"
local core = require "hypd.core"
local kit = require "hypd.tool.kit"
local ctxm = require "hypd.tool.ctx"
local errors = require "hypd.errors"

core.virtual(true)

-- a world of things by id, and the calls made on it
local function world()
  local w = { things = {}, calls = {}, next = 0 }
  function w.log(what) w.calls[#w.calls + 1] = what end
  function w.spec(name, extra)
    local s = { type = "test:thing", label = "thing", name = name, key = name .. "_id", id = "Id",
      find = function(id) w.log("find " .. id) return w.things[id] end,
      search = function()
        w.log("search " .. name)
        for _, x in pairs(w.things) do if x.Name == name then return x end end
      end,
      create = function()
        w.next = w.next + 1
        local x = { Id = "t-" .. w.next, Name = name, Size = 1, Owner = "hypd" }
        w.things[x.Id] = x
        w.log("create " .. name)
        return x
      end }
    for k, v in pairs(extra or {}) do s[k] = v end
    return s
  end
  return w
end

local function new_ctx(plan)
  local notes, phases = {}, {}
  local ctx = ctxm.new { params = {}, plan = plan, progress = function(n) notes[#notes + 1] = n end }
  local phase = ctx.phase
  function ctx.phase(self, text) phases[#phases + 1] = text return phase(self, text) end
  return ctx, phases, notes
end

t.test("ensure creates a missing thing once, then finds it by its id and reports it unchanged", function()
  local w, ctx, phases = world(), new_ctx()
  local x, action = ctx:ensure(w.spec("a"))
  t.eq({ action, x.Id, ctx.state.a_id }, { "created", "t-1", "t-1" })
  t.eq(phases, { "creating thing a" })
  x, action = ctx:ensure(w.spec("a"))
  t.eq({ action, x.Id }, { "unchanged", "t-1" })
  t.eq(w.calls, { "search a", "create a", "find t-1" }, "found by the remembered id, not searched")
  -- the id forgotten, it is searched; gone, it is made again
  ctx.state.a_id = nil
  t.eq(select(2, ctx:ensure(w.spec("a"))), "unchanged")
  w.things["t-1"] = nil
  t.eq(select(2, ctx:ensure(w.spec("a"))), "created")
  t.eq(ctx.state.a_id, "t-2")
end)

t.test("desired fields hold after a create and on a found thing; without update a difference is a CONFLICT", function()
  local w, ctx, phases = world(), new_ctx()
  local updates = {}
  local spec = w.spec("b", { desired = { Size = 3 }, update = function(x, changes)
    updates[#updates + 1] = changes
    x.Size = changes.Size.to
  end })
  t.eq(select(2, ctx:ensure(spec)), "created")
  t.eq(updates, { { Size = { from = 1, to = 3 } } })
  t.eq(phases, { "creating thing b", "updating thing b" })
  t.eq(select(2, ctx:ensure(spec)), "unchanged")
  w.things[ctx.state.b_id].Size = 2
  t.eq(select(2, ctx:ensure(spec)), "changed")
  t.eq(#updates, 2)
  -- current() maps the object to the fields compared
  spec.current = function(x) return { Size = x.Size * 10 } end
  spec.desired = { Size = 30 }
  t.eq(select(2, ctx:ensure(spec)), "unchanged")
  spec.update = nil
  spec.desired = { Size = 40 }
  local err = t.raises(function() ctx:ensure(spec) end, "CONFLICT")
  t.like(err.message, "^thing b differs from what it should be %(Size%) and hypd cannot change it in place")
end)

t.test("a thing that is not hypd's is a CONFLICT, never created over or changed", function()
  local w, ctx = world(), new_ctx()
  w.things["x-1"] = { Id = "x-1", Name = "c", Size = 1, Owner = "someone" }
  ctx.region = "us-west-2"
  local spec = w.spec("c", { field = "cluster_tag", desired = { Size = 2 }, update = function() error("changed") end,
    owned = function(x) return x.Owner == "hypd", "its owner is " .. x.Owner end })
  local err = t.raises(function() ctx:ensure(spec) end, "CONFLICT")
  t.eq(err.message, "thing c in us-west-2 exists but is not hypd's for this cluster (its owner is someone); hypd " ..
    "does not adopt it: delete or rename it, or choose another cluster_tag")
  t.eq({ err.type, err.name, err.id, err.field }, { "test:thing", "c", "x-1", "cluster_tag" })
  t.eq(w.calls, { "search c" })
end)

t.test("a create answered 'exists' searches again and takes what it finds", function()
  local w, ctx = world(), new_ctx()
  local spec = w.spec("d", { exists = { "AlreadyExists" }, create = function()
    w.things["t-9"] = { Id = "t-9", Name = "d" } -- made meanwhile (or before, its answer lost)
    errors.raise("AlreadyExists", "d exists")
  end })
  local x, action = ctx:ensure(spec)
  t.eq({ x.Id, action, ctx.state.d_id }, { "t-9", "created", "t-9" })
  -- an error that is not one of exists is raised as it is
  spec.exists = "Other"
  w.things["t-9"] = nil
  t.raises(function() ctx:ensure(spec) end, "AlreadyExists")
end)

-- an AWS error as hypd.aws raises it (what hypd.tool.kit.ambiguous reads)
local function aws_err(code, status)
  return errors.new(code, code .. " (the test)", { status = status, service = "test", operation = "CreateThing" })
end

t.test("after a 500 the create took effect: ensure looks again and adopts it, with no second create", function()
  local w, ctx, _, notes = world(), new_ctx()
  local spec = w.spec("a")
  local create = spec.create
  spec.create = function() create() error(aws_err("InternalFailure", 500), 0) end -- done, then the 500
  local x, action = ctx:ensure(spec)
  t.eq({ action, x.Id, ctx.state.a_id }, { "created", "t-1", "t-1" })
  t.eq(w.calls, { "search a", "create a", "search a" }, "looked for again, not created again")
  t.like(notes[1], "thing a: test CreateThing answered InternalFailure %(it may have taken effect%); looking " ..
    "for it again in 2s")
  t.like(notes[2], "thing a was made after all: adopting it")
end)

t.test("after a 500 or a reset the create did not take effect: ensure looks again, then creates it again, at " ..
  "most CREATE_TRIES times", function()
  local w, ctx = world(), new_ctx()
  local spec = w.spec("b")
  local create, fails = spec.create, { aws_err("InternalFailure", 500), aws_err("RESET") }
  spec.create = function()
    local e = table.remove(fails, 1)
    if e then w.log("refused") error(e, 0) end
    return create()
  end
  local x, action = ctx:ensure(spec)
  t.eq({ action, x.Id }, { "created", "t-1" })
  t.eq(w.calls, { "search b", "refused", "search b", "refused", "search b", "create b" })
  local tries = 0
  spec = w.spec("c", { create = function() tries = tries + 1 error(aws_err("ServiceUnavailable", 503), 0) end })
  t.raises(function() ctx:ensure(spec) end, "ServiceUnavailable")
  t.eq(tries, require("hypd.tool.kit").CREATE_TRIES)
end)

t.test("an ambiguous answer with no search is raised (a second create could make a twin); a refusal, a " ..
  "cancellation or a non-AWS error is raised at once", function()
  local w, ctx = world(), new_ctx()
  local tries = 0
  local spec = w.spec("d", { create = function() tries = tries + 1 error(aws_err("InternalFailure", 500), 0) end })
  spec.search = nil
  t.raises(function() ctx:ensure(spec) end, "InternalFailure")
  t.eq(tries, 1)
  -- throttling past the client's retries was not carried out: tried again even without a search
  local fails = 1
  spec = w.spec("e", { search = false })
  local create = spec.create
  spec.search = nil
  spec.create = function()
    if fails > 0 then fails = fails - 1 error(aws_err("ThrottlingException", 400), 0) end
    return create()
  end
  t.eq(select(2, ctx:ensure(spec)), "created")
  for _, e in ipairs { aws_err("InvalidParameterValue", 400), errors.new("TIMEOUT", "a poll ran out"),
      (function() local c = aws_err("CANCELLED") c.abort = true return c end)() } do
    tries = 0
    spec = w.spec("f", { create = function() tries = tries + 1 error(e, 0) end })
    t.raises(function() ctx:ensure(spec) end, e.code)
    t.eq(tries, 1, e.code .. " is not tried again")
  end
end)

t.test("after a 500 on an update ensure reads again: what holds is done, what still differs is updated again",
    function()
  local w, ctx = world(), new_ctx()
  local ups = 0
  local spec = w.spec("g", { desired = { Size = 3 }, update = function(x, ch)
    ups = ups + 1
    x.Size = ch.Size.to
    if ups == 1 then error(aws_err("InternalError", 500), 0) end -- done, then the 500
    return x
  end })
  local x, action = ctx:ensure(spec)
  t.eq({ action, x.Size, ups }, { "created", 3, 1 }, "read again, it holds: not updated again")
  ups = 0
  spec = w.spec("h", { desired = { Size = 5 }, update = function(thing, ch)
    ups = ups + 1
    if ups == 1 then error(aws_err("InternalError", 500), 0) end -- not done
    thing.Size = ch.Size.to
    return thing
  end })
  x = ctx:ensure(spec)
  t.eq({ x.Size, ups }, { 5, 2 }, "still differing, updated again")
end)

t.test("'not yet' errors are retried at the spec's pace, then the last one is raised; a cancellation never", function()
  local w, ctx, _, notes = world(), new_ctx()
  local tries = 0
  local spec = w.spec("e", { retry = function(e) if e.code == "NotYet" then return "not visible yet" end end,
    retry_every = 10, retry_for = 30, create = function()
      tries = tries + 1
      if tries < 3 then errors.raise("NotYet", "try " .. tries) end
      return { Id = "t-e", Name = "e" }
    end })
  local started = core.now()
  t.eq(select(2, ctx:ensure(spec)), "created")
  t.eq({ tries, core.now() - started }, { 3, 20 })
  t.eq(notes, { "not visible yet (0s)", "not visible yet (10s)" })
  -- never visible: retry_for / retry_every + 1 tries, then the last error
  tries = 0
  spec.key, spec.create = nil, function()
    tries = tries + 1
    errors.raise("NotYet", "try " .. tries)
  end
  spec.search = function() end
  local err = t.raises(function() ctx:ensure(spec) end, "NotYet")
  t.eq({ tries, err.message }, { 4, "try 4" })
  -- a cancelled task is not "not yet", whatever retry says
  tries = 0
  spec.retry = function() return "anything" end
  spec.create = function()
    tries = tries + 1
    errors.raise("CANCELLED", "stop", { abort = true })
  end
  t.raises(function() ctx:ensure(spec) end, "CANCELLED")
  t.eq(tries, 1)
end)

t.test("a plan reads, lists what it would create or change with planned ids, and never writes", function()
  local w, ctx = world(), new_ctx(true)
  local function never() error("a plan wrote") end
  local parent, action = ctx:ensure(w.spec("f", { create = never, update = never, fields = { Size = 1 },
    desired = { Color = "red" }, placeholder = function(id) return { Id = id, Planned = true } end }))
  t.eq({ action, parent.Id, parent.Planned, ctx.state.f_id }, { "create", "planned:test:thing:f", true,
    "planned:test:thing:f" })
  -- a child of a planned thing is not looked for at all
  local _, a2 = ctx:ensure(w.spec("g", { create = never, needs = { parent.Id } }))
  t.eq(a2, "create")
  w.things["x-h"] = { Id = "x-h", Name = "h", Size = 1 }
  t.eq(select(2, ctx:ensure(w.spec("h", { create = never, update = never, desired = { Size = 5 } }))), "change")
  t.eq(select(2, ctx:ensure(w.spec("h", { create = never, update = never }))), "unchanged")
  t.eq(w.calls, { "search f", "search h", "find x-h" })
  t.eq(require("hypd.tool.kit").summary(ctx), { create = 2, change = 1, delete = 0, keep = 0, plan = {
    { action = "create", type = "test:thing", name = "f", id = "planned:test:thing:f",
      fields = { Size = 1, Color = "red" } },
    { action = "create", type = "test:thing", name = "g", id = "planned:test:thing:g" },
    { action = "change", type = "test:thing", name = "h", id = "x-h", changes = { Size = { from = 1, to = 5 } } } } })
end)

t.test("an unknown key in a spec is a loud error", function()
  local w, ctx = world(), new_ctx()
  local ok, err = pcall(ctx.ensure, ctx, w.spec("i", { desried = { Size = 1 } }))
  t.eq(ok, false)
  t.like(tostring(err), "ensure: unknown key 'desried'")
  ok, err = pcall(ctx.poll, ctx, { what = "x", every = 1, check = function() return true end, evry = 1 })
  t.eq(ok, false)
  t.like(tostring(err), "poll: unknown key 'evry'")
end)

t.test("poll waits at its pace, keeps counting from since, and gives up with TIMEOUT or the caller's error", function()
  local ctx, phases, notes = new_ctx()
  local n = 0
  local v = ctx:poll { what = "the thing to be ready", every = 15, timeout = 60, check = function()
    n = n + 1
    return n == 3, "state " .. n, "value"
  end }
  t.eq({ v, phases, notes }, { "value", { "waiting for the thing to be ready" }, { "state 1 (0s)",
    "state 1 (10s; next check in 5s)", "state 2 (15s)", "state 2 (25s; next check in 5s)" } })
  -- since: a resumed wait that began 50 seconds ago has one check left
  n = 0
  local err = t.raises(function()
    ctx:poll { what = "never", every = 15, timeout = 60, since = core.now() - 50, phase = false,
      check = function() n = n + 1 return false, "still not" end }
  end, "TIMEOUT")
  t.eq({ n, err.message }, { 1, "never: still waiting after 50s (still not)" })
  t.eq(#phases, 1, "phase = false records none")
  err = t.raises(function()
    ctx:poll { what = "never", every = 15, timeout = 20, check = function() return false end,
      expired = function(waited) errors.raise("GONE", "gave up after " .. math.floor(waited + 0.5)) end }
  end, "GONE")
  t.eq(err.message, "gave up after 15")
  -- a plan does not wait
  local plan = new_ctx(true)
  t.eq(plan:poll { what = "x", every = 1, check = function() error("a plan waited") end }, nil)
end)

t.test("a wait is never silent for more than PROGRESS_EVERY: a slow pace is slept in slices, each noted with " ..
  "what is awaited, what the last check saw and the time so far", function()
  local ctx = new_ctx()
  local seen = {}
  local progress = ctx.progress
  function ctx.progress(self, text, extra)
    seen[#seen + 1] = { at = core.now(), text = text, wait = extra and extra.wait }
    return progress(self, text, extra)
  end
  local started, n = core.now(), 0
  ctx:poll { what = "HyperPod cluster x to be InService", every = 120, timeout = 600, check = function()
    n = n + 1
    return n == 3, "HyperPod cluster x Creating: InsufficientCapacity: not now"
  end }
  t.eq(n, 3)
  local last, gap = started, 0
  for _, e in ipairs(seen) do
    gap, last = math.max(gap, e.at - last), e.at
    t.eq({ e.wait and e.wait.what, e.wait and e.wait.seen }, { "HyperPod cluster x to be InService",
      "HyperPod cluster x Creating: InsufficientCapacity: not now" }, e.text)
    t.ok(e.wait and math.abs(e.wait.waited - (e.at - started)) < 1e-6, "the time waited so far: " .. e.text)
  end
  t.ok(gap <= kit.PROGRESS_EVERY, "the longest silence is " .. gap .. " s")
  t.eq(#seen, 24, "two pauses of 120 s: a note at each check and every 10 s between")
  t.eq(seen[2].text, "HyperPod cluster x Creating: InsufficientCapacity: not now (10s; next check in 1m50s)")
end)

t.cleanup(function() core.virtual(false) end)
