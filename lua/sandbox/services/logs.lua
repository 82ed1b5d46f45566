-- The simulated Amazon CloudWatch Logs API (regional), the read side the
-- diagnostics use and the writes the sandbox's own services make:
-- DescribeLogGroups, DescribeLogStreams, GetLogEvents, FilterLogEvents.
-- Nothing outside the sandbox writes here yet (no CreateLogGroup or
-- PutLogEvents): SageMaker HyperPod writes its lifecycle script output
-- with M.write (services/sagemaker/lifecycle.lua), as the real service
-- writes /aws/sagemaker/Clusters/<name>/<id>.
-- Records: "group" (id logGroupName), "stream" (id "<group>\n<stream>",
-- its events inside, oldest first). Times are epoch milliseconds.
local D = require "sandbox.services.eks.deps"
local core = require "hypd.core"
local json = require "hypd.json"
local state = require "sandbox.state"
local auth = require "sandbox.auth"

local M = { scope = "regional", operations = {}, transitions = {} }
local ops = M.operations

local function ms(t) return math.floor((t or core.now()) * 1000) end

local function key(group, stream) return group .. "\n" .. stream end

-- write(region, group, stream, lines [, at]): lines appended to a stream
-- (group and stream made when missing), one event a line, 1 ms apart
function M.write(region, group, stream, lines, at)
  local v = state.view(region, "logs")
  local now = ms(at)
  if not v:get("group", group) then
    v:put("group", group, { logGroupName = group, creationTime = now,
      arn = string.format("arn:aws:logs:%s:%s:log-group:%s:*", region, auth.ACCOUNT, group) })
  end
  local s = v:get("stream", key(group, stream)) or { group = group, logStreamName = stream, creationTime = now,
    events = json.array() }
  for i, line in ipairs(lines) do
    s.events[#s.events + 1] = { timestamp = now + i - 1, message = line, ingestionTime = now + i - 1 + 200 }
  end
  v:put("stream", key(group, stream), s)
end

local function bad(ctx, msg) ctx.error("InvalidParameterException", msg) end

-- group_of(ctx, input) -> the group record named by logGroupName or logGroupIdentifier (name or ARN)
local function group_of(ctx, input)
  local id = input.logGroupName or input.logGroupIdentifier
  if input.logGroupName and input.logGroupIdentifier then
    bad(ctx, "LogGroup name and LogGroup ARN are mutually exclusive parameters.")
  end
  if type(id) ~= "string" or id == "" then bad(ctx, "Either logGroupName or logGroupIdentifier is required.") end
  local name = id:match("^arn:aws[%w-]*:logs:[^:]*:%d+:log%-group:(.-):?%*?$") or id
  local g = ctx.state:get("group", name)
  if not g then ctx.error("ResourceNotFoundException", "The specified log group does not exist.") end
  return g
end

local function streams_of(ctx, g)
  local out = {}
  for _, s in ipairs(ctx.state:list("stream")) do
    if s.group == g.logGroupName then out[#out + 1] = s end
  end
  return out
end

local function limit(ctx, v, max, default)
  if v == nil then return default end
  v = math.tointeger(v)
  if not v or v < 1 or v > max then
    bad(ctx, "1 validation error detected: Value at 'limit' failed to satisfy constraint: Member must have value " ..
      "less than or equal to " .. max)
  end
  return v
end

local function stream_view(g, s)
  local first, last = s.events[1], s.events[#s.events]
  local bytes = 0
  for _, e in ipairs(s.events) do bytes = bytes + #e.message end
  return { logStreamName = s.logStreamName, creationTime = s.creationTime,
    firstEventTimestamp = first and first.timestamp, lastEventTimestamp = last and last.timestamp,
    lastIngestionTime = last and last.ingestionTime, storedBytes = bytes,
    arn = g.arn:gsub(":%*$", "") .. ":log-stream:" .. s.logStreamName }
end

function ops.DescribeLogGroups(ctx, input)
  local all = {}
  for _, g in ipairs(ctx.state:list("group")) do
    local p = input.logGroupNamePrefix
    if not p or g.logGroupName:sub(1, #p) == p then
      all[#all + 1] = { logGroupName = g.logGroupName, creationTime = g.creationTime, arn = g.arn,
        logGroupArn = g.arn:gsub(":%*$", ""), storedBytes = 0, metricFilterCount = 0, logGroupClass = "STANDARD" }
    end
  end
  table.sort(all, function(a, b) return a.logGroupName < b.logGroupName end)
  local page, nxt = D.page(ctx, all, limit(ctx, input.limit, 50, 50), input.nextToken, 50, "InvalidParameterException")
  return { logGroups = page, nextToken = nxt }
end

function ops.DescribeLogStreams(ctx, input)
  local g = group_of(ctx, input)
  local by = input.orderBy or "LogStreamName"
  if by ~= "LogStreamName" and by ~= "LastEventTime" then
    bad(ctx, "1 validation error detected: Value '" .. tostring(by) .. "' at 'orderBy' failed to satisfy " ..
      "constraint: Member must satisfy enum value set: [LastEventTime, LogStreamName]")
  end
  if by == "LastEventTime" and input.logStreamNamePrefix then
    bad(ctx, "Cannot order by LastEventTime with a logStreamNamePrefix.")
  end
  local all = {}
  for _, s in ipairs(streams_of(ctx, g)) do
    local p = input.logStreamNamePrefix
    if not p or s.logStreamName:sub(1, #p) == p then all[#all + 1] = stream_view(g, s) end
  end
  table.sort(all, function(a, b)
    local x, y = a.logStreamName, b.logStreamName
    if by == "LastEventTime" then x, y = a.lastEventTimestamp or 0, b.lastEventTimestamp or 0 end
    if x == y then x, y = a.logStreamName, b.logStreamName end
    if input.descending then return x > y end
    return x < y
  end)
  local page, nxt = D.page(ctx, all, limit(ctx, input.limit, 50, 50), input.nextToken, 50, "InvalidParameterException")
  return { logStreams = page, nextToken = nxt }
end

local function in_time(e, input)
  return (not input.startTime or e.timestamp >= input.startTime) and (not input.endTime or e.timestamp < input.endTime)
end

-- GetLogEvents: the stream's events in the time range, `limit` of them
-- (10,000 at most), the last ones unless startFromHead; tokens "f/<n>"
-- (the next events after index n) and "b/<n>" (those before)
function ops.GetLogEvents(ctx, input)
  local g = group_of(ctx, input)
  if type(input.logStreamName) ~= "string" then bad(ctx, "logStreamName is required.") end
  local s = ctx.state:get("stream", key(g.logGroupName, input.logStreamName))
  if not s then ctx.error("ResourceNotFoundException", "The specified log stream does not exist.") end
  local n = limit(ctx, input.limit, 10000, 10000)
  local list = {}
  for _, e in ipairs(s.events) do if in_time(e, input) then list[#list + 1] = e end end
  local first
  local tok = input.nextToken
  if tok then
    local dir, at = tostring(tok):match("^([fb])/(%d+)$")
    if not dir then bad(ctx, "The specified nextToken is invalid.") end
    at = tonumber(at)
    first = dir == "f" and at + 1 or math.max(1, at - n)
  elseif input.startFromHead then
    first = 1
  else
    first = math.max(1, #list - n + 1)
  end
  local out = json.array()
  local last = math.min(#list, first + n - 1)
  for i = first, last do out[#out + 1] = list[i] end
  return { events = out, nextForwardToken = "f/" .. math.max(last, first - 1),
    nextBackwardToken = "b/" .. first }
end

-- matches(pattern, message): the filter pattern syntax's term forms: words
-- and "quoted phrases" that must all appear, ?term any of which must, -term
-- none of which may (case sensitive, as CloudWatch Logs is); empty matches all
local function terms(pattern)
  local out, i = {}, 1
  while i <= #pattern do
    local c = pattern:sub(i, i)
    if c:match("%s") then
      i = i + 1
    else
      local q = (c == "?" or c == "-") and c or ""
      i = i + #q
      local text
      if pattern:sub(i, i) == '"' then
        local j = pattern:find('"', i + 1, true) or (#pattern + 1)
        text, i = pattern:sub(i + 1, j - 1), j + 1
      else
        local j = pattern:find("%s", i) or (#pattern + 1)
        text, i = pattern:sub(i, j - 1), j
      end
      if text ~= "" then out[#out + 1] = { q = q, text = text } end
    end
  end
  return out
end

local function matches(pattern, msg)
  if type(pattern) ~= "string" then return true end
  local any, saw_any = false, false
  for _, t in ipairs(terms(pattern)) do
    local hit = msg:find(t.text, 1, true) ~= nil
    if t.q == "?" then
      saw_any, any = true, any or hit
    elseif t.q == "-" then
      if hit then return false end
    elseif not hit then
      return false
    end
  end
  return not saw_any or any
end
M.matches = matches

function ops.FilterLogEvents(ctx, input)
  local g = group_of(ctx, input)
  if input.logStreamNames and input.logStreamNamePrefix then
    bad(ctx, "logStreamNames and logStreamNamePrefix are mutually exclusive parameters.")
  end
  local n = limit(ctx, input.limit, 10000, 10000)
  local names
  if input.logStreamNames then
    names = {}
    for _, x in ipairs(input.logStreamNames) do names[x] = true end
  end
  local all = {}
  for _, s in ipairs(streams_of(ctx, g)) do
    local p = input.logStreamNamePrefix
    if (not names or names[s.logStreamName]) and (not p or s.logStreamName:sub(1, #p) == p) then
      for i, e in ipairs(s.events) do
        if in_time(e, input) and matches(input.filterPattern, e.message) then
          all[#all + 1] = { logStreamName = s.logStreamName, timestamp = e.timestamp, message = e.message,
            ingestionTime = e.ingestionTime, eventId = string.format("%056d", e.timestamp * 1000 + i) }
        end
      end
    end
  end
  table.sort(all, function(a, b)
    if a.timestamp ~= b.timestamp then return a.timestamp < b.timestamp end
    return a.eventId < b.eventId
  end)
  local page, nxt = D.page(ctx, all, n, input.nextToken, 10000, "InvalidParameterException")
  return { events = page, nextToken = nxt }
end

return M
