-- _findings: what a diagnostic answers, one shape for all of them.
--
--   local F = require "_findings"
--   local r = F.new()                                 -- the findings of one run
--   r:checked("node labels", "2 nodes")              -- what was looked at (healthy runs say it too)
--   r:add {
--     severity = "critical",                          -- "critical" | "warning" | "info"
--     code = "NODE_UNHEALTHY",                        -- stable, UPPER_SNAKE: what an agent matches
--     subject = "node hyperpod-i-0abc",               -- what the finding is about
--     summary = "the node is marked for replacement",
--     evidence = { F.evidence("Node/hyperpod-i-0abc label sagemaker.amazonaws.com/node-health-status",
--                             "UnschedulablePendingReplacement") },
--     explanation = "HyperPod's health agent found ...",
--     next = { F.step("inspect", "hyperpod_list_nodes", { cluster = c }, "see ..."),
--              F.step("reboot", "hyperpod_node_reboot", { cluster = c, node_ids = { id } }, "...") },
--   }
--   return r:result()   -> { healthy, summary, counts, findings (worst first), checked }
--
-- A diagnostic only reads (its tool is `read`: hypd.tool.guard refuses any
-- mutation). What would change something is a suggestion: the exact tool
-- call, checked against the registry here (a call that would not validate
-- is a bug in the diagnostic and raises), in the escalation order inspect,
-- fix, reboot, replace, never run by the diagnostic.
local M = {}

M.SEVERITY = { critical = 1, warning = 2, info = 3 }
M.ACTION = { inspect = 1, fix = 2, reboot = 3, replace = 4 }

-- the hypd.hints form of a call: TOOL key=value key:=json (keys sorted)
local function word(v)
  if v:match("^[%w%._:/@<>%-]+$") then return v end
  return "'" .. v:gsub("'", "'\\''") .. "'"
end

function M.call_text(tool, args)
  local keys, parts = {}, { tool }
  for k in pairs(args) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = args[k]
    if type(v) == "string" then parts[#parts + 1] = k .. "=" .. word(v)
    else parts[#parts + 1] = k .. ":=" .. word(hypd.json.encode(v)) end
  end
  return table.concat(parts, " ")
end

-- evidence(source, quote [, at]) -> what a finding rests on: where it was
-- read (object and field, log line, API answer) and the text as read
function M.evidence(source, quote, at)
  assert(type(source) == "string" and source ~= "", "evidence needs its source")
  if type(quote) ~= "string" then quote = hypd.json.encode(quote) end
  return { source = source, quote = quote, at = at }
end

-- step(action, tool, args, why) -> a suggested next step; raises when the
-- call would not pass the tool's validation (string values <what> are
-- placeholders the person fills)
function M.step(action, tool, args, why)
  assert(M.ACTION[action], "step action: inspect, fix, reboot or replace")
  local ok, problems = hypd.tools.check(tool, args)
  if not ok then
    error(string.format("a diagnostic suggests an invalid call %s: %s", M.call_text(tool, args),
      table.concat(problems, "; ")), 0)
  end
  return { action = action, tool = tool, args = args, call = M.call_text(tool, args), why = why }
end

local Report = {}
Report.__index = Report

function M.new() return setmetatable({ list = {}, looked = {} }, Report) end

-- checked(what, detail): one thing the diagnostic examined
function Report:checked(what, detail)
  self.looked[#self.looked + 1] = { what = what, detail = detail }
end

function Report:add(f)
  assert(M.SEVERITY[f.severity], "finding severity: critical, warning or info")
  assert(type(f.code) == "string" and f.code:match("^[A-Z][A-Z0-9_]*$"), "finding code: UPPER_SNAKE")
  assert(type(f.evidence) == "table" and #f.evidence > 0, "a finding rests on evidence")
  local steps = f.next or {}
  table.sort(steps, function(a, b) return M.ACTION[a.action] < M.ACTION[b.action] end)
  for i, s in ipairs(steps) do s.order = i end
  self.list[#self.list + 1] = { severity = f.severity, code = f.code, subject = f.subject, summary = f.summary,
    evidence = f.evidence, explanation = f.explanation, next = hypd.json.array(steps) }
end

-- result() -> the diagnostic's answer: healthy when no finding is worse
-- than info; findings worst first (then by subject)
function Report:result()
  local list = self.list
  table.sort(list, function(a, b)
    if a.severity ~= b.severity then return M.SEVERITY[a.severity] < M.SEVERITY[b.severity] end
    return tostring(a.subject) < tostring(b.subject)
  end)
  local counts = { critical = 0, warning = 0, info = 0 }
  for _, f in ipairs(list) do counts[f.severity] = counts[f.severity] + 1 end
  local healthy = counts.critical == 0 and counts.warning == 0
  local summary
  if healthy then
    summary = "healthy: nothing wrong found in " .. #self.looked .. " checks"
  else
    summary = string.format("%d critical, %d warning: %s", counts.critical, counts.warning, list[1].summary)
  end
  return { healthy = healthy, summary = summary, counts = counts,
    findings = hypd.json.array(list), checked = hypd.json.array(self.looked) }
end

-- The result schema every diagnostic declares (its `result`)
M.RESULT = { type = "object", properties = {
  healthy = { type = "boolean" }, summary = { type = "string" }, counts = { type = "object" },
  findings = { type = "array" }, checked = { type = "array" } } }

return M
