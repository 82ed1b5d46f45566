-- The sandbox's CloudFormation templates: parsing (YAML or JSON, the short
-- tags !Ref, !Sub, !GetAtt ... read as their long forms), parameters
-- (defaults, AllowedValues, AllowedPattern, the VPC and subnet types checked
-- against EC2, SSM parameter types resolved through SSM), the pseudo
-- parameters, the intrinsic functions a stack of hypd's kind uses (Ref,
-- Fn::GetAtt, Fn::Sub, Fn::Base64, Fn::Join, Fn::Select, Fn::Split,
-- Fn::GetAZs) and the order resources are made in (their Ref, GetAtt and
-- Sub references and DependsOn). Conditions, Mappings and Transform are not
-- simulated: a template with them is refused with a ValidationError saying so.
local json = require "hypd.json"
local sys = require "hypd.sys"
local yaml = require "hypd.yaml"

local M = {}
local NOVALUE = {} -- what Ref AWS::NoValue resolves to: the member is dropped

local SHORT = { ["!Ref"] = "Ref", ["!Condition"] = "Condition" }
for _, f in ipairs { "Base64", "Cidr", "FindInMap", "GetAZs", "ImportValue", "Join", "Select", "Split", "Sub",
  "Transform", "And", "Equals", "If", "Not", "Or", "GetAtt", "Length", "ToJsonString" } do
  SHORT["!" .. f] = "Fn::" .. f
end
M.RESOLVED = { Ref = true, ["Fn::GetAtt"] = true, ["Fn::Sub"] = true, ["Fn::Base64"] = true, ["Fn::Join"] = true,
  ["Fn::Select"] = true, ["Fn::Split"] = true, ["Fn::GetAZs"] = true }

local function fail(ctx, msg) ctx.error("ValidationError", msg, 400) end

-- long_form(v) -> v with every {["!Tag"] = x} as CloudFormation's long form
local function long_form(v)
  if type(v) ~= "table" then return v end
  if not json.is_array(v) then
    local k, inner = next(v)
    if k and next(v, k) == nil and SHORT[k] then
      inner = long_form(inner)
      if k == "!GetAtt" and type(inner) == "string" then
        local res, attr = inner:match("^([^.]+)%.(.+)$")
        inner = json.array { res or inner, attr or "" }
      end
      return json.object { [SHORT[k]] = inner }
    end
  end
  local out = json.is_array(v) and json.array() or json.object()
  for k, x in pairs(v) do out[k] = long_form(x) end
  return out
end

-- parse(ctx, body) -> the template (long forms), or raises ValidationError
function M.parse(ctx, body)
  if type(body) ~= "string" or body == "" then fail(ctx, "Either Template URL or Template Body must be specified.") end
  local doc, err = yaml.decode(body, { tags = true })
  if not doc then fail(ctx, "Template format error: " .. tostring(err and err.message or err)) end
  doc = long_form(doc)
  if type(doc) ~= "table" or json.is_array(doc) then fail(ctx, "Template format error: not a JSON or YAML object") end
  if type(doc.Resources) ~= "table" or json.is_array(doc.Resources) or next(doc.Resources) == nil then
    fail(ctx, "Template format error: At least one Resources member must be defined.")
  end
  for _, k in ipairs { "Conditions", "Mappings", "Transform", "Rules" } do
    if doc[k] ~= nil then fail(ctx, "Template format error: the hypd sandbox does not simulate " .. k) end
  end
  for name, r in pairs(doc.Resources) do
    if type(r) ~= "table" or type(r.Type) ~= "string" then
      fail(ctx, "Template format error: [/Resources/" .. name .. "] Every Resources object must contain a Type member.")
    end
    if r.Condition ~= nil then fail(ctx, "Template format error: the hypd sandbox does not simulate Conditions") end
  end
  return doc
end

-- the parameter types whose values name an existing EC2 resource
local EC2_TYPES = { ["AWS::EC2::VPC::Id"] = "vpc", ["AWS::EC2::Subnet::Id"] = "subnet",
  ["AWS::EC2::SecurityGroup::Id"] = "sg" }

-- parameters(ctx, tpl, given, invoke) -> values {name = resolved}, the
-- stack's Parameters list; raises ValidationError as CloudFormation does
function M.parameters(ctx, tpl, given, invoke)
  local decl = tpl.Parameters or {}
  local values, listed, supplied = {}, json.array(), {}
  for _, p in ipairs(given or {}) do
    if decl[p.ParameterKey] == nil then
      fail(ctx, "Parameters: [" .. tostring(p.ParameterKey) .. "] do not exist in the template")
    end
    supplied[p.ParameterKey] = p.ParameterValue
  end
  local names, missing = {}, {}
  for name in pairs(decl) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local d = decl[name]
    local v = supplied[name]
    if v == nil and d.Default ~= nil then v = tostring(d.Default) end
    if v == nil then
      missing[#missing + 1] = name
    else
      if d.AllowedValues then
        local ok = false
        for _, a in ipairs(d.AllowedValues) do ok = ok or tostring(a) == v end
        if not ok then fail(ctx, "Parameter '" .. name .. "' must be one of AllowedValues") end
      end
      if d.AllowedPattern then
        local re = require("hypd.regex").compile("^(?:" .. d.AllowedPattern .. ")$")
        if not re or not re:test(v) then
          fail(ctx, "Parameter '" .. name .. "' must match pattern " .. d.AllowedPattern)
        end
      end
      local resolved = v
      local kind = EC2_TYPES[d.Type]
      if kind and not ctx:view("ec2"):get(kind, v) then
        fail(ctx, "Parameter value " .. v .. " for parameter name " .. name .. " does not exist. Rollback requested " ..
          "by user.")
      end
      if tostring(d.Type):match("^AWS::SSM::Parameter::Value<") then
        local out = invoke(ctx, "ssm", "GetParameter", { Name = v })
        if not out then fail(ctx, "Unable to fetch parameters [" .. v .. "] from parameter store for this account.") end
        resolved = out.Parameter.Value
      end
      values[name] = resolved
      listed[#listed + 1] = { ParameterKey = name, ParameterValue = v,
        ResolvedValue = resolved ~= v and resolved or nil }
    end
  end
  if #missing > 0 then fail(ctx, "Parameters: [" .. table.concat(missing, ", ") .. "] must have values") end
  return values, listed
end

-- refs(v, out) -> out with the names v refers to (Ref, GetAtt, ${} in Sub)
local function refs(v, out)
  if type(v) ~= "table" then return out end
  if v.Ref and type(v.Ref) == "string" then out[v.Ref] = true end
  local ga = v["Fn::GetAtt"]
  if type(ga) == "table" and type(ga[1]) == "string" then out[ga[1]] = true end
  local sub = v["Fn::Sub"]
  local text = type(sub) == "string" and sub or type(sub) == "table" and sub[1]
  if type(text) == "string" then
    local local_vars = type(sub) == "table" and sub[2] or {}
    for name in text:gmatch("%${([^!}][^}]*)}") do
      local base = name:match("^([^.]+)")
      if local_vars[name] == nil then out[base] = true end
    end
  end
  for _, x in pairs(v) do refs(x, out) end
  return out
end

-- order(ctx, tpl) -> the logical ids in creation order (dependencies first,
-- then by name); raises ValidationError for an unknown reference or a cycle
function M.order(ctx, tpl)
  local res, params = tpl.Resources, tpl.Parameters or {}
  local deps, names = {}, {}
  for name, r in pairs(res) do
    names[#names + 1] = name
    local d = {}
    for ref in pairs(refs(r.Properties or {}, {})) do
      if res[ref] then
        d[ref] = true
      elseif params[ref] == nil and not ref:match("^AWS::") then
        fail(ctx, "Template format error: Unresolved resource dependencies [" .. ref .. "] in the Resources block " ..
          "of the template")
      end
    end
    local on = r.DependsOn
    for _, x in ipairs(type(on) == "string" and { on } or on or {}) do
      if not res[x] then
        fail(ctx, "Template format error: Unresolved resource dependencies [" .. tostring(x) .. "] in the " ..
          "Resources block of the template")
      end
      d[x] = true
    end
    deps[name] = d
  end
  table.sort(names)
  local out, done, visiting = {}, {}, {}
  local function visit(n)
    if done[n] then return end
    if visiting[n] then fail(ctx, "Circular dependency between resources: [" .. n .. "]") end
    visiting[n] = true
    local ds = {}
    for d in pairs(deps[n]) do ds[#ds + 1] = d end
    table.sort(ds)
    for _, d in ipairs(ds) do visit(d) end
    visiting[n], done[n] = nil, true
    out[#out + 1] = n
  end
  for _, n in ipairs(names) do visit(n) end
  return out
end

-- resolve(v, env) -> v with its intrinsic functions evaluated, or nil, why.
-- env: params, pseudo (AWS::Region ...), resources {logical = {physical,
-- attrs}}, zones (for Fn::GetAZs). AWS::NoValue removes the member.
function M.resolve(v, env)
  local function ref_of(name)
    if env.pseudo[name] ~= nil then return env.pseudo[name] end
    if env.params[name] ~= nil then return env.params[name] end
    local r = env.resources[name]
    if r and r.physical then return r.physical end
    error({ why = "the reference " .. name .. " is not resolved" }, 0)
  end
  local function att_of(res, attr)
    local r = env.resources[res]
    local a = r and r.attrs and r.attrs[attr]
    if a == nil then error({ why = "Template error: resource " .. res .. " does not support attribute type " ..
      attr .. " in Fn::GetAtt" }, 0) end
    return a
  end
  local function go(x)
    if type(x) ~= "table" then return x end
    if not json.is_array(x) then
      local k = next(x)
      if k and next(x, k) == nil and (k == "Ref" or k:match("^Fn::")) then
        local a = x[k]
        if k == "Ref" then
          if a == "AWS::NoValue" then return NOVALUE end
          return ref_of(a)
        elseif k == "Fn::GetAtt" then
          return att_of(a[1], a[2])
        elseif k == "Fn::Sub" then
          local text, vars = a, {}
          if type(a) == "table" then text, vars = a[1], go(a[2] or {}) end
          return (tostring(text):gsub("%${([^}]*)}", function(name)
            if name:sub(1, 1) == "!" then return "${" .. name:sub(2) .. "}" end
            if vars[name] ~= nil then return tostring(vars[name]) end
            local res, attr = name:match("^([^.]+)%.(.+)$")
            if res and not env.pseudo[name] then return tostring(att_of(res, attr)) end
            return tostring(ref_of(name))
          end))
        elseif k == "Fn::Base64" then
          return sys.b64encode(tostring(go(a)))
        elseif k == "Fn::Join" then
          local parts = {}
          for i, p in ipairs(go(a[2])) do parts[i] = tostring(p) end
          return table.concat(parts, a[1])
        elseif k == "Fn::Select" then
          local list = go(a[2])
          return list[(math.tointeger(tonumber(go(a[1]))) or -1) + 1]
        elseif k == "Fn::Split" then
          local out, s, sep = json.array(), tostring(go(a[2])), a[1]
          local i = 1
          while true do
            local j = s:find(sep, i, true)
            if not j then out[#out + 1] = s:sub(i); break end
            out[#out + 1] = s:sub(i, j - 1)
            i = j + #sep
          end
          return out
        elseif k == "Fn::GetAZs" then
          return env.zones
        end
        error({ why = "Template error: the hypd sandbox does not resolve " .. k }, 0)
      end
    end
    local out = json.is_array(x) and json.array() or json.object()
    local n = 0
    for key, val in pairs(x) do
      local r = go(val)
      if r ~= NOVALUE then
        if json.is_array(x) then n = n + 1; out[n] = r else out[key] = r end
      end
    end
    return out
  end
  local ok, out = pcall(go, v)
  if ok then return out end
  if type(out) == "table" and out.why then return nil, out.why end
  error(out, 0)
end

-- capabilities(tpl) -> the capability the template needs ("CAPABILITY_IAM",
-- "CAPABILITY_NAMED_IAM") or nil
function M.capability(tpl)
  local need
  for _, r in pairs(tpl.Resources) do
    if r.Type:match("^AWS::IAM::") then
      need = need or "CAPABILITY_IAM"
      local p = r.Properties or {}
      if p.RoleName or p.InstanceProfileName or p.ManagedPolicyName or p.UserName or p.GroupName then
        need = "CAPABILITY_NAMED_IAM"
      end
    end
  end
  return need
end

return M
