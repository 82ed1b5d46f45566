-- hypd.cli._tools_markdown: the tool reference (docs/tools.md) that
-- `hypd tools --markdown` prints, generated from the registry: for every
-- tool its name, kind, summary, description, parameters (type, required,
-- default, allowed values, description), the AWS actions and Kubernetes
-- verbs it declares, its status tool and the tools it calls.
--
--   render(defs) -> text: defs are registry definitions (hypd.tool.registry
--   list()); the output depends only on them: tools sorted by name,
--   parameters and their fields sorted by name, so the same registry gives
--   the same bytes every time.
local json = require "hypd.json"
local tool = require "hypd.tool.registry"

local M = {}

-- text(s) -> s for a Markdown table cell or line: one line, pipes escaped,
-- and outside code spans < > written as entities (a <tag> would be read as
-- HTML) and * escaped (ml.p4*, ml.p5* would be read as emphasis)
local function text(s)
  s = tostring(s or ""):gsub("%s*\n%s*", " "):gsub("|", "\\|")
  local parts, i = {}, 0
  for piece in (s .. "`"):gmatch("([^`]*)`") do
    i = i + 1
    parts[i] = i % 2 == 1 and piece:gsub("<", "&lt;"):gsub(">", "&gt;"):gsub("%*", "\\*") or piece
  end
  return table.concat(parts, "`")
end

-- code(s) -> s as a code span that survives a table cell
local function code(s)
  s = tostring(s):gsub("|", "\\|")
  local fence = s:find("`", 1, true) and "``" or "`"
  return fence .. s .. fence
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- type_of(schema) -> "string", "integer or object", "array of string", ...
local function type_of(s)
  local ts = type(s.type) == "table" and s.type or { s.type }
  local names = {}
  for i, ty in ipairs(ts) do
    names[i] = tostring(ty)
    if ty == "array" and s.items then names[i] = "array of " .. type_of(s.items) end
  end
  return table.concat(names, " or ")
end

-- encoded(v) -> v as compact JSON (a default, an enum value)
local function encoded(v)
  return json.encode(v)
end

-- allowed(s) -> what values a parameter takes beyond its type: the enum,
-- the range, the length and the pattern (with its words when it has them)
local function allowed(s)
  local out = {}
  local enum = s.enum or (s.items and s.items.enum)
  if enum then
    local vs = {}
    for i, v in ipairs(enum) do vs[i] = code(encoded(v)) end
    out[#out + 1] = "one of " .. table.concat(vs, ", ")
  end
  if s.minimum and s.maximum then
    out[#out + 1] = s.minimum .. " to " .. s.maximum
  elseif s.minimum then
    out[#out + 1] = ">= " .. s.minimum
  elseif s.maximum then
    out[#out + 1] = "<= " .. s.maximum
  end
  if s.minLength then out[#out + 1] = "at least " .. s.minLength .. " characters" end
  if s.maxLength and s.maxLength ~= tool.MAX_STRING then out[#out + 1] = "at most " .. s.maxLength .. " characters" end
  local p = s.pattern or (s.items and s.items.pattern)
  if p then
    local help = s["x-hypd-pattern-help"] or (s.items and s.items["x-hypd-pattern-help"])
    out[#out + 1] = code(p) .. (help and " (" .. text(help) .. ")" or "")
  end
  return table.concat(out, "; ")
end

-- rows(out, name, schema, required): a parameter's row, then one per field
-- of an object (name.field) and of an array's objects (name[].field)
local function rows(out, name, s, required)
  local desc = text(s.description)
  if s.writeOnly then desc = (desc ~= "" and desc .. " " or "") .. "Secret: never stored or logged." end
  if s["x-hypd-fixed"] then desc = (desc ~= "" and desc .. " " or "") .. "Cannot change once created." end
  local default = s.default ~= nil and code(encoded(s.default)) or ""
  out[#out + 1] = string.format("| %s | %s | %s | %s | %s | %s |", code(name), type_of(s), required and "yes" or "",
    default, allowed(s), desc)
  local function fields(prefix, obj)
    local req = {}
    for _, k in ipairs(obj.required or {}) do req[k] = true end
    for _, k in ipairs(sorted_keys(obj.properties)) do rows(out, prefix .. "." .. k, obj.properties[k], req[k]) end
  end
  if s.properties then fields(name, s) end
  if s.items and s.items.properties then fields(name .. "[]", s.items) end
end

local function list_of(names, as_code)
  local out = {}
  for i, n in ipairs(names) do out[i] = as_code and code(n) or n end
  return table.concat(out, ", ")
end

local function section(out, def)
  local d = tool.describe(def)
  out[#out + 1] = "## " .. d.name
  out[#out + 1] = ""
  local staged = d.staged and ", staged (answers with an operation)" or ""
  out[#out + 1] = string.format("Kind: **%s** (scope %s)%s. %s", d.kind, d.scope, staged, text(d.summary) ..
    (d.summary:match("[.:]$") and "" or "."))
  out[#out + 1] = ""
  out[#out + 1] = text(d.description)
  out[#out + 1] = ""
  local schema = d.input_schema
  local props = sorted_keys(schema.properties)
  if #props == 0 then
    out[#out + 1] = "Parameters: none."
  else
    local req = {}
    for _, k in ipairs(schema.required or {}) do req[k] = true end
    out[#out + 1] = "| parameter | type | required | default | allowed | description |"
    out[#out + 1] = "|---|---|---|---|---|---|"
    for _, k in ipairs(props) do rows(out, k, schema.properties[k], req[k]) end
  end
  out[#out + 1] = ""
  if d.aws and #d.aws > 0 then out[#out + 1] = "- AWS actions: " .. list_of(d.aws, true) end
  if d.k8s and #d.k8s > 0 then out[#out + 1] = "- Kubernetes verbs: " .. list_of(d.k8s, true) end
  if d.status_tool then out[#out + 1] = "- Status tool: [" .. d.status_tool .. "](#" .. d.status_tool .. ")" end
  if def.calls and #def.calls > 0 then
    local links = {}
    for i, n in ipairs(def.calls) do links[i] = "[" .. n .. "](#" .. n .. ")" end
    out[#out + 1] = "- Calls: " .. table.concat(links, ", ")
  end
  if #d.toolsets > 0 then out[#out + 1] = "- MCP toolsets: " .. list_of(d.toolsets, true) end
  if d.source ~= "built-in" then out[#out + 1] = "- Source: " .. text(d.source) end
  if out[#out] ~= "" then out[#out + 1] = "" end
end

function M.render(defs)
  local list = {}
  for i, d in ipairs(defs) do list[i] = d end
  table.sort(list, function(a, b) return a.name < b.name end)
  local out = {
    "# Tool reference",
    "",
    "Generated from the tool registry by `build/hypd tools --markdown > docs/tools.md` (`make docs`);",
    "tests/lua/docs_tools_test.lua fails when this file differs from what the registry says. Edit the",
    "tools' definitions (lua/workflows/), not this file.",
    "",
    "Kinds: a **read** tool only reads (scope read); a **mutating** one creates or changes (scope operate);",
    "a **destructive** one deletes (scope admin). A staged tool answers with an operation",
    "`{operation_id, status, status_tool}`; `plan = true` runs its read half and changes nothing.",
    "A string parameter without a stated length is at most " .. tool.MAX_STRING .. " characters.",
    "",
    "| tool | kind | summary |",
    "|---|---|---|",
  }
  for _, d in ipairs(list) do
    out[#out + 1] = string.format("| [%s](#%s) | %s | %s |", d.name, d.name, d.kind, text(d.summary))
  end
  out[#out + 1] = ""
  for _, d in ipairs(list) do section(out, d) end
  while out[#out] == "" do out[#out] = nil end
  return table.concat(out, "\n") .. "\n"
end

return M
