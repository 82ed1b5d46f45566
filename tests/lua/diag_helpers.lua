-- Helpers of the diagnostic tests (diagnose_nodes_test.lua,
-- diagnose_creation_test.lua): a diagnostic called as the tester, the
-- mutations the sandbox saw while it ran (AWS audit and Kubernetes audit
-- events) and the checks every answer must pass: its suggested calls
-- validate and are complete for hypd.hints, its findings have evidence.
--   local D = dofile("tests/lua/diag_helpers.lua")
local t = require "hypd.tap"
local json = require "hypd.json"
local store = require "hypd.store"
local hints = require "hypd.hints"
local dispatch = require "hypd.tool.dispatch"

local D = {}
D.OPER = { name = "tester", scope = "operate", front = "test" }

local function mark()
  local evs = store.events(0, 1000000) or {}
  return #evs > 0 and evs[#evs].seq or 0
end

-- writes(m) -> the sandbox's AWS mutations and Kubernetes writes since m
local function writes(m)
  local out = {}
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "sandbox.audit" and not e.data.refused then
      out[#out + 1] = "aws " .. tostring(e.data.service) .. " " .. tostring(e.data.operation)
    elseif e.kind == "sandbox.k8s.audit" then
      out[#out + 1] = "k8s " .. tostring(e.data.verb) .. " " .. tostring(e.data.resource or e.data.kind)
    end
  end
  return out
end

-- run(name, params) -> the diagnostic's answer, after checking that the
-- sandbox saw no mutation while it ran and that every step it suggests
-- validates (F.step did) and reads back as a complete call (hypd.hints)
function D.run(name, params)
  local m = mark()
  local r, err = dispatch.call(name, params or {}, D.OPER)
  if not r then error(name .. ": " .. json.encode(err), 0) end
  t.eq(writes(m), {}, name .. ": no AWS mutation and no Kubernetes write while it ran")
  for _, f in ipairs(r.findings) do
    t.ok(#f.evidence > 0 and f.evidence[1].quote ~= nil, f.code .. " rests on quoted evidence")
    for _, s in ipairs(f.next) do
      local calls = hints.extract(s.call, true)
      local ok, problems = false, { "no call read in " .. s.call }
      if calls[1] then ok, problems = hints.check(calls[1]) end
      t.ok(ok, f.code .. " step " .. s.call .. " is a complete call: " .. json.encode(problems))
    end
  end
  return r
end

-- find(r, code [, subject_pattern]) -> the first finding with that code
function D.find(r, code, subject)
  for _, f in ipairs(r.findings) do
    if f.code == code and (not subject or tostring(f.subject):find(subject, 1, true)) then return f end
  end
end

-- quoted(f, pattern) -> true when an evidence quote of f matches pattern
function D.quoted(f, pattern)
  for _, e in ipairs(f and f.evidence or {}) do
    if tostring(e.quote):find(pattern) then return true end
  end
  return false
end

function D.codes(r)
  local out = {}
  for _, f in ipairs(r.findings) do out[#out + 1] = f.code end
  return out
end

function D.actions(f)
  local out = {}
  for _, s in ipairs(f.next) do out[#out + 1] = s.action .. " " .. s.tool end
  return out
end

return D
