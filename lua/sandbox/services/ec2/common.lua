-- sandbox.services.ec2.common: what every EC2 resource family shares:
-- record kinds and their id prefixes, AWS NotFound errors, tags and
-- TagSpecifications, Filter matching (wildcards, tag:<key>, tag-key,
-- tag-value) and the Describe* skeleton (ids first, then filters).
local json = require "hypd.json"

local M = {}

-- kind -> { prefix, NotFound code, message noun, DescribeTags resource type }
M.KINDS = {
  vpc = { prefix = "vpc-", code = "InvalidVpcID.NotFound", noun = "vpc ID", rtype = "vpc" },
  subnet = { prefix = "subnet-", code = "InvalidSubnetID.NotFound", noun = "subnet ID", rtype = "subnet" },
  igw = { prefix = "igw-", code = "InvalidInternetGatewayID.NotFound", noun = "internetGateway ID",
          rtype = "internet-gateway" },
  rtb = { prefix = "rtb-", code = "InvalidRouteTableID.NotFound", noun = "routeTable ID", rtype = "route-table" },
  sg = { prefix = "sg-", code = "InvalidGroup.NotFound", noun = "security group", rtype = "security-group" },
  address = { prefix = "eipalloc-", code = "InvalidAllocationID.NotFound", noun = "allocation ID",
              rtype = "elastic-ip" },
  natgw = { prefix = "nat-", code = "NatGatewayNotFound", rtype = "natgateway" },
  vpce = { prefix = "vpce-", code = "InvalidVpcEndpointId.NotFound", noun = "Vpc Endpoint Id",
           rtype = "vpc-endpoint" },
}
M.KIND_ORDER = { "vpc", "subnet", "igw", "rtb", "sg", "address", "natgw", "vpce" }

-- not_found(ctx, kind, id): raises the kind's AWS NotFound error
function M.not_found(ctx, kind, id)
  local k = M.KINDS[kind]
  if kind == "natgw" then ctx.error(k.code, "The Nat Gateway " .. tostring(id) .. " was not found") end
  ctx.error(k.code, string.format("The %s '%s' does not exist", k.noun, tostring(id)))
end

-- need(ctx, kind, id) -> the record, or raises NotFound (Malformed for a bad prefix)
function M.need(ctx, kind, id)
  local rec = ctx.state:get(kind, id)
  if rec and not rec._gone then return rec end
  local k = M.KINDS[kind]
  if type(id) == "string" and id ~= "" and id:sub(1, #k.prefix) ~= k.prefix and kind ~= "sg" and kind ~= "natgw" then
    local what = k.code:match("^(.-)%.NotFound$")
    ctx.error(what .. ".Malformed", string.format('Invalid id: "%s" (expecting "%s...")', id, k.prefix))
  end
  M.not_found(ctx, kind, id)
end

-- kind_of(id) -> the kind a resource id names, or nil
function M.kind_of(id)
  if type(id) ~= "string" then return nil end
  for _, kind in ipairs(M.KIND_ORDER) do
    local p = M.KINDS[kind].prefix
    if id:sub(1, #p) == p then return kind end
  end
end

-- required(ctx, input, name): MissingParameter when input[name] is absent
function M.required(ctx, input, name, wire)
  local v = input[name]
  if v == nil or v == "" then
    ctx.error("MissingParameter", "The request must contain the parameter " .. (wire or name))
  end
  return v
end

-- public(rec) -> a copy without the internal "_" fields (and Tags only when set)
function M.public(rec)
  local out = {}
  for k, v in pairs(rec) do
    if type(k) ~= "string" or k:sub(1, 1) ~= "_" then out[k] = v end
  end
  if out.Tags and #out.Tags == 0 then out.Tags = nil end
  return out
end

function M.array(t)
  local a = json.array()
  for i, v in ipairs(t or {}) do a[i] = v end
  return a
end

-- tags --------------------------------------------------------------------

local function check_tags(ctx, tags)
  for _, tag in ipairs(tags or {}) do
    if type(tag.Key) ~= "string" or tag.Key == "" then
      ctx.error("InvalidParameterValue", "Tag key cannot be empty")
    end
    if tag.Key:lower():sub(1, 4) == "aws:" then
      ctx.error("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use")
    end
    if #tag.Key > 128 then ctx.error("InvalidParameterValue", "Tag key exceeds the maximum length of 128 characters") end
    if tag.Value and #tag.Value > 256 then
      ctx.error("InvalidParameterValue", "Tag value exceeds the maximum length of 256 characters")
    end
  end
end

-- merge_tags(ctx, rec, tags): adds or overwrites tags on a record
function M.merge_tags(ctx, rec, tags)
  check_tags(ctx, tags)
  local list = M.array(rec.Tags)
  for _, tag in ipairs(tags or {}) do
    local found = false
    for _, old in ipairs(list) do
      if old.Key == tag.Key then old.Value, found = tag.Value or "", true end
    end
    if not found then list[#list + 1] = { Key = tag.Key, Value = tag.Value or "" } end
  end
  if #list > 50 then ctx.error("TagLimitExceeded", "The maximum number of tags per resource (50) has been reached.") end
  rec.Tags = list
end

-- spec_tags(ctx, input, rtype) -> the TagList for a create call's TagSpecifications
function M.spec_tags(ctx, input, rtype)
  local rec = { Tags = json.array() }
  for _, spec in ipairs(input.TagSpecifications or {}) do
    if spec.ResourceType ~= nil and spec.ResourceType ~= rtype then
      ctx.error("InvalidParameterValue", string.format("'%s' is not a valid taggable resource type for this operation.",
        tostring(spec.ResourceType)))
    end
    M.merge_tags(ctx, rec, spec.Tags)
  end
  return rec.Tags
end

function M.tag_value(rec, key)
  for _, tag in ipairs(rec.Tags or {}) do
    if tag.Key == key then return tag.Value end
  end
end

-- filters -----------------------------------------------------------------

local function glob(pattern)
  local p = pattern:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".")
  return "^" .. p .. "$"
end

local function value_matches(candidates, wanted)
  for _, w in ipairs(wanted or {}) do
    local pat = glob(tostring(w))
    for _, c in ipairs(candidates) do
      if tostring(c):match(pat) then return true end
    end
  end
  return false
end

local function as_list(v)
  if v == nil then return {} end
  if type(v) == "table" then return v end
  return { v }
end

-- matches(ctx, rec, filters, fields) -> true when the record passes every
-- filter. fields = { ["filter-name"] = function(rec) -> value or list }.
-- Unknown filter names raise InvalidParameterValue, as EC2 does.
function M.matches(ctx, rec, filters, fields)
  if not filters or #filters == 0 then return true end
  for _, filter in ipairs(filters) do
    local name = filter.Name
    local candidates
    if type(name) ~= "string" then
      ctx.error("InvalidParameterValue", "The filter 'null' is invalid")
    elseif name:sub(1, 4) == "tag:" then
      local v = M.tag_value(rec, name:sub(5))
      candidates = v and { v } or {}
    elseif name == "tag-key" or name == "tag-value" then
      candidates = {}
      for _, tag in ipairs(rec.Tags or {}) do candidates[#candidates + 1] = name == "tag-key" and tag.Key or tag.Value end
    elseif fields[name] then
      candidates = {}
      for _, v in ipairs(as_list(fields[name](rec))) do
        if type(v) == "boolean" then v = v and "true" or "false" end
        candidates[#candidates + 1] = v
      end
    else
      ctx.error("InvalidParameterValue", "The filter '" .. name .. "' is invalid")
    end
    if not value_matches(candidates, filter.Values) then return false end
  end
  return true
end

-- describe(ctx, kind, ids, filters, fields [, render]) -> json array of the
-- records named by ids (all when none; an unknown id raises NotFound) that
-- pass the filters, each rendered (default: public copy)
function M.describe(ctx, kind, ids, filters, fields, render)
  render = render or M.public
  local records
  if ids and #ids > 0 then
    records = {}
    local seen = {}
    for _, id in ipairs(ids) do
      if not seen[id] then
        seen[id] = true
        records[#records + 1] = M.need(ctx, kind, id)
      end
    end
  else
    records = ctx.state:list(kind)
  end
  local out = json.array()
  for _, rec in ipairs(records) do
    if not rec._gone and M.matches(ctx, rec, filters, fields) then out[#out + 1] = render(rec, ctx) end
  end
  return out
end

-- DescribeTags / CreateTags / DeleteTags ------------------------------------

local TAG_FIELDS = {
  ["resource-id"] = function(item) return item.ResourceId end,
  ["resource-type"] = function(item) return item.ResourceType end,
  key = function(item) return item.Key end,
  value = function(item) return item.Value end,
}

M.operations = {}

function M.operations.CreateTags(ctx, input)
  local resources = input.Resources or {}
  if #resources == 0 then ctx.error("MissingParameter", "The request must contain the parameter resourceIdSet") end
  if not input.Tags or #input.Tags == 0 then ctx.error("MissingParameter", "The request must contain the parameter tagSet") end
  local recs = {}
  for i, id in ipairs(resources) do
    local kind = M.kind_of(id)
    if not kind then ctx.error("InvalidID", string.format('The ID \'%s\' is not valid', tostring(id))) end
    recs[i] = { kind, M.need(ctx, kind, id) }
  end
  for i, id in ipairs(resources) do
    M.merge_tags(ctx, recs[i][2], input.Tags)
    ctx.state:put(recs[i][1], id, recs[i][2])
  end
  ctx.target = resources[1]
  return {}
end

function M.operations.DeleteTags(ctx, input)
  local resources = input.Resources or {}
  if #resources == 0 then ctx.error("MissingParameter", "The request must contain the parameter resourceIdSet") end
  for _, id in ipairs(resources) do
    local kind = M.kind_of(id)
    if not kind then ctx.error("InvalidID", string.format('The ID \'%s\' is not valid', tostring(id))) end
    local rec = M.need(ctx, kind, id)
    local keep = json.array()
    for _, tag in ipairs(rec.Tags or {}) do
      local drop = input.Tags == nil or #input.Tags == 0
      for _, t in ipairs(input.Tags or {}) do
        if t.Key == tag.Key and (t.Value == nil or t.Value == tag.Value) then drop = true end
      end
      if not drop then keep[#keep + 1] = tag end
    end
    rec.Tags = keep
    ctx.state:put(kind, id, rec)
  end
  ctx.target = resources[1]
  return {}
end

function M.operations.DescribeTags(ctx, input)
  local items = {}
  for _, kind in ipairs(M.KIND_ORDER) do
    local rtype = M.KINDS[kind].rtype
    for _, rec in ipairs(ctx.state:list(kind)) do
      if not rec._gone then
        for _, tag in ipairs(rec.Tags or {}) do
          items[#items + 1] = { ResourceId = rec._id, ResourceType = rtype, Key = tag.Key, Value = tag.Value,
                                Tags = { tag } }
        end
      end
    end
  end
  table.sort(items, function(a, b)
    if a.ResourceId ~= b.ResourceId then return a.ResourceId < b.ResourceId end
    return a.Key < b.Key
  end)
  local out = json.array()
  for _, item in ipairs(items) do
    if M.matches(ctx, item, input.Filters, TAG_FIELDS) then
      out[#out + 1] = { ResourceId = item.ResourceId, ResourceType = item.ResourceType, Key = item.Key,
                        Value = item.Value }
    end
  end
  return { Tags = out }
end

return M
