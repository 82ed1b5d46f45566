-- hypd.kit's ctx:absent, on things kept in a Lua table (no AWS) through a
-- hypd.ctx context: a thing that is not there is "absent" and nothing is
-- sent; one that is there is deleted once, its phase recorded first; one
-- already going is left to go ("deleting"); one that is not hypd's is a
-- CONFLICT; a plan lists a delete and calls nothing; unknown keys raise.
-- hyperpod_delete_instance_group is the kit on AWS (hyperpod_capacity_test).
local t = require "hypd.tap"
local ctxm = require "hypd.ctx"

local function world(things)
  local w = { things = things, deleted = {} }
  function w.spec(name, extra)
    local s = { type = "test:thing", label = "thing", name = name,
      find = function() return w.things[name] end,
      gone = function(x) return x.State == "deleting" end,
      delete = function(x) w.deleted[#w.deleted + 1] = x.Name; w.things[name] = nil end }
    for k, v in pairs(extra or {}) do s[k] = v end
    return s
  end
  return w
end

local function new_ctx(plan)
  local phases = {}
  local ctx = ctxm.new { params = {}, plan = plan }
  function ctx.phase(_, text) phases[#phases + 1] = text end
  return ctx, phases
end

t.test("absent deletes a thing that is there once, recording its phase first, and then finds it absent", function()
  local w = world { a = { Name = "a" } }
  local ctx, phases = new_ctx()
  local obj, action = ctx:absent(w.spec("a"))
  t.eq({ obj and obj.Name, action }, { "a", "deleted" })
  t.eq(phases, { "deleting thing a" })
  t.eq(w.deleted, { "a" })
  t.eq({ ctx:absent(w.spec("a")) }, { nil, "absent" })
  t.eq(w.deleted, { "a" }, "nothing is sent for what is not there")
end)

t.test("absent leaves a thing that is already going, and refuses one that is not hypd's", function()
  local w = world { b = { Name = "b", State = "deleting" }, c = { Name = "c", Owner = "someone" } }
  local ctx = new_ctx()
  t.eq(select(2, ctx:absent(w.spec("b"))), "deleting")
  local ok, err = pcall(ctx.absent, ctx, w.spec("c", { owned = function(x) return x.Owner == "hypd", "made by " ..
    x.Owner end, field = "name" }))
  t.eq(ok, false)
  t.eq(err.code, "CONFLICT")
  t.like(err.message, "made by someone")
  t.eq(w.deleted, {}, "nothing was deleted")
end)

t.test("a plan lists the delete and calls nothing; an unknown key raises", function()
  local w = world { d = { Name = "d" } }
  local ctx = new_ctx(true)
  t.eq(select(2, ctx:absent(w.spec("d", { fields = { Size = 3 } }))), "delete")
  t.eq(ctx.planned, { { action = "delete", type = "test:thing", name = "d", fields = { Size = 3 } } })
  t.eq(w.deleted, {})
  t.eq(require("hypd.kit").summary(ctx).delete, 1)
  t.eq(pcall(ctx.absent, ctx, w.spec("d", { nope = true })), false)
end)
