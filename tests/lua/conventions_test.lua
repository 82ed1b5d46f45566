-- One home per convention (STYLE.md), judged on the sources compiled into
-- the binary under test (hypd.core.embedded): the ownership tag and the
-- names hypd derives from a cluster tag are spelled only in workflows._names;
-- a planned id is made only by the kit; the "no cluster given and none is
-- active" rule is written only in hypd.ctx; a VALIDATION field error is
-- built only by hypd.errors. A second spelling is a bug waiting to diverge.
local t = require "hypd.tap"
local core = require "hypd.core"

-- sources() -> {module = text}: every embedded Lua module
local function sources()
  local out, n = {}, 0
  for _, mod in ipairs(core.embedded_list("")) do
    local src = core.embedded(mod)
    if type(src) == "string" then out[mod], n = src, n + 1 end
  end
  assert(n > 100, "the binary embeds " .. n .. " modules")
  return out
end

local SRC = sources()

-- spelled(patterns, home) -> "module:line: text" for every line outside the
-- modules of home that matches one of the patterns (comments included: a
-- comment is read as the rule too)
local function spelled(patterns, home)
  local out = {}
  for mod, src in pairs(SRC) do
    if not home[mod] then
      local ln = 0
      for line in (src .. "\n"):gmatch("([^\n]*)\n") do
        ln = ln + 1
        for _, p in ipairs(patterns) do
          if line:find(p) then out[#out + 1] = mod .. ":" .. ln .. ": " .. line:gsub("^%s+", ""); break end
        end
      end
    end
  end
  table.sort(out)
  return out
end

local function none(list, what)
  t.ok(#list == 0, what .. ":\n  " .. table.concat(list, "\n  "))
end

t.test("the ownership tag and the hypd-<tag> names are spelled in workflows._names alone", function()
  none(spelled({ '"hypd:cluster%-tag"', "'hypd:cluster%-tag'", '"hypd%-"%s*%.%.', "'hypd%-'%s*%.%." },
    { ["workflows._names"] = true }), "a second spelling of the tag or of a hypd- name")
  t.like(SRC["workflows._names"] or "", '"hypd:cluster%-tag"', "workflows._names holds the tag")
end)


t.test("a planned id is made by the kit alone (hypd.kit.planned_id)", function()
  none(spelled({ '"planned:[%a"]', "'planned:[%a']" }, { ["hypd.tool.guard"] = true, ["hypd.tool.kit"] = true }),
    "a planned id made by hand")
end)

t.test("a tool's rules across fields are validate: check, the step's name, is refused as a tool key", function()
  local tool = require "hypd.tool.registry"
  local function def(extra)
    local d = { name = "cluster_conventions_probe", summary = "probe", description = "probe", kind = "read",
      params = { a = { type = "integer" }, b = { type = "integer" } }, run = function() return {} end }
    for k, v in pairs(extra) do d[k] = v end
    return d
  end
  local ok, err = pcall(tool.check_def, def { check = function() end })
  t.ok(not ok, "check is refused")
  t.like(tostring(type(err) == "table" and err.message or err), "unknown key 'check'.*validate = function%(params%)")
  local both = def { validate = function(p)
    if p.a and p.b and p.a > p.b then error({ code = "VALIDATION" }, 0) end
  end }
  t.ok(pcall(tool.check_def, both), "validate is a tool key")
  local v, verr = tool.validate(both, { a = 2, b = 1 })
  t.eq(v, nil, "validate runs on the call")
  t.eq(verr and verr.code, "VALIDATION")
end)

t.test("the rule of the cluster a call targets, and its refusal, are written once (ctx:cluster)", function()
  none(spelled({ "none is active" }, { ["hypd.clusters"] = true }), "a second text of the target rule")
  local ctx = require("hypd.tool.ctx").new { params = {}, region = "us-west-2" }
  local clusters = require "hypd.clusters"
  local store = require "hypd.store"
  local act = clusters.active()
  store.delete(clusters.KEY)
  local ok, err = pcall(ctx.cluster, ctx)
  local named = ctx:cluster { cluster = "hypd-named" }
  if act then clusters.set_active(act) end
  t.ok(not ok, "no cluster given and none active is refused")
  t.eq({ err.code, err.message, err.fields[1].field, err.fields[1].rule },
    { "NOT_FOUND", clusters.NONE, "cluster", "required" })
  t.eq({ named.name, named.region, named.active }, { "hypd-named", "us-west-2", false })
end)

-- workflows(patterns) -> the lines of workflow modules that match
local function in_workflows(patterns)
  local home = {}
  for mod in pairs(SRC) do if not mod:find("^workflows%.") then home[mod] = true end end
  return spelled(patterns, home)
end

t.test("a workflow refuses a field with hypd.errors.refuse (or refuse_all), never a list of its own", function()
  none(in_workflows { 'raise%("VALIDATION"', "fields = { {", "local function refuse%(", "local function bad%(" },
    "a field error built by hand")
end)

t.test("hypd.errors.refuse: the one field, its rule and message, in the code asked, with the context given", function()
  local errors = require "hypd.errors"
  local _, e = errors.try(errors.refuse, "size", "maximum", "at most 3")
  t.eq({ e.code, e.message, e.fields }, { "VALIDATION", "at most 3",
    { { field = "size", rule = "maximum", message = "at most 3" } } })
  _, e = errors.try(errors.refuse, "size", "maximum", "at most 3", { prefix = "field", code = "CONFLICT", fix = "x" })
  t.eq({ e.code, e.message, e.fields[1].message, e.fix, e.prefix }, { "CONFLICT", "at most 3", "size: at most 3", "x" })
  _, e = errors.try(errors.refuse, "size", "maximum", "at most 3", { prefix = "message" })
  t.eq({ e.message, e.fields[1].message }, { "size: at most 3", "at most 3" })
  _, e = errors.try(errors.refuse, "size", "maximum", "at most 3", { field_message = "size: too big" })
  t.eq({ e.message, e.fields[1].message, e.field_message }, { "at most 3", "size: too big" })
  local list = { { field = "a", rule = "r", message = "m" }, { field = "b", rule = "r", message = "m" } }
  _, e = errors.try(errors.refuse_all, list, "two")
  t.eq({ e.code, e.message, #e.fields }, { "VALIDATION", "two", 2 })
  t.eq(errors.view(e).fields[2].field, "b")
end)
