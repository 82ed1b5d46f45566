-- sandbox.services.ec2.paging: MaxResults and NextToken for every EC2
-- Describe* call whose botocore model has a paginator, in one place.
-- sandbox.services.ec2 wraps each such operation with wrap(name, fn): the
-- operation answers every item that passes its ids and filters, and the
-- wrapper cuts the page and says where the next one starts, as EC2 does:
--
--   * MaxResults outside the operation's range is InvalidParameterValue
--     (5 to 1000 unless LIMITS says otherwise; DescribeVpcEndpoints gives
--     at most 1000 whatever is asked);
--   * MaxResults with explicit ids is InvalidParameterCombination where EC2
--     refuses that (EXCLUSIVE: the operations whose documentation says so);
--   * without MaxResults every item comes in one answer (EC2's default for
--     these operations), unless a NextToken asks for the rest of a listing;
--   * NextToken is opaque; one EC2 did not give (or that names another
--     operation) is InvalidParameterValue; an empty one starts at the top;
--   * the last page carries no NextToken.
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

-- operation -> { min, max [, clamp = true: above max is cut to max, not refused] }
M.LIMITS = {
  DescribeRouteTables = { 5, 100 },
  DescribeInstanceTypes = { 5, 100 },
  DescribeVpcEndpoints = { 1, 1000, clamp = true },
}
M.DEFAULT = { 5, 1000 }

-- operation -> { ids member, its wire name }: MaxResults may not come with ids
M.EXCLUSIVE = {
  DescribeNetworkInterfaces = { "NetworkInterfaceIds", "networkInterfaceIdSet" },
  DescribeInstances = { "InstanceIds", "instancesSet" },
}

local function invalid(ctx, msg) ctx.error("InvalidParameterValue", msg) end

local function encode_token(op, offset)
  return sys.b64encode(json.encode { v = 1, op = op, o = offset })
end

local function decode_token(ctx, op, token)
  local raw = sys.b64decode(token)
  local ok, t = pcall(json.decode, raw or "")
  t = ok and t
  local offset = type(t) == "table" and t.op == op and math.tointeger(t.o)
  if not offset or offset < 1 then
    invalid(ctx, "Value ( " .. token .. " ) for parameter NextToken is invalid. The token is invalid.")
  end
  return offset
end

-- limit(ctx, op, max) -> the page size asked for (nil: all of it)
local function limit(ctx, op, max)
  if max == nil then return nil end
  local n = math.tointeger(max)
  local lim = M.LIMITS[op] or M.DEFAULT
  if not n then invalid(ctx, "Value ( " .. tostring(max) .. " ) for parameter maxResults is invalid.") end
  if n < lim[1] then
    invalid(ctx, string.format("Value ( %d ) for parameter maxResults is invalid. Expecting a value greater than %d.",
      n, lim[1]))
  end
  if n > lim[2] then
    if lim.clamp then return lim[2] end
    invalid(ctx, string.format("Value ( %d ) for parameter maxResults is invalid. Expecting a value less than %d.",
      n, lim[2]))
  end
  return n
end

-- wrap(name, fn, paginator) -> fn with EC2's paging; paginator is the
-- operation's from the model ({result_key, input_token, limit_key, ...})
function M.wrap(name, fn, paginator)
  local key = paginator.result_key
  if type(key) == "table" then key = key[1] end
  local in_token, limit_key = paginator.input_token or "NextToken", paginator.limit_key or "MaxResults"
  return function(ctx, input)
    local ids = M.EXCLUSIVE[name]
    if ids and input[limit_key] ~= nil and type(input[ids[1]]) == "table" and #input[ids[1]] > 0 then
      ctx.error("InvalidParameterCombination", "The parameter " .. ids[2] .. " cannot be used with the parameter " ..
        "maxResults")
    end
    local size = limit(ctx, name, input[limit_key])
    local token = input[in_token]
    local start = 1
    if type(token) == "string" and token ~= "" then start = decode_token(ctx, name, token) end
    local rest = {}
    for k, v in pairs(input) do
      if k ~= in_token and k ~= limit_key then rest[k] = v end
    end
    local out = fn(ctx, rest) or {}
    local items = out[key] or json.array()
    if start == 1 and not size then return out end
    local page = json.array()
    local last = size and math.min(#items, start + size - 1) or #items
    for i = start, last do page[#page + 1] = items[i] end
    out[key] = page
    out[paginator.output_token or "NextToken"] = last < #items and encode_token(name, last + 1) or nil
    return out
  end
end

return M
