-- The skills (skills/<name>/SKILL.md, served as MCP prompts and by `hypd
-- tools --skills`): each parses with its directory's name and a
-- description; every tool a skill names is registered; every call it shows
-- (`tool key=value ...`, hypd.hints) validates against the registry; the
-- toolsets each says to load hold every tool it calls; the create-cluster,
-- diagnose and monitor skills say what an agent relies on.
local t = require "hypd.tap"
local hints = require "hypd.hints"
local mcp = require "hypd.api.mcp"
local sys = require "hypd.sys"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
-- a call that leaves cluster out works on the active cluster: there is one
require("hypd.clusters").set_active { name = "hypd-demo", region = "us-west-2" }

local SK = dofile("tests/lua/skills_names.lua")
local toolsets = require "hypd.tool.toolsets"

local function skills()
  local out = {}
  for _, dir in ipairs(sys.listdir("skills") or {}) do
    local text = H.read("skills/" .. dir .. "/SKILL.md")
    if text then out[#out + 1] = { dir = dir, text = text, skill = mcp.parse_skill(text) } end
  end
  table.sort(out, function(a, b) return a.dir < b.dir end)
  return out
end

t.test("every skill has front matter with its directory's name and a description an agent can choose by", function()
  local list = skills()
  t.ok(#list >= 19, "the skills are there: " .. #list)
  for _, s in ipairs(list) do
    t.ok(s.skill, s.dir .. " parses")
    if s.skill then
      t.eq(s.skill.name, s.dir, s.dir .. ": name")
      t.ok(#s.skill.description > 40 and #s.skill.description < 700, s.dir .. ": description of a useful length")
    end
  end
end)

t.test("every tool a skill names is registered", function()
  local bad = {}
  for _, s in ipairs(skills()) do
    for _, name in ipairs(SK.named(s.text)) do
      if not tool.get(name) then bad[#bad + 1] = s.dir .. ": " .. name end
    end
  end
  t.eq(bad, {}, "names that are no tool")
end)

t.test("every call a skill shows validates against the registry", function()
  local bad, n = {}, 0
  for _, s in ipairs(skills()) do
    for _, call in ipairs(SK.calls(s.skill.body)) do
      n = n + 1
      local ok, problems = hints.check(call)
      if not ok then bad[#bad + 1] = s.dir .. ": " .. call.text .. ": " .. table.concat(problems, "; ") end
    end
  end
  t.ok(n >= 40, "the skills show calls: " .. n)
  t.eq(bad, {}, "calls that do not validate")
end)

t.test("each skill says which toolsets to load, and they hold every tool it calls", function()
  local bad = {}
  for _, s in ipairs(skills()) do
    local line = s.skill.body:match("\nToolsets: ([^\n]*)")
    t.ok(line, s.dir .. " says its toolsets")
    local named = line and (line:match("%-%-toolsets ([a-z,]+)") or (line:find("`hypd mcp`") and "default"))
    local sets = named and toolsets.parse(named)
    t.ok(sets, s.dir .. ": the toolsets line names sets: " .. tostring(line))
    for _, c in ipairs(sets and SK.calls(s.skill.body) or {}) do
      local def = tool.get(c.tool)
      if def and not toolsets.has(def, sets) then bad[#bad + 1] = s.dir .. ": " .. c.tool .. " is not in " .. named end
    end
  end
  t.eq(bad, {}, "calls the skill's toolsets do not load")
end)

-- the calls of a skill's body, in order, as tool names
local function calls(name)
  local out = {}
  for _, c in ipairs(SK.calls(mcp.parse_skill(H.read("skills/" .. name .. "/SKILL.md")).body)) do
    out[#out + 1] = c
  end
  return out
end

local function index(list, pred)
  for i, c in ipairs(list) do if pred(c) then return i end end
end

local function arg(c, key)
  for _, a in ipairs(c.args) do if a.key == key then return a end end
end

t.test("create-cluster looks before it proposes, asks the four decisions, plans, then follows with wait_seconds", function()
  local cs = calls("create-cluster")
  local at = function(name, pred)
    return index(cs, function(c) return c.tool == name and (not pred or pred(c)) end)
  end
  local list, zones, types = at("cluster_list"), at("aws_get_availability_zones"), at("aws_get_instance_types")
  local plan = at("cluster_create", function(c) return arg(c, "plan") ~= nil end)
  local create = at("cluster_create", function(c) return arg(c, "plan") == nil end)
  local follow = at("cluster_get_creation_status", function(c) return arg(c, "wait_seconds") ~= nil end)
  t.ok(list and zones and types and plan and create and follow, "every step is shown as a call")
  if not (list and zones and types and plan and create and follow) then return end
  t.ok(list < plan and zones < plan and types < plan, "the three reads come before anything is proposed")
  t.ok(plan < create and create < follow, "plan, create, follow")
  for _, k in ipairs { "cluster_tag", "availability_zone", "instance_type", "capacity_type" } do
    t.ok(arg(cs[create], k), "the create call carries the decision " .. k)
  end
  t.ok(arg(cs[create], "cluster_tag").placeholder and arg(cs[create], "instance_type").placeholder,
    "the decisions are the person's: placeholders, not invented values")
  t.ok(arg(cs[follow], "operation_id").placeholder, "it follows the operation the create answered")
  local body = H.read("skills/create-cluster/SKILL.md")
  t.like(body, "succeeded", "it says when to stop following")
end)

t.test("diagnose reads first, escalates inspect then reboot then replace, and asks before a change", function()
  local body = H.read("skills/diagnose/SKILL.md")
  local cs = calls("diagnose")
  local function first(name) return index(cs, function(c) return c.tool == name end) end
  for _, name in ipairs { "monitor_get_cluster", "diagnose_node_health", "diagnose_training_job", "diagnose_inference",
    "diagnose_cluster_creation", "hyperpod_node_reboot", "hyperpod_node_replace" } do
    t.ok(first(name), "diagnose shows " .. name)
  end
  if first("hyperpod_node_reboot") and first("hyperpod_node_replace") then
    t.ok(first("monitor_get_cluster") < first("hyperpod_node_reboot"), "a read comes first")
    t.ok(first("hyperpod_node_reboot") < first("hyperpod_node_replace"), "reboot before replace")
  end
  local i, r, p = body:find("inspect", 1, true), body:find("reboot", 1, true), body:find("replace", 1, true)
  t.ok(i and r and p and i < r and r < p, "the escalation order is said in that order")
  t.like(body, "ask the person", "a change is the person's decision")
  t.like(body, "suggestion", "a mutating call is presented as a suggestion")
end)

t.test("monitor answers from monitor_get_cluster and follows changes with wait_seconds", function()
  local cs = calls("monitor")
  t.ok(index(cs, function(c) return c.tool == "monitor_get_cluster" and arg(c, "wait_seconds") ~= nil end),
    "monitor_get_cluster with wait_seconds")
  t.ok(index(cs, function(c) return c.tool == "monitor_get_cluster" and arg(c, "instance_group") ~= nil end),
    "and its instance_group filter")
end)

t.test("hypd tools --skills lists the skills, --skills NAME prints one, an unknown one is named", function()
  local out = select(2, H.sh(H.hypd .. " tools --skills"))
  for _, s in ipairs(skills()) do t.like(out, "\n" .. s.dir:gsub("%-", "%%-") .. "%s", "lists " .. s.dir) end
  local one = select(2, H.sh(H.hypd .. " tools --skills monitor"))
  t.like(one, "# Monitor a cluster", "prints the skill's body")
  local rc, _, err = H.sh(H.hypd .. " tools --skills no-such-skill")
  t.eq(rc, 1)
  t.like(err, "no skill no%-such%-skill %(the skills: .*create%-cluster")
end)
