-- hypd.tool.guard: what the tool running now may do, checked where every AWS
-- and Kubernetes call passes (hypd.aws.try, the hypd.k8s connection), so a
-- tool cannot step outside its declaration by any path:
--
--   * an AWS action must match the tool's `aws` list ("ec2:Describe*",
--     IAM's wildcards * and ?, action names case-insensitive), and a
--     Kubernetes verb its `k8s` list (get, list, watch, logs, proxy, create,
--     apply, patch, update, delete);
--   * by kind: a read tool makes only read calls (AWS operations classed
--     "read", Kubernetes get, list, watch, logs); a mutating tool may not
--     delete (operations classed "deleting", Kubernetes delete); a
--     destructive one may;
--   * in plan mode every tool is read-only.
--
-- A refused call is never sent; the error (code GUARDRAIL) names the tool,
-- the action and the rule. Those checks give the good messages and plan
-- mode; what makes them hold is the chokepoint (hypd.tool.guard_request), which
-- classifies every signed request from the request itself in hypd.http
-- before it is signed and sent, and writes each one, sent or refused, to
-- the audit log once.
--
--   guard.new{tool = def, op_id, caller, plan, patient} -> g (patient: its
--     AWS calls get an operation's attempts, hypd.aws OPERATION_ATTEMPTS)
--   guard.with(g, fn, ...) -> fn's results, g the current task's guard
--   guard.current() -> g | nil (the current task's or an ancestor's)
--   guard.inert(what) -> g: allows nothing; guard.confine(what, fn, ...):
--     fn under it (a playbook's top level, validate, target)
--   guard.aws(service, operation, class, params) -> class | nil, err
--     (hypd.aws.try; class: the operation's, hypd.aws.class)
--   guard.k8s(verb, what [, dry]) -> true | nil, err     (hypd.k8s; dry:
--     a server-side dry run, which changes nothing and so is classed read,
--     though the verb must still be declared)
local errors = require "hypd.errors"
local sched = require "hypd._sched"
local store = require "hypd.store"

local M = {}

-- proxy (an HTTP request to a workload through services/proxy or
-- pods/proxy) is classed read: it creates, changes and deletes no
-- Kubernetes object and no AWS resource; what the workload does with it is
-- the workload's. Only a tool that declares it may send one.
M.K8S_VERBS = { get = "read", list = "read", watch = "read", logs = "read", proxy = "read", create = "mutating",
  apply = "mutating", patch = "mutating", update = "mutating", delete = "deleting" }

local G = {}
G.__index = G

function M.new(o)
  return setmetatable({ tool = o.tool, op_id = o.op_id, caller = o.caller, plan = o.plan and true or false,
    patient = o.patient }, G)
end

function M.current()
  local t = sched.current()
  while t do
    if t.guard then return t.guard end
    t = t.parent
  end
end

-- with(g, fn, ...): runs fn in the current task with g as its guard
function M.with(g, fn, ...)
  local t = sched.current()
  local before = t.guard
  t.guard = g
  local r = table.pack(pcall(fn, ...))
  t.guard = before
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- inert(what) -> a guard that allows nothing: no AWS action, no Kubernetes
-- verb (a plan of a read tool that declares none). The guard of code that
-- may declare but not act: a playbook file's top level (at every load and
-- reload), a tool's validate(params) and target(params). what names it in
-- the refusal ("diagnose_x validate").
function M.inert(what)
  local g = M.new { tool = { name = what, kind = "read", aws = {}, k8s = {} }, plan = true }
  g.inert = true -- nor does it call tools or change hypd's state (hypd.playbook_api)
  return g
end

-- confine(what, fn, ...) -> fn's results, fn run under inert(what). Outside
-- any task (hypd playbook check, list) fn runs in a task of its own, driven
-- to its end here, so that what it spawns inherits the guard too.
function M.confine(what, fn, ...)
  local g = M.inert(what)
  if sched.current() then return M.with(g, fn, ...) end
  local t = sched.spawn(M.with, { name = what }, g, fn, ...)
  sched.run(function() return t:finished() end)
  if not t:finished() then error(errors.new("CANCELLED", what .. " was interrupted"), 0) end
  if t.status ~= "done" then error(t.err, 0) end
  return table.unpack(t.result, 1, t.result.n)
end

-- an IAM action pattern as a Lua pattern, anchored, case-folded
local compiled = {}
local function pattern(p)
  local c = compiled[p]
  if not c then
    c = "^" .. p:lower():gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".") .. "$"
    compiled[p] = c
  end
  return c
end

-- matches(list, action) -> true when one of the patterns covers action
function M.matches(list, action)
  local a = action:lower()
  for _, p in ipairs(list or {}) do
    if a:match(pattern(p)) then return true end
  end
  return false
end

local RANK = { read = 1, mutating = 2, deleting = 3 }
local ALLOWED = { read = 1, mutating = 2, destructive = 3 }

local function refuse(g, action, rule)
  local name = g.tool and g.tool.name or "this tool"
  return errors.fail("GUARDRAIL", string.format("%s may not call %s: %s; nothing was sent", name, action, rule),
    { tool = name, action = action, rule = rule })
end

-- audit(g, rec): one audit record of a signed request (or of one refused
-- before it became a request), with the tool, caller and front end
function M.audit(g, rec)
  rec.tool = g.tool and g.tool.name
  rec.caller = g.caller and g.caller.name
  rec.front = g.caller and g.caller.front
  store.event("audit", g.op_id, rec)
end

-- check(g, action, class, declared) -> true | nil, err; declared(action)
-- says whether the tool's declaration covers it. A refusal is audited
-- (refused = true), whichever check made it: nothing else records it
local function check(g, action, class, declared, what)
  local def = g.tool or {}
  local rule
  if g.plan and class ~= "read" then
    rule = "a plan only reads (it reports what the call would change instead of making it)"
  elseif (RANK[class] or 3) > (ALLOWED[def.kind] or 1) then
    rule = (def.kind == "read" and "a read tool makes only read-only calls" or
      "a mutating tool may not delete; only a destructive tool may") .. " (" .. action .. " is classed " .. class .. ")"
  elseif not declared(action) then
    local list = def[what == "AWS actions" and "aws" or "k8s"]
    rule = "it is not among the " .. what .. " the tool declares (" ..
      (list and #list > 0 and table.concat(list, ", ") or "none") .. ")"
  else
    return true
  end
  local rec = { class = class, outcome = "GUARDRAIL", refused = true }
  if what == "AWS actions" then rec.aws = action else rec.k8s = action:gsub("^kubernetes ", "") end
  M.audit(g, rec)
  return refuse(g, action, rule)
end

-- PLANNED: the prefix of the ids a plan gives what it would create
M.PLANNED = "planned:"

-- planned(v) -> true when v is, or holds, an id a plan made up
function M.planned(v)
  if type(v) == "string" then return v:sub(1, #M.PLANNED) == M.PLANNED end
  if type(v) == "table" then
    for _, x in pairs(v) do if M.planned(x) then return true end end
  end
  return false
end

-- aws(service, operation, class, params) -> class, nil, empty | nil,
-- GUARDRAIL err; class is the operation's (the caller's hypd.aws.class).
-- empty: a plan reading about something it would create (a planned id in
-- params): nothing exists yet, the call is not sent and answers an empty
-- result
function M.aws(service, operation, class, params)
  local g = M.current()
  if not g then return class end
  local ok, err = check(g, service .. ":" .. operation, class, function(a) return M.matches(g.tool.aws, a) end,
    "AWS actions")
  if not ok then return nil, err end
  return class, nil, g.plan and M.planned(params)
end


-- k8s(verb, what [, dry]) -> true | nil, GUARDRAIL err
function M.k8s(verb, what, dry)
  local g = M.current()
  if not g then return true end
  local class = dry and "read" or M.K8S_VERBS[verb] or "deleting"
  return check(g, "kubernetes " .. (dry and "dry-run " or "") .. verb .. (what and " " .. what or ""), class, function()
    for _, v in ipairs(g.tool.k8s or {}) do if v == verb then return true end end
    return false
  end, "Kubernetes verbs")
end


M.check, M.refuse = check, refuse
M.G = G
return M
