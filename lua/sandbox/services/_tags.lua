-- sandbox.services._tags: tagging operations by resource ARN, shared by the
-- services whose APIs tag with TagResource/UntagResource/ListTagsForResource
-- (EKS: a map of tags; FSx: a list of {Key, Value}) or AddTags/DeleteTags/
-- ListTags (SageMaker: a list). Tags live on the resource's own record, so
-- Describe calls show them too.
local json = require "hypd.json"
local tags = require "hypd.aws.tags"

local M = {}

-- find(ctx, kinds, arn) -> record, kind, spec: kinds = { {kind, arn_field, tags_field, id_field} }
local function find(ctx, kinds, arn)
  for _, k in ipairs(kinds) do
    for _, rec in ipairs(ctx.state:list(k.kind)) do
      if rec[k.arn] == arn then return rec, k end
    end
  end
end

-- as_map(t) -> {key = value} of a list of {Key, Value} or of a map
local function as_map(t)
  if t and #t > 0 then return tags.map(t) end
  local m = {}
  for k, v in pairs(t or {}) do m[k] = v end
  return m
end

local as_list = tags.list

local function as_object(map)
  local o = json.object()
  for k, v in pairs(map) do o[k] = v end
  return o
end

-- operations(spec) -> a table of operations; spec = { kinds, style = "map" | "list",
--   names = {tag, untag, list}, arn_param, tags_param, keys_param, not_found = fn(ctx, arn) }
function M.operations(spec)
  local ops = {}
  local function load(ctx, arn)
    local rec, k = find(ctx, spec.kinds, arn)
    if not rec then spec.not_found(ctx, arn) end
    return rec, k
  end
  local function save(ctx, rec, k, map)
    rec[k.tags] = spec.style == "map" and as_object(map) or as_list(map)
    ctx.state:put(k.kind, rec[k.id], rec)
  end
  ops[spec.names[1]] = function(ctx, input)
    local rec, k = load(ctx, input[spec.arn_param])
    ctx.target = input[spec.arn_param]
    local map = as_map(rec[k.tags])
    for key, v in pairs(as_map(input[spec.tags_param])) do map[key] = v end
    save(ctx, rec, k, map)
    if spec.style == "list" and spec.names[1] == "AddTags" then return { Tags = as_list(as_map(input.Tags)) } end
    return {}
  end
  ops[spec.names[2]] = function(ctx, input)
    local rec, k = load(ctx, input[spec.arn_param])
    ctx.target = input[spec.arn_param]
    local map = as_map(rec[k.tags])
    for _, key in ipairs(input[spec.keys_param] or {}) do map[key] = nil end
    save(ctx, rec, k, map)
    return {}
  end
  ops[spec.names[3]] = function(ctx, input)
    local rec, k = load(ctx, input[spec.arn_param])
    local map = as_map(rec[k.tags])
    if spec.style == "map" then return { tags = as_object(map) } end
    return { Tags = as_list(map) }
  end
  return ops
end

return M
