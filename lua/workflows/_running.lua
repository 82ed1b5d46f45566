-- _running: the operation at work on a target, as a status tool reports it.
-- A status tool asked about a thing some operation is making, changing or
-- deleting says so first: the top-level operation (cluster_create, not the
-- stage it runs now), its phase, and the child running under it, down to
-- the deepest. Without that a status tool shows a finished stage (or the
-- thing as it is before the work) and its caller reads "done".
--   local R = require "_running"
--   out.operation = R.on(target) -- nil when nothing runs on it
local M = {}

local DEPTH = 8 -- children shown under the top (a pipeline is three deep)

-- matches(match, target) -> true when target is what match names: a
-- string (that target, or one under it: "<match>/..."), a list of such,
-- or a function(target) -> bool
local function matches(match, target)
  target = tostring(target)
  if type(match) == "function" then return match(target) == true end
  if type(match) == "table" then
    for _, m in ipairs(match) do if matches(m, target) then return true end end
    return false
  end
  return target == match or target:sub(1, #match + 1) == match .. "/"
end
M.matches = matches

-- top(view) -> the view of the operation at the top of view's parents
function M.top(view)
  local seen = {}
  while view and view.parent and not seen[view.parent] do
    seen[view.operation_id] = true
    local p = hypd.operations.get(view.parent)
    if not p then break end
    view = p
  end
  return view
end

-- child_now(view, depth) -> the running child of view as {operation_id,
-- tool, target, phase, running_child}, or nil
local function child_now(view, depth)
  if depth > DEPTH then return nil end
  for _, c in ipairs(view.children or {}) do
    if c.status == "running" then
      local cv = hypd.operations.get(c.operation_id) or c
      return { operation_id = c.operation_id, tool = c.tool, target = cv.target, phase = cv.phase,
        running_child = child_now(cv, depth + 1) }
    end
  end
end

-- short(view) -> what a status tool shows of an operation: id, tool,
-- target, status, phase, when it started, how long it has run, and the
-- child running under it
function M.short(view)
  return { operation_id = view.operation_id, tool = view.tool, target = view.target, status = view.status,
    phase = view.phase, created_at = view.created_at, seconds = view.seconds,
    running_child = view.status == "running" and child_now(view, 1) or nil }
end

-- on(match) -> the short view of the top-level running operation that
-- works on a target match names (or has a child that does), the oldest
-- when several run; nil when none runs
function M.on(match)
  local best
  for _, v in ipairs(hypd.operations.list { status = "running", limit = 500 }) do
    if matches(match, v.target) then
      local top = M.top(v)
      if top.status == "running" and (not best or top.created_at < best.created_at) then best = top end
    end
  end
  return best and M.short(best)
end

-- all(match) -> the short views of every top-level running operation at
-- work on a target match names, oldest first (what a list tool shows)
function M.all(match)
  local tops, seen = {}, {}
  for _, v in ipairs(hypd.operations.list { status = "running", limit = 500 }) do
    if matches(match, v.target) then
      local top = M.top(v)
      if top.status == "running" and not seen[top.operation_id] then
        seen[top.operation_id] = true
        tops[#tops + 1] = top
      end
    end
  end
  table.sort(tops, function(a, b) return a.created_at < b.created_at end)
  local out = hypd.json.array()
  for i, v in ipairs(tops) do out[i] = M.short(v) end
  return out
end

-- fingerprint(match [, ids]) -> a text that changes when an operation at
-- work on a target match names starts, ends or changes phase (its running
-- children too), or when one of the operations ids does: cheap (hypd's
-- store only), what a waiting status tool looks at between its reads
function M.fingerprint(match, ids)
  local parts = {}
  if match then
    for _, s in ipairs(M.all(match)) do parts[#parts + 1] = M.signature(s) end
  end
  for _, id in ipairs(ids or {}) do
    local v = hypd.operations.get(id)
    parts[#parts + 1] = v and M.signature(M.short(v)) or (tostring(id) .. "=gone")
  end
  return table.concat(parts, " ")
end

-- signature(short) -> a text that changes when the operation's status or
-- phase, or a running child's, does (what a waiting caller watches)
function M.signature(short)
  if not short then return "none" end
  local parts, s = {}, short
  while s do
    parts[#parts + 1] = tostring(s.operation_id) .. "=" .. tostring(s.status or "running") .. "/" .. tostring(s.phase)
    s = s.running_child
  end
  return table.concat(parts, " ")
end

return M
