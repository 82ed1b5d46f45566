-- hypd.tool.kit's ctx:absent, on things kept in a Lua table (no AWS) through a
-- hypd.tool.ctx context: what is absent stays absent, what is hypd's is deleted
-- once (its phase recorded first), a "gone already" error is success, a
-- "not yet" error is tried again, the wait until it is gone; one that is not
-- hypd's is kept and reported (a sweep), or a CONFLICT when the caller named
-- it (field), and never deleted; one with a reason to keep it is kept; a
-- plan lists delete and keep (with the reason and the id) and deletes
-- nothing; after a 500 it looks again: gone is deleted, still there is
-- deleted again. storage_delete and cluster_delete are ctx:absent on AWS and
-- Kubernetes.
local t = require "hypd.tap"
local core = require "hypd.core"
local ctxm = require "hypd.tool.ctx"
local errors = require "hypd.errors"

core.virtual(true)

local function world()
  local w = { things = { ["t-1"] = { Id = "t-1", Owner = "hypd" }, ["t-2"] = { Id = "t-2", Owner = "someone" } },
    calls = {} }
  function w.spec(id, extra)
    local s = { type = "test:thing", label = "thing", name = id, id = "Id",
      find = function() return w.things[id] end,
      owned = function(x) return x.Owner == "hypd", "its owner is " .. x.Owner end,
      delete = function(x)
        w.calls[#w.calls + 1] = "delete " .. x.Id
        w.things[x.Id] = nil
      end }
    for k, v in pairs(extra or {}) do s[k] = v end
    return s
  end
  return w
end

local function new_ctx(plan)
  local phases = {}
  local ctx = ctxm.new { params = {}, plan = plan }
  local phase = ctx.phase
  function ctx.phase(self, text) phases[#phases + 1] = text return phase(self, text) end
  return ctx, phases
end

t.test("absent deletes hypd's thing once, its phase first, and then finds it absent", function()
  local w = world()
  local ctx, phases = new_ctx()
  t.eq(ctx:absent(w.spec("t-1")), "deleted")
  t.eq(phases, { "deleting thing t-1" })
  t.eq(ctx:absent(w.spec("t-1")), "absent")
  t.eq(w.calls, { "delete t-1" })
end)

t.test("a thing that is not hypd's stays: kept and reported, or a CONFLICT when the caller named it", function()
  local w = world()
  local ctx = new_ctx()
  t.eq({ ctx:absent(w.spec("t-2")) }, { "kept", "not hypd's: its owner is someone" })
  t.eq(ctx.state.kept, { { type = "test:thing", name = "t-2", id = "t-2", why = "not hypd's: its owner is someone" } })
  t.eq(select(1, ctx:absent(w.spec("t-2"))), "kept")
  t.eq(#ctx.state.kept, 1, "reported once")
  local ok, err = pcall(ctx.absent, ctx, w.spec("t-2", { field = "claim_name" }))
  t.eq(ok, false)
  t.ok(errors.is(err, "CONFLICT"), tostring(err and err.message))
  t.like(err.message, "its owner is someone")
  t.like(err.message, "nothing was deleted")
  t.eq(err.field, "claim_name")
  t.ok(w.things["t-2"], "still there")
  t.eq(w.calls, {})
end)

t.test("every waits until find answers nil, and gives up with TIMEOUT", function()
  local w = world()
  local ctx = new_ctx()
  local left = 3
  local stubborn = { Id = "t-7", Owner = "hypd" }
  w.things["t-7"] = stubborn
  t.eq(ctx:absent(w.spec("t-7", { every = 10, timeout = 600, delete = function()
    w.calls[#w.calls + 1] = "delete t-7"
  end, find = function()
    if w.calls[1] then left = left - 1 end
    if left > 0 then return stubborn end
  end })), "deleted")
  t.eq(w.calls, { "delete t-7" }, "deleted once, then waited")
  w.things["t-8"] = { Id = "t-8", Owner = "hypd" }
  local ok, err = pcall(ctx.absent, ctx, w.spec("t-8", { every = 10, timeout = 60, delete = function() end }))
  t.eq(ok, false)
  t.eq(err.code, "TIMEOUT")
end)

t.test("a gone-already error is success; a not-yet error is tried again; others raise", function()
  local w = world()
  local ctx = new_ctx()
  t.eq(ctx:absent(w.spec("t-1", { gone = "NotFound", delete = function()
    errors.raise("NotFound", "already gone") end })), "deleted")
  local tries = 0
  w.things["t-3"] = { Id = "t-3", Owner = "hypd" }
  t.eq(ctx:absent(w.spec("t-3", { retry_every = 5, retry_for = 60,
    retry = function(e) if e.code == "DependencyViolation" then return "still in use" end end,
    delete = function()
      tries = tries + 1
      if tries < 3 then errors.raise("DependencyViolation", "in use") end
    end })), "deleted")
  t.eq(tries, 3)
  w.things["t-4"] = { Id = "t-4", Owner = "hypd" }
  local ok, err = pcall(ctx.absent, ctx, w.spec("t-4", { delete = function() errors.raise("AccessDenied", "no") end }))
  t.eq({ ok, err.code }, { false, "AccessDenied" })
end)

t.test("keep keeps it; a plan lists delete and keep with ids and reasons, and deletes nothing", function()
  local w = world()
  local ctx = new_ctx()
  t.eq(ctx:absent(w.spec("t-1", { keep = "it holds data" })), "kept")
  t.ok(w.things["t-1"], "kept")
  local plan = new_ctx(true)
  w.things["t-5"] = { Id = "t-5", Owner = "hypd" }
  t.eq(plan:absent(w.spec("t-1", { keep = function() return "it holds data" end })), "kept")
  t.eq(plan:absent(w.spec("t-5")), "delete")
  t.eq(plan:absent(w.spec("t-9")), "absent")
  t.eq(plan.planned, { { action = "keep", type = "test:thing", name = "t-1", id = "t-1", why = "it holds data" },
    { action = "delete", type = "test:thing", name = "t-5", id = "t-5" } })
  t.eq(w.calls, {}, "nothing deleted")
  t.eq(require("hypd.tool.kit").summary(plan).delete, 1)
  local ok, err = pcall(plan.absent, plan, { type = "x", name = "y", find = function() end, delete = function() end,
    bogus = 1 })
  t.eq(ok, false)
  t.like(tostring(err), "absent: unknown key 'bogus'")
end)

t.test("after a 500 on the delete absent looks again: gone (the delete took effect) is deleted, still there " ..
  "is deleted again", function()
  local w, ctx = world(), new_ctx()
  local function e500() return errors.new("InternalFailure", "the test", { status = 500, service = "test",
    operation = "DeleteThing" }) end
  local calls = 0
  local spec = w.spec("t-1", { delete = function(x)
    calls = calls + 1
    w.things[x.Id] = nil
    error(e500(), 0) -- done, then the 500
  end })
  t.eq(ctx:absent(spec), "deleted")
  t.eq(calls, 1, "not deleted twice")
  w.things["t-3"] = { Id = "t-3", Owner = "hypd" }
  calls = 0
  spec = w.spec("t-3", { delete = function(x)
    calls = calls + 1
    if calls == 1 then error(e500(), 0) end -- not done
    w.things[x.Id] = nil
  end })
  t.eq(ctx:absent(spec), "deleted")
  t.eq({ calls, w.things["t-3"] }, { 2, nil })
  spec = w.spec("t-2", { owned = function() return true end,
    delete = function() error(errors.new("DependencyViolation", "in use", { status = 400, service = "test",
      operation = "DeleteThing" }), 0) end })
  t.raises(function() ctx:absent(spec) end, "DependencyViolation")
end)
