-- Helpers of the tests that drive cluster_create_eks through hypd.tool.operations
-- against the in-process sandbox (workflow_eks_create_test.lua,
-- plan_test.lua); loaded with dofile after H.sandbox_here():
--   local E = dofile("tests/lua/eks_helpers.lua")
local t = require "hypd.tap"
local aws = require "hypd.aws"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local store = require "hypd.store"
local dispatch = require "hypd.tool.dispatch"
local playbook = require "hypd.playbook"

local E = {}
E.eks = playbook.load("cluster._eks_stage")
E.net = playbook.load("cluster._eks_network")
E.CALLER = "arn:aws:iam::123456789012:user/sandbox"
E.ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
E.WHO = { name = "tester", scope = "operate", front = "test" }
E.READ = { name = "reader", scope = "read", front = "test" }
E.OPTS = { region = "us-west-2" }
local STEP = {}
E.STEP, E.STEP_NO = STEP, {} -- step names: the phase hypd.tool.operations records as each step starts
for i, s in ipairs(playbook.load("cluster.cluster_create_eks").steps) do STEP[s.name], E.STEP_NO[s.name] = true, i end

function E.call(service, operation, params) return aws.call(service, operation, params or {}, E.OPTS) end

function E.is_mutation(service, operation) return aws.class(service, operation) ~= "read" end

-- swap(service, operation, fn(original, ctx, input)) -> restore(): the
-- sandbox answers operation with fn until restored
local restores = {}
function E.swap(service, operation, fn)
  local ops = require("sandbox.services." .. service).operations
  local original = ops[operation]
  ops[operation] = function(ctx, input) return fn(original, ctx, input) end
  local function restore() ops[operation] = original end
  restores[#restores + 1] = restore
  return restore
end

-- start(params) -> operation id: a cluster_create_eks call through the registry
function E.start(params)
  local acc = assert(dispatch.call("cluster_create_eks", params, E.WHO))
  t.eq(acc.existing, nil, "a new operation for " .. params.cluster_tag)
  return acc.operation_id
end

-- the step state hypd.tool.operations persisted for operation id (cluster_get_creation_status reads the same key)
function E.state_of(id) return store.get("op/" .. id .. "/state") or {} end

-- the events hypd.tool.operations persisted for operation id after seq m: phases (without
-- the step names it records as each step starts) and progress notes
function E.phases_of(id, m)
  local out = {}
  for _, e in ipairs(store.events(m or 0, 1000000) or {}) do
    if e.operation_id == id and e.kind == "operation.phase" and not STEP[e.data.phase] then
      out[#out + 1] = e.data.phase
    end
  end
  return out
end
function E.notes_of(id)
  local out = {}
  for _, e in ipairs(store.events(0, 1000000) or {}) do
    if e.operation_id == id and e.kind == "operation.progress" then out[#out + 1] = e.data.message end
  end
  return out
end

-- interrupt_at(tag, prefix): the next phase of tag's operation that starts
-- with prefix stops the operation as a stopping host does (SIGTERM): its task
-- is cancelled at its next wait, with no cancel request, so the record stays
-- running with its state as saved and op.resume() continues it
function E.interrupt_at(tag, prefix) return E.stop_at(prefix, "eks/us-west-2/" .. tag, true) end

-- stop_at(prefix, target [, exact]): the same for the operation whose target
-- starts with target (is target, with exact)
function E.stop_at(prefix, target, exact)
  local off
  off = op.subscribe(function(ev)
    local tg = tostring(ev.target)
    if ev.kind == "operation.phase" and (exact and tg == target or not exact and tg:find(target, 1, true) == 1) and
        tostring(ev.phase):find(prefix, 1, true) == 1 then
      off()
      -- cancelled now, before the step's next request is sent (a task
      -- spawned to cancel it would run only after the engine has polled
      -- the network, the request on its way); the victim is the task that
      -- emits the event, and cancelling the running task raises its abort
      -- at once: the pcall leaves that to its next wait
      local victim = op.active()[ev.operation_id]
      pcall(victim.cancel, victim, "the host is stopping (the test interrupts it)")
    end
  end)
end

-- resume(id) -> view: op.resume() continues the running record id, to its end
function E.resume(id)
  t.eq(op.get(id).status, "running", id .. " is left running")
  t.eq(op.resume(), 1, "one operation resumed")
  return op.wait(id)
end

-- replay(id, from): as a host that stopped after saving the state of steps
-- from.. but before recording them done leaves the record: those steps
-- pending, the record running, the state as saved
function E.replay(id, from)
  local steps = op.get(id).steps
  for i = from, #steps do steps[i] = { name = steps[i].name, status = "pending" } end
  assert(store.op_update(id, { status = "running", phase = "queued", steps = steps, result = json.null }))
end

-- lose_state(id): the record as if just created, its saved state gone
function E.lose_state(id)
  local steps = op.get(id).steps
  for i = 1, #steps do steps[i] = { name = steps[i].name, status = "pending" } end
  assert(store.op_update(id, { steps = steps }))
  store.delete("op/" .. id .. "/state")
end

-- the sandbox's audit log: mark() -> position; since(mark) -> {"service Operation" = n}
function E.mark()
  local evs = store.events(0, 1000000) or {}
  return #evs > 0 and evs[#evs].seq or 0
end
function E.since(m)
  local counts, total = {}, 0
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "sandbox.audit" and not e.data.refused then
      local k = e.data.service .. " " .. e.data.operation
      counts[k], total = (counts[k] or 0) + 1, total + 1
    end
  end
  return counts, total
end

-- step_mark(id, name) -> the position of the phase hypd.tool.operations recorded as step name of id began
function E.step_mark(id, name)
  for _, e in ipairs(store.events(0, 1000000) or {}) do
    if e.operation_id == id and e.kind == "operation.phase" and e.data.phase == name then return e.seq end
  end
  error("operation " .. id .. " never began step " .. name, 0)
end

function E.tags_of(list)
  local out = {}
  for _, x in ipairs(list or {}) do out[x.Key] = x.Value end
  return out
end

function E.by_tag(tag) return { { Name = "tag:hypd:cluster-tag", Values = { tag } } } end

-- rows(plan) -> {"action type name", ...}: a plan's entries in order
function E.rows(p)
  local out = {}
  for i, e in ipairs(p.plan) do out[i] = e.action .. " " .. e.type .. " " .. e.name end
  return out
end

-- plain(s, from, to) -> s with every from (plain text, not a pattern) replaced by to
function E.plain(s, from, to)
  local i = s:find(from, 1, true)
  while i do
    s = s:sub(1, i - 1) .. to .. s:sub(i + #from)
    i = s:find(from, i + #to, true)
  end
  return s
end

-- has(s, text, msg): s contains text (plain)
function E.has(s, text, msg)
  t.ok(tostring(s):find(text, 1, true) ~= nil, (msg or "") .. ": " .. tostring(s) .. " contains " .. text)
end

-- restore_all(): every swapped sandbox operation answers as before
function E.restore_all()
  for _, restore in ipairs(restores) do restore() end
end

return E
