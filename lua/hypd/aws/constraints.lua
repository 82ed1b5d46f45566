-- hypd.aws.constraints: the members' constraints of a generated model
-- (enum, min, max, pattern: mk/aws_models.py keeps them), checked the way
-- AWS's services check a request before they act on it. One checker for
-- both sides: hypd's client refuses a playbook's mistake before it sends
-- (hypd.aws.protocol), and the sandbox refuses what AWS refuses, before any
-- handler runs (sandbox.codec).
--
--   local found = constraints.check(model, "CreateClusterRequest", input, paths, { required = true })
--   -- found = { { path = "nodeRecovery", value = "Sometimes",
--   --             rule = "Member must satisfy enum value set: [Automatic, None]",
--   --             kind = "enum", limit = { "Automatic", "None" },
--   --             shape = "ClusterNodeRecovery" (a scalar's limits entry) }, ... }
--   -- kind: enum | min_length | max_length | min_value | max_value | pattern
--   -- | items (a list's scalar items) | keys | values (a map's) | required;
--   -- limit: the set, the number or the pattern (items/keys/values: the
--   -- inner rules' { kind, limit } list)
--
-- opts.required: a required member that is absent is reported in the same
-- list, in member order, as AWS's Coral services do ("Value null at
-- 'clusterName' failed to satisfy constraint: Member must not be null",
-- kind "required", no value). Without it the caller checks required
-- members itself (hypd's client does, before any constraint).
--
-- A sensitive member (the model's "sensitive" shapes: passwords, secrets,
-- tokens; and whatever sits inside a sensitive list, map or structure) is
-- reported with sensitive = true and no value: AWS writes "Value at 'x'
-- failed to satisfy constraint: ...", never the value.
--
-- paths = { field = function(path, member) -> path, item = function(path, i)
-- -> path } names members as the caller reports them (AWS's
-- 'instanceGroups.1.member.instanceCount', or the client's
-- 'InstanceGroups[1].InstanceCount'); member is the structure member
-- table ({ "Name", head, traits... }). The rules are in AWS's words:
--   Member must satisfy enum value set: [A, B]
--   Member must have length less than or equal to 63   (strings, blobs, lists, maps)
--   Member must have value greater than or equal to 1  (numbers)
--   Member must satisfy regular expression pattern: P
--   Member must satisfy constraint: [rule, ...]        (a list's scalar items)
--   Map keys must satisfy constraint: [rule, ...]      (and Map value ...)
--
-- Patterns are Java regular expressions matched against the whole value.
-- Those hypd.regex cannot express (Unicode classes and escapes, lookaround,
-- possessive quantifiers, class intersections, ...) are skipped, never
-- refused on: pattern_support(p) says which, unsupported_patterns(model)
-- lists a model's. A value outside ASCII is not checked against a pattern
-- that counts characters ({m,n}): hypd.regex counts bytes.
local regex = require "hypd.regex"
local json = require "hypd.json"
local S = require "hypd.aws.shape"

local M = {}

-- the protocols whose services validate requests by the model (S3's
-- REST-XML answers with its own per-parameter errors, not by the model:
-- sandbox._codec_s3_rules says which of its constraints S3 enforces)
local CHECKED = { json = true, ["rest-json"] = true, query = true, ec2 = true }

-- enums a service checks against its own catalog instead, with its own
-- error (EC2: "InvalidInstanceType: The following supplied instance types
-- do not exist"), by the model's endpointPrefix and the limits entry
local CATALOG = { ec2 = { InstanceType = true } }

-- applies(model) -> whether the model's service checks these constraints
function M.applies(model)
  return CHECKED[model.metadata.protocol] == true
end

-- translate(p) -> an ECMAScript source hypd.regex reads, anchored to the
-- whole value as Java's matches() is; or nil, why
local SIMPLE = { t = "\t", n = "\n", r = "\r", f = "\f" }
local CLASS = { d = true, D = true, w = true, W = true, s = true, S = true }
local function translate(p)
  if p:find("[\128-\255]") then return nil, "a character outside ASCII" end
  local out, i, in_class = {}, 1, false
  while i <= #p do
    local c = p:sub(i, i)
    if c == "\\" then
      local e = p:sub(i + 1, i + 1)
      if SIMPLE[e] then
        out[#out + 1] = SIMPLE[e]
        i = i + 2
      elseif CLASS[e] then
        out[#out + 1] = "\\" .. e
        i = i + 2
      elseif e == "u" then
        local hex = p:sub(i + 2, i + 5)
        local n = hex:match("^%x%x%x%x$") and tonumber(hex, 16)
        if not n or n > 127 then return nil, "the escape \\u" .. hex end
        local ch = string.char(n)
        out[#out + 1] = ch:match("[%w%c ]") and ch or "\\" .. ch
        i = i + 6
      elseif e ~= "" and (e:match("%p") or e == " ") then
        out[#out + 1] = "\\" .. e
        i = i + 2
      else
        return nil, "the escape \\" .. e
      end
    else
      if in_class and (c == "[" or p:sub(i, i + 1) == "&&") then return nil, "a class inside a class" end
      if c == "[" and not in_class then
        in_class = true
        out[#out + 1] = c
        -- a "]" or "^]" right after "[" is a literal
        local lead = p:match("^%^?%]", i + 1)
        if lead then
          out[#out + 1] = lead:sub(1, -2) .. "\\]"
          i = i + #lead
        end
      elseif c == "]" and in_class then
        in_class = false
        out[#out + 1] = c
      elseif not in_class and (c == "*" or c == "+" or c == "?" or c == "}") and p:sub(i + 1, i + 1) == "+" then
        return nil, "a possessive quantifier"
      else
        out[#out + 1] = c
      end
      i = i + 1
    end
  end
  return "^(?:" .. table.concat(out) .. ")$"
end

local compiled = {} -- Java pattern -> compiled re, or false with the reason in reasons
local reasons = {}

local function compile(p)
  local re = compiled[p]
  if re == nil then
    local src, why = translate(p)
    local err
    if src then re, err = regex.compile(src) end
    if not re then
      re, reasons[p] = false, why or err
    end
    compiled[p] = re
  end
  return re or nil
end

-- pattern_support(p) -> true, or false, why (the pattern is skipped)
function M.pattern_support(p)
  if compile(p) then return true end
  return false, reasons[p]
end

-- unsupported_patterns(model) -> sorted list of "Shape: pattern (why)" of
-- the patterns in model.limits that are skipped
function M.unsupported_patterns(model)
  local out = {}
  for name, lim in pairs(model.limits or {}) do
    if lim.pattern and not compile(lim.pattern) then
      out[#out + 1] = name .. ": " .. lim.pattern .. " (" .. tostring(reasons[lim.pattern]) .. ")"
    end
  end
  table.sort(out)
  return out
end

local function number_text(n)
  if math.type(n) == "float" and n == math.floor(n) and math.abs(n) < 2 ^ 53 then
    return string.format("%d", math.tointeger(n))
  end
  return tostring(n)
end
M.number_text = number_text

-- length(v) -> the number of characters of a string (bytes when it is not
-- UTF-8), of entries of a list or map
local function length(v)
  if type(v) == "string" then return utf8.len(v) or #v end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  return n
end

local function rule(out, text, kind, limit) out[#out + 1] = { text = text, kind = kind, limit = limit } end

-- rules(lim, v, kind) -> the rules value v of kind breaks (in AWS's order),
-- each { text, kind, limit }
local function rules(lim, v, kind, out)
  out = out or {}
  if not lim then return out end
  if kind == "number" then
    if type(v) ~= "number" then return out end
    if lim.min and v < lim.min then
      rule(out, "Member must have value greater than or equal to " .. number_text(lim.min), "min_value", lim.min)
    end
    if lim.max and v > lim.max then
      rule(out, "Member must have value less than or equal to " .. number_text(lim.max), "max_value", lim.max)
    end
    return out
  end
  if kind == "string" and type(v) ~= "string" then return out end
  local n = length(v)
  if lim.max and n > lim.max then
    rule(out, "Member must have length less than or equal to " .. number_text(lim.max), "max_length", lim.max)
  end
  if lim.min and n < lim.min then
    rule(out, "Member must have length greater than or equal to " .. number_text(lim.min), "min_length", lim.min)
  end
  if kind ~= "string" then return out end
  if lim.enum then
    local found = false
    for _, e in ipairs(lim.enum) do
      if e == v then found = true break end
    end
    if not found then
      rule(out, "Member must satisfy enum value set: [" .. table.concat(lim.enum, ", ") .. "]", "enum", lim.enum)
    end
  end
  if lim.pattern then
    local re = compile(lim.pattern)
    local counts = lim.pattern:find("{%d") ~= nil
    if re and not (counts and v:find("[\128-\255]")) and not re:test(v) then
      rule(out, "Member must satisfy regular expression pattern: " .. lim.pattern, "pattern", lim.pattern)
    end
  end
  return out
end

local SCALAR_KIND = { string = "string", blob = "blob", integer = "number", long = "number", double = "number",
  float = "number" }

-- show(v) -> a value as AWS prints it in a message
local function show(v)
  if type(v) ~= "table" then
    local s = type(v) == "number" and number_text(v) or tostring(v)
    return #s > 200 and s:sub(1, 200) .. "..." or s
  end
  local parts = {}
  if json.is_array(v) or v[1] ~= nil then
    for i, x in ipairs(v) do parts[i] = show(x) end
  else
    for k, x in pairs(v) do parts[#parts + 1] = tostring(k) .. "=" .. show(x) end
    table.sort(parts)
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return "[" .. table.concat(parts, ", ") .. "]"
end
M.show = show

local MAX_FOUND = 20

-- add(found, path, v, r, hidden): one failure; a hidden (sensitive) value
-- is not kept
local function add(found, path, v, r, hidden, shape)
  if #found < MAX_FOUND then
    found[#found + 1] = { path = path, value = not hidden and show(v) or nil, sensitive = hidden or nil,
      rule = r.text, kind = r.kind, limit = r.limit, shape = shape }
  end
end

local NULL = { text = "Member must not be null", kind = "required" }

-- gather(into, seen, broken): the distinct rules of a collection's items
local function gather(into, seen, broken)
  for _, r in ipairs(broken) do
    if not seen[r.text] then seen[r.text] = true; into[#into + 1] = r end
  end
end

-- wrapped(head, broken, kind) -> one rule for a collection's broken items
local function wrapped(head, broken, kind)
  local texts, inner = {}, {}
  for i, r in ipairs(broken) do texts[i], inner[i] = r.text, { kind = r.kind, limit = r.limit } end
  return { text = head .. ": [" .. table.concat(texts, ", ") .. "]", kind = kind, limit = inner }
end

local walk

-- limits_of(model, traits) -> the constraints a scalar reference names, or nil
local function limits_of(model, traits)
  return traits.c and model.limits and model.limits[traits.c] or nil
end

-- scalar_rules(model, head, traits, v) -> the rules a scalar value breaks
local function scalar_rules(model, head, traits, v)
  local kind = SCALAR_KIND[head]
  local lim = limits_of(model, traits)
  if not kind or not lim then return {} end
  local catalog = CATALOG[model.metadata.endpointPrefix]
  if lim.enum and catalog and catalog[traits.c] then
    lim = { min = lim.min, max = lim.max, pattern = lim.pattern }
  end
  return rules(lim, v, kind)
end

-- sensitive(model, traits) -> whether a scalar reference's values are secret
local function sensitive(model, traits)
  local lim = limits_of(model, traits)
  return lim ~= nil and lim.sensitive == true
end

-- W = { model, paths, found, required }: one walk's state

-- value(W, head, traits, v, path, hidden): one member's value
local function value(W, head, traits, v, path, hidden)
  if not S.present(v) then return end
  if S.SCALAR[head] then
    hidden = hidden or sensitive(W.model, traits)
    for _, r in ipairs(scalar_rules(W.model, head, traits, v)) do add(W.found, path, v, r, hidden, traits.c) end
    return
  end
  walk(W, head, v, path, hidden)
end

walk = function(W, head, v, path, hidden)
  local model, paths, found = W.model, W.paths, W.found
  if type(v) ~= "table" or #found >= MAX_FOUND then return end
  local typ, shape = S.kind(model, head)
  hidden = hidden or (shape and shape.sensitive == true)
  if typ == "structure" then
    local idx = S.index(shape)
    local req = {}
    if W.required then
      for _, name in ipairs(shape.required or {}) do req[name] = true end
    end
    for _, m in ipairs(shape[2]) do
      local x = v[m[1]]
      if idx[m[1]] and S.present(x) then
        value(W, m[2], m, x, paths.field(path, m), hidden)
      elseif req[m[1]] and #found < MAX_FOUND then
        found[#found + 1] = { path = paths.field(path, m), rule = NULL.text, kind = NULL.kind }
      end
    end
  elseif typ == "list" or typ == "map" then
    for _, r in ipairs(rules(shape, v, "collection")) do add(found, path, v, r, hidden) end
    if typ == "list" then
      local item, t = S.ref(shape[2])
      if S.SCALAR[item] then
        local broken, seen = {}, {}
        for _, x in ipairs(v) do gather(broken, seen, scalar_rules(model, item, t, x)) end
        if #broken > 0 then
          add(found, path, v, wrapped("Member must satisfy constraint", broken, "items"),
            hidden or sensitive(model, t))
        end
      else
        for i, x in ipairs(v) do walk(W, item, x, paths.item(path, i), hidden) end
      end
    else
      local key, kt = S.ref(shape[2])
      local val, vt = S.ref(shape[3])
      local kbroken, vbroken, kseen, vseen = {}, {}, {}, {}
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      for _, k in ipairs(keys) do
        gather(kbroken, kseen, scalar_rules(model, key, kt, k))
        local x = v[k]
        if S.SCALAR[val] then
          gather(vbroken, vseen, S.present(x) and scalar_rules(model, val, vt, x) or {})
        else
          walk(W, val, x, paths.field(path, { k }), hidden)
        end
      end
      -- a map is shown whole: a secret key or value hides all of it
      local secret = hidden or sensitive(model, kt) or S.SCALAR[val] and sensitive(model, vt)
      if #kbroken > 0 then add(found, path, v, wrapped("Map keys must satisfy constraint", kbroken, "keys"), secret) end
      if #vbroken > 0 then
        add(found, path, v, wrapped("Map value must satisfy constraint", vbroken, "values"), secret)
      end
    end
  end
end

-- check(model, input_shape, input, paths, opts) -> the constraints input
-- breaks (a list, empty when none; at most 20), in model order (opts:
-- { required = true } adds the absent required members; { all = true }
-- checks a model applies() leaves out, for a caller that picks what its
-- service enforces: sandbox._codec_s3_rules). A scalar's failure names its
-- limits entry as shape.
function M.check(model, head, input, paths, opts)
  local found = {}
  if head and (M.applies(model) or opts and opts.all) and (model.limits or opts and opts.required) then
    walk({ model = model, paths = paths, found = found, required = opts and opts.required }, head, input, "")
  end
  return found
end

-- coral(found) -> "N validation error(s) detected: Value 'v' at 'p' failed
-- to satisfy constraint: rule; ...", AWS's message for a list of failures
-- ("Value null at" for an absent member, "Value at" for a sensitive one)
function M.coral(found)
  local parts = {}
  for i, f in ipairs(found) do
    local v = f.kind == "required" and "null " or f.value and "'" .. f.value .. "' " or ""
    parts[i] = string.format("Value %sat '%s' failed to satisfy constraint: %s", v, f.path, f.rule)
  end
  return string.format("%d validation error%s detected: %s", #parts, #parts == 1 and "" or "s",
    table.concat(parts, "; "))
end

return M
