-- _network: what every area's steps that make EC2 and IAM resources share:
-- the names and the hypd:cluster-tag tag hypd gives them, the owner check by
-- that tag, the retry for a resource made a moment ago and not visible yet,
-- EC2 resources as ctx:ensure specs, and a route table with its default
-- route and subnet associations (the EKS network's and the HyperPod compute
-- subnets').
local Names = require "_names"
local errors = hypd.errors

local M = {}

M.TAG_KEY = Names.TAG                      -- (the names and the tag are _names's)
M.FEATURE_KEY = "hypd:feature"           -- the managed feature a resource belongs to (hyperpod/_feat)
M.SETTLE_EVERY, M.SETTLE_FOR = 3, 30       -- a resource made a moment ago may not be visible yet

-- names and tags --------------------------------------------------------------

-- name(tag [, suffix]) -> "hypd-<tag>" or "hypd-<tag>-<suffix>" (_names eks)
M.name = Names.eks

-- tag_list(tag, name [, extra]) -> EC2/IAM Tags: hypd:cluster-tag, Name, extra {key = value}
function M.tag_list(tag, name, extra)
  local tags = { { Key = M.TAG_KEY, Value = tag }, { Key = "Name", Value = name } }
  for _, t in ipairs(hypd.aws.tags.list(extra or {})) do tags[#tags + 1] = t end
  return tags
end

-- spec(rtype, tag, name [, extra]) -> TagSpecifications for an EC2 create call
function M.spec(rtype, tag, name, extra)
  return { { ResourceType = rtype, Tags = M.tag_list(tag, name, extra) } }
end

-- tag_value(tags, key) -> the value of key in an EC2/IAM tag list, or nil
function M.tag_value(tags, key)
  for _, t in ipairs(tags or {}) do
    if t.Key == key then return t.Value end
  end
end

-- owned_by(tag, tags_of) -> fn(obj) -> true | false, why: the kit's owner
-- check, by the hypd:cluster-tag tag (tags_of(obj) -> an EC2/IAM tag list,
-- or a {key = value} map)
function M.owned_by(tag, tags_of)
  return function(obj)
    local tags = tags_of(obj) or {}
    local have = tags[M.TAG_KEY]
    if have == nil then have = M.tag_value(tags, M.TAG_KEY) end
    if have == tag then return true end
    return false, string.format("its %s tag is %s, not '%s'", M.TAG_KEY, have and ("'" .. have .. "'") or "missing",
      tag)
  end
end

-- not_yet(err) -> a note when err says a resource made a moment ago is not
-- visible yet (EC2 and IAM are eventually consistent): the kit's retry
function M.not_yet(err)
  local code = tostring(err.code)
  if code:find("NotFound", 1, true) or code == "NoSuchEntity" then return "not visible yet (" .. code .. ")" end
end

-- EC2 filters and errors -------------------------------------------------------

-- filter(name, ...) -> an EC2 Filter {Name, Values}
function M.filter(name, ...) return { Name = name, Values = { ... } } end

-- not_found(err) -> true when EC2 answers that the resource does not exist
function M.not_found(err) return tostring(err.code):find("NotFound", 1, true) ~= nil end

-- EC2 resources as ensure specs -----------------------------------------------

-- ec2(ctx, r) -> a ctx:ensure spec for an EC2 resource. r: the ensure keys
-- (type, label, name, key, create, desired, update, ...) and
--   describe = {operation, ids member, result list, id field}
--              ({"DescribeVpcs", "VpcIds", "Vpcs", "VpcId"})
--   filters   the search's filters (by tag, within the VPC); also: the
--             filters tried when those find nothing
--   search    replaces the describe by filters (the caller has the list)
--   filter_param "Filters" (DescribeNatGateways: "Filter")
--   live      fn(obj) -> bool: what counts as existing (NAT: pending, available)
--   order     a sort for several matches (default by id); unique: two are a CONFLICT
--   tags      {key = value}: tags that must hold (desired "tag:<key>", set by CreateTags)
--   attrs     {field = fn(id, value)}: how update sets the other desired
--             fields, in the order attr_order lists them
--   tag       the cluster tag (default: the cluster_tag parameter)
-- find and search describe; update sets tags and attrs.
function M.ec2(ctx, r)
  local op, ids, list, idf = table.unpack(r.describe)
  local function live(x) return x and (not r.live or r.live(x)) end
  -- every EC2 resource here is created with its tags (spec()): a plan shows them
  local tag = r.tag or ctx.params.cluster_tag
  local fields = { ["tag:" .. M.TAG_KEY] = tag, ["tag:Name"] = r.name }
  for k, v in pairs(r.fields or {}) do fields[k] = v end
  local spec = { type = r.type, label = r.label, name = r.name, key = r.key, id = idf, needs = r.needs,
    create = r.create, exists = r.exists, fields = fields, owned = r.owned, retry = M.not_yet,
    retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR, placeholder = r.placeholder, current = r.current }
  function spec.find(id)
    local out, err = ctx:try("ec2", op, { [ids] = { id } })
    if not out and not M.not_found(err) then error(err, 0) end
    local x = out and (out[list] or {})[1]
    if live(x) then return x end
  end
  local function matching(filters)
    local found = {}
    for _, x in ipairs(ctx:call("ec2", op, { [r.filter_param or "Filters"] = filters })[list] or {}) do
      if live(x) then found[#found + 1] = x end
    end
    return found
  end
  function spec.search()
    local found = matching(r.filters)
    if #found == 0 and r.also then found = matching(r.also) end
    table.sort(found, r.order or function(a, b) return a[idf] < b[idf] end)
    if r.unique and #found > 1 then
      local all = {}
      for i, x in ipairs(found) do all[i] = x[idf] end
      errors.raise("CONFLICT", string.format("%d %ss carry the tag %s=%s (%s); hypd expects one. Delete the extra " ..
        "ones, or choose another cluster_tag.", #found, r.label, M.TAG_KEY, tag,
        table.concat(all, ", ")), { ids = all, field = "cluster_tag" })
    end
    return found[1]
  end
  if r.search then spec.search = r.search end
  if r.tags or r.desired then
    spec.desired = {}
    for k, v in pairs(r.desired or {}) do spec.desired[k] = v end
    for k, v in pairs(r.tags or {}) do spec.desired["tag:" .. k] = v end
    spec.current = r.current or function(x)
      local cur = {}
      for k in pairs(spec.desired) do cur[k] = x[k] end
      for _, t in ipairs(x.Tags or {}) do cur["tag:" .. t.Key] = t.Value end
      return cur
    end
    function spec.update(x, changes)
      local id, tags = x[idf], {}
      for _, k in ipairs(r.attr_order or {}) do
        if changes[k] then r.attrs[k](id, changes[k].to) end
      end
      for k, c in pairs(changes) do
        local key = k:match("^tag:(.+)$")
        if key then
          tags[#tags + 1] = { Key = key, Value = c.to }
        elseif not (r.attrs and r.attrs[k]) then
          error("ec2 " .. tostring(r.type) .. ": no attrs entry sets the desired field " .. k, 0)
        end
      end
      table.sort(tags, function(a, b) return a.Key < b.Key end)
      if #tags > 0 then ctx:call("ec2", "CreateTags", { Resources = { id }, Tags = tags }) end
    end
  end
  return spec
end

-- route_table(ctx, o) -> the route table's id: route table o.name in VPC
-- o.vpc_id, tagged for cluster tag o.tag, with 0.0.0.0/0 -> o.target
-- ({[o.target_field] = o.target}: GatewayId = igw, NatGatewayId = nat),
-- associated with each subnet of o.subnets ({{id, name}}); o.key is the
-- ctx.state field that remembers its id. The compute subnets of the
-- HyperPod stages are routed this way too (hyperpod/_subnet).
function M.route_table(ctx, o)
  local tag, name, vpc_id = o.tag, o.name, o.vpc_id
  local rt_spec = M.ec2(ctx, { type = "ec2:route-table", label = "route table", name = name, tag = tag, key = o.key,
    describe = { "DescribeRouteTables", "RouteTableIds", "RouteTables", "RouteTableId" },
    filters = { M.filter("vpc-id", vpc_id), M.filter("tag:" .. M.TAG_KEY, tag), M.filter("tag:Name", name) },
    needs = vpc_id, fields = { VpcId = vpc_id },
    create = function()
      return ctx:call("ec2", "CreateRouteTable", { VpcId = vpc_id,
        TagSpecifications = M.spec("route-table", tag, name) }).RouteTable
    end })
  local rt = ctx:ensure(rt_spec)
  local rt_id = rt.RouteTableId
  local target_field, target = o.target_field, o.target
  local route = { RouteTableId = rt_id, DestinationCidrBlock = "0.0.0.0/0", [target_field] = target }
  ctx:ensure { type = "ec2:route", label = "route", name = "0.0.0.0/0 in " .. name, needs = rt_id,
    id = function() return rt_id .. ":0.0.0.0/0" end, fields = route, exists = "RouteAlreadyExists",
    retry = M.not_yet, retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR,
    search = function() -- read again: a lost answer or a race is found this way
      for _, r in ipairs((rt_spec.find(rt_id) or {}).Routes or {}) do
        if r.DestinationCidrBlock == "0.0.0.0/0" then return r end
      end
    end,
    desired = { [target_field] = target, State = "active" },
    current = function(r) return { [target_field] = r[target_field], State = r.State or "active" } end,
    create = function()
      ctx:call("ec2", "CreateRoute", route)
      return { DestinationCidrBlock = "0.0.0.0/0", [target_field] = target, State = "active" }
    end,
    update = function() ctx:call("ec2", "ReplaceRoute", route) end }
  for _, sn in ipairs(o.subnets) do
    local sid = sn.id
    local tried = false
    ctx:ensure { type = "ec2:route-table-association", label = "route table association",
      name = name .. " with " .. tostring(sn.name or sid), needs = { rt_id, sid },
      id = "RouteTableAssociationId", fields = { RouteTableId = rt_id, SubnetId = sid },
      retry = M.not_yet, retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR,
      search = function() -- the table as read above; after an associate whose answer was lost, read again
        local now = rt
        if tried then now = rt_spec.find(rt_id) or {} end
        for _, a in ipairs(now.Associations or {}) do
          if a.SubnetId == sid then return a end
        end
      end,
      create = function()
        tried = true
        local out = ctx:call("ec2", "AssociateRouteTable", { RouteTableId = rt_id, SubnetId = sid })
        return { RouteTableAssociationId = out.AssociationId, SubnetId = sid }
      end }
  end
  return rt_id
end

return M
