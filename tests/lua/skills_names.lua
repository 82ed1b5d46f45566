-- named(text) -> the tool names a Markdown text (a skill, an agent's
-- prompt) names: the first word of each `code span` and of each line of a
-- fenced block that has a tool prefix (hypd.tool.registry.PREFIXES) and is
-- names a tool (area_verb...: a verb after the prefix) and is not a
-- parameter or result field of some tool (cluster_tag, training_plan, job_id
-- share the prefixes). Shared by skills_test and
-- agents_test.
local tool = require "hypd.tool.registry"

local M = {}

local fields
local function field_names()
  if fields then return fields end
  fields = {}
  local function walk(schema, depth)
    if type(schema) ~= "table" or depth > 12 then return end
    for k, v in pairs(schema.properties or {}) do
      fields[k] = true
      walk(v, depth + 1)
    end
    walk(schema.items, depth + 1)
    for _, alt in ipairs(schema.anyOf or {}) do walk(alt, depth + 1) end
  end
  for _, def in ipairs(tool.list()) do
    walk(tool.input_schema(def), 0)
    walk(tool.output_schema(def), 0)
  end
  return fields
end

-- a tool's name is area_verb..., or monitor_/diagnose_ anything; a field
-- (job_status, hyperpod_arn) has no verb after its prefix
local VERBS = { get = true, list = true, create = true, delete = true, update = true, add = true, scale = true,
  switch = true, import = true, configure = true, submit = true, deploy = true, call = true, set = true,
  assign = true, release = true, render = true, download = true, cancel = true, disable = true, node = true,
  setup = true }
local ANY = { monitor_ = true, diagnose_ = true }
local function prefixed(w)
  for _, p in ipairs(tool.PREFIXES) do
    if w:sub(1, #p) == p and #w > #p then return ANY[p] or VERBS[w:sub(#p + 1):match("^[a-z0-9]+")] == true end
  end
  return false
end

function M.named(text)
  local out, seen = {}, {}
  local function add(w)
    w = w and w:match("^([a-z][a-z0-9_]*[a-z0-9])$")
    if w and prefixed(w) and not field_names()[w] and not seen[w] then
      seen[w] = true
      out[#out + 1] = w
    end
  end
  local fenced = false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%s*```") then
      fenced = not fenced
    elseif fenced then
      add(line:match("^%s*(%S+)"))
    else
      for span in line:gmatch("`([^`]+)`") do add(span:match("^%s*([%w_]+)")) end
    end
  end
  return out
end

-- calls(text) -> the calls a Markdown text shows (hypd.hints.extract): in
-- prose a tool's name with arguments; each line of a fenced block is a
-- call, with or without arguments; a line ending in \ goes on on the next
function M.calls(text)
  local hints = require "hypd.hints"
  text = text:gsub("\\\n%s*", " ")
  local out, prose, fenced = {}, {}, false
  local function flush()
    for _, c in ipairs(hints.extract(table.concat(prose, "\n"))) do out[#out + 1] = c end
    prose = {}
  end
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%s*```") then
      flush()
      fenced = not fenced
    elseif fenced then
      local w = line:gsub("^%s*hypd call%s+", ""):gsub("%s#.*$", "")
      for _, c in ipairs(hints.extract(w, true)) do out[#out + 1] = c end
    else
      prose[#prose + 1] = line
    end
  end
  flush()
  return out
end

return M
