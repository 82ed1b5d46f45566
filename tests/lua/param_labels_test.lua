-- Forms that speak to a person: a parameter's label, web help, group and
-- order (hypd.tool.registry) are checked at definition and exported as
-- x-hypd-label, x-hypd-help, x-hypd-group and x-hypd-order; every built-in
-- tool gives each of its parameters (nested ones too) a label, no two of a
-- tool's parameters share an order, the web never shows the agent's wording,
-- and the create and endpoint forms open with their decisions.
local t = require "hypd.tap"
local tool = require "hypd.tool.registry"
require("hypd.tool.loader").load()

local function def(params)
  return { name = "cluster_label_probe", summary = "probe", description = "a probe of param keys", kind = "read",
    params = params, run = function() return {} end }
end

-- refused(params, like): check_def raises an error matching like
local function refused(params, like)
  local ok, err = pcall(tool.check_def, def(params))
  t.ok(not ok, "refused: " .. like)
  t.like(tostring(err), like)
end

t.test("label, help, group and order are exported as x-hypd-*, nested properties too", function()
  local s = tool.input_schema(def({
    size = { type = "integer", label = "Size", help = "Bigger costs more.", group = "more", order = 3,
      description = "the size (ask the person)" },
    name = { type = "string", required = true, label = "Name", order = 1 },
    opts = { type = "object", label = "Options", order = 2, properties = {
      fast = { type = "boolean", label = "Fast", order = 1, help = "Quicker, dearer." } } },
  }))
  local p = s.properties
  t.eq({ p.size["x-hypd-label"], p.size["x-hypd-help"], p.size["x-hypd-group"], p.size["x-hypd-order"] },
    { "Size", "Bigger costs more.", "more", 3 })
  t.eq(p.size.description, "the size (ask the person)", "the agent's description stays as it is")
  t.eq(p.name["x-hypd-group"], "decisions", "a required parameter without a group is a decision")
  t.eq(p.opts["x-hypd-group"], "more", "an optional one without a group is more")
  t.eq({ p.opts.properties.fast["x-hypd-label"], p.opts.properties.fast["x-hypd-help"],
    p.opts.properties.fast["x-hypd-order"] }, { "Fast", "Quicker, dearer.", 1 })
end)

t.test("a bad label, help, group or order is a definition error naming the param and the rule", function()
  refused({ x = { type = "string", label = 7 } }, "param x: label is a human label")
  refused({ x = { type = "string", label = "" } }, "param x: label is a human label")
  refused({ x = { type = "string", help = {} } }, "param x: help is the web help for a person")
  refused({ x = { type = "string", group = "later" } }, 'param x: group is "decisions" or "more"')
  refused({ x = { type = "string", order = 1.5 } }, "param x: order is an integer")
  refused({ x = { type = "object", properties = { y = { type = "string", order = "1" } } } },
    "param x.y: order is an integer")
end)

-- walk(schema, path, fn): fn(path, s) for every property below schema (items too)
local function walk(schema, path, fn)
  for k, s in pairs(schema.properties or {}) do
    local p = path == "" and k or path .. "." .. k
    fn(p, s)
    walk(s, p, fn)
    if s.items then walk(s.items, p .. "[]", fn) end
  end
end

local AGENT = { "ask the person", "never invent", "ask a person" }

t.test("every built-in tool labels each parameter, orders them apart, and shows a person no agent wording", function()
  local n, bad = 0, {}
  for _, d in ipairs(tool.list()) do
    if d.source == "built-in" then
      local s = tool.input_schema(d)
      local orders = {}
      for k, p in pairs(s.properties) do
        local o = p["x-hypd-order"]
        if math.type(o) ~= "integer" then bad[#bad + 1] = d.name .. "." .. k .. ": no order" end
        if o and orders[o] then bad[#bad + 1] = d.name .. ": " .. k .. " and " .. orders[o] .. " share order " .. o end
        if o then orders[o] = k end
      end
      walk(s, "", function(path, p)
        n = n + 1
        if type(p["x-hypd-label"]) ~= "string" then bad[#bad + 1] = d.name .. "." .. path .. ": no label" end
        local web = (p["x-hypd-help"] or p.description or ""):lower()
        for _, w in ipairs(AGENT) do
          if web:find(w, 1, true) then bad[#bad + 1] = d.name .. "." .. path .. ": the web says '" .. w .. "'" end
        end
      end)
    end
  end
  t.ok(n > 400, n .. " parameters checked")
  t.ok(#bad == 0, #bad .. " problems:\n  " .. table.concat(bad, "\n  "))
end)

-- first(name, k) -> the first k parameter names of a tool's form: by group, then order
local function first(name, k)
  local s = tool.input_schema(tool.get(name))
  local names = {}
  for key in pairs(s.properties) do names[#names + 1] = key end
  table.sort(names, function(a, b)
    local pa, pb = s.properties[a], s.properties[b]
    local ga, gb = tool.GROUPS[pa["x-hypd-group"]], tool.GROUPS[pb["x-hypd-group"]]
    if ga ~= gb then return ga < gb end
    return pa["x-hypd-order"] < pb["x-hypd-order"]
  end)
  return { table.unpack(names, 1, k) }
end

t.test("cluster_create opens with the cluster name, the zone, the instance type and count", function()
  t.eq(first("cluster_create", 5), { "cluster_tag", "availability_zone", "instance_type", "instance_count",
    "capacity_type" })
  local tag = tool.input_schema(tool.get("cluster_create")).properties.cluster_tag
  t.eq(tag["x-hypd-label"], "Cluster name")
  t.like(tag.description, "Ask the person; never invent it", "the agent keeps its wording")
  t.like(tag["x-hypd-help"], "cannot change", "the person reads what cannot change later")
  t.eq(tool.input_schema(tool.get("cluster_create")).properties.s3_storage["x-hypd-group"], "more")
end)

t.test("the endpoint call opens with the prompt; the advanced features with the training operator", function()
  t.eq(first("inference_call_model", 2), { "prompt", "name" })
  t.eq(first("hyperpod_update_advanced_features", 1), { "training_operator" })
  local f = tool.input_schema(tool.get("hyperpod_update_advanced_features")).properties.karpenter
  t.eq(f["x-hypd-label"], "Karpenter autoscaling")
  t.eq(f.properties.enabled["x-hypd-label"], "On")
end)

t.test("MCP's tools/list leaves the person's form keys out; the agent keeps each description", function()
  local mcp = require "hypd.api.mcp"
  local d = tool.get("cluster_create")
  local x = mcp.mcp_tool({ name = d.name, summary = d.summary, description = d.description,
    input_schema = tool.input_schema(d) })
  local tag = x.inputSchema.properties.cluster_tag
  t.eq({ tag["x-hypd-label"], tag["x-hypd-help"], tag["x-hypd-group"], tag["x-hypd-order"] }, {})
  t.like(tag.description, "Ask the person")
  t.eq(x.inputSchema.properties.features.properties.karpenter["x-hypd-label"], nil, "nested ones too")
  t.eq(tool.input_schema(d).properties.cluster_tag["x-hypd-label"], "Cluster name", "the registry's schema keeps them")
end)

t.test("every built-in recipe labels its parameters; elastic training is among the more options", function()
  local n = 0
  local dispatch = require "hypd.tool.dispatch"
  local list = assert(dispatch.call("training_list_recipes", {}, { name = "t", scope = "read", front = "test" }))
  for _, r in ipairs(list.recipes) do
    if r.source == "built-in" then
      t.ok(not r.error, r.name .. " loads")
      local s = r.params
      walk(s, "", function(path, p)
        if not path:find("[]", 1, true) then
          n = n + 1
          t.ok(type(p["x-hypd-label"]) == "string", r.name .. "." .. path .. " has a label")
        end
      end)
      local lead
      for k, p in pairs(s.properties) do
        if p["x-hypd-group"] == "decisions" and (not lead or p["x-hypd-order"] < s.properties[lead]["x-hypd-order"]) then
          lead = k
        end
      end
      t.eq(lead, "job_name", r.name .. ": the job's name first")
      if s.properties.elastic then t.eq(s.properties.elastic["x-hypd-group"], "more", r.name .. ": elastic is an option") end
    end
  end
  t.ok(n > 60, n .. " recipe parameters checked")
end)
