-- hypd._sched: the engine's scheduler (private; use hypd.task).
--
-- One Lua state, many coroutines. A task is a coroutine that yields only
-- engine requests: `await(kind, ...)` yields REQUEST, kind, ... and the loop
-- resumes it with `true, results...` when the request completes, or with
-- `false, err` when the task is cancelled or its deadline passes (await then
-- raises err). Cancellation is sticky: every later wait fails at once.
--
-- The loop: one pass over the tasks ready when it starts; if some woke
-- meanwhile, look at the network without waiting, fire due timers and pass
-- again (a task that wakes itself at once, with sleep(0) or a checkpoint,
-- goes behind what the network brought); once none is ready, either jump
-- the virtual clock to the next timer (virtual mode, nothing in flight on
-- the network) or poll the network until the next timer is due; then fire
-- due timers.
--
-- No task holds the loop (the count hook of hypd.core, armed per run):
-- playbook code is preempted after M.preempt seconds and put back in the
-- queue; a run longer than its slice fails with TIMEOUT; and a task that
-- has run its budget of CPU seconds since its last real wait (a timer, the
-- network, a job, a signal, another task) fails with CPU. Tasks running a
-- tool (a guard on them or an ancestor when a run starts) get the strict
-- budget, the others the generous one.
-- A tool's CPU seconds are the engine thread's (core.cpu) while its task
-- runs, so a busy machine or a slow disk does not spend them; a host
-- task's are real seconds while it runs (its budget is far off).
local core = require "hypd.core"
local errors = require "hypd.errors"
local hserver = require "hypd._server"
local log = require "hypd.log"

local M = {}
local REQUEST = setmetatable({}, { __name = "engine request" })
M.REQUEST = REQUEST
M.slice = 30          -- real seconds a task may run without yielding (real time: a
                      -- tighter one failed host code on a loaded machine; a
                      -- tool is held by its CPU budget and preemption)
M.budget = 120        -- seconds a host task may run between two real waits (the
                      -- sandbox's, servers', tests': built-ins stayed under 1 s)
M.tool_budget = 3     -- CPU seconds a tool's task may use between two real waits (the
                      -- built-in tools in the sandbox suites stayed under 0.13 s)
M.preempt = 0.02      -- real seconds playbook code runs before the engine looks at the network

local Task = {}
Task.__index = Task

local queue, qhead, qtail = {}, 1, 0   -- ready tasks, FIFO
local heap, heap_n, tseq = {}, 0, 0    -- timers: {at, seq, task, kind, dead}
local http_waiting = {}                -- transfer id -> task
-- streaming transfer id -> its stream; weak: a stream nobody holds is
-- collected, and its C handle's __gc cancels the transfer
local http_streams = setmetatable({}, { __mode = "v" })
local stream_owner = {}                -- streaming transfer id -> the task that opened it
local job_waiting = {}                 -- worker job id -> task
local live, nlive = {}, 0              -- unfinished tasks
local current                          -- the task running now
local next_id = 0

-- timers: a binary min-heap on (at, seq); cancelled entries are marked dead

local function before(a, b)
  return a.at < b.at or (a.at == b.at and a.seq < b.seq)
end

local function heap_push(e)
  heap_n = heap_n + 1
  local i = heap_n
  heap[i] = e
  while i > 1 do
    local p = i // 2
    if not before(heap[i], heap[p]) then break end
    heap[i], heap[p] = heap[p], heap[i]
    i = p
  end
end

local function heap_pop()
  local top = heap[1]
  heap[1] = heap[heap_n]
  heap[heap_n] = nil
  heap_n = heap_n - 1
  local i = 1
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l <= heap_n and before(heap[l], heap[m]) then m = l end
    if r <= heap_n and before(heap[r], heap[m]) then m = r end
    if m == i then break end
    heap[i], heap[m] = heap[m], heap[i]
    i = m
  end
  return top
end

local function heap_peek()
  while heap_n > 0 and heap[1].dead do heap_pop() end
  return heap[1]
end

local function add_timer(at, task, kind)
  tseq = tseq + 1
  local e = { at = at, seq = tseq, task = task, kind = kind }
  heap_push(e)
  return e
end

-- the ready queue

local function wake(t, ...)
  t.resume_args = table.pack(...)
  if not t.queued then
    t.queued = true
    qtail = qtail + 1
    queue[qtail] = t
  end
end

-- a task that wakes itself at once (sleep(0), checkpoint, preempted) waits
-- in `later` until the engine has looked at the network, then goes behind
-- what that brought (hypd.http_server's requests among them)
local later = {}

local function wake_later(t, ...)
  t.resume_args = table.pack(...)
  if not t.queued then
    t.queued = true
    later[#later + 1] = t
  end
end

local function queue_later()
  for i = 1, #later do
    qtail = qtail + 1
    queue[qtail] = later[i]
    later[i] = nil
  end
end

local function clear_wait(t)
  local w = t.waiting_on
  t.waiting_on = nil
  if not w then return end
  if w.kind == "timer" then
    w.entry.dead = true
  elseif w.kind == "http" then
    http_waiting[w.id] = nil
    core.http_cancel(w.id)
  elseif w.kind == "job" then
    job_waiting[w.id] = nil -- the job runs on; its result is dropped
  elseif w.kind == "signal" then
    w.target.waiters[t] = nil
    if w.entry then w.entry.dead = true end
  elseif w.kind == "join" then
    local ws = w.target.waiters
    for i = #ws, 1, -1 do
      if ws[i] == t then table.remove(ws, i) end
    end
  end
end

-- A finished task leaves its parent's set of children once it has no live
-- descendants, so long-lived parents do not accumulate finished children.
local function prune(t)
  while t and not live[t] and next(t.children) == nil and t.parent do
    local p = t.parent
    p.children[t] = nil
    t = p
  end
end

-- Forgets stream id and hands it the final event r (unless it was
-- collected); cancel: the transfer still runs and must stop. stream:_done
-- never yields.
local function end_stream(id, r, cancel)
  local owner = stream_owner[id]
  if not owner then return end
  stream_owner[id] = nil
  owner.streams[id] = nil
  local stream = http_streams[id]
  http_streams[id] = nil
  if cancel then core.http_cancel(id) end
  if stream then stream:_done(r) end
end

local function finish(t, err, results)
  t.status = err and "failed" or "done"
  t.err, t.result = err, results
  -- a stream lives no longer than the task that opened it
  for id in pairs(t.streams or {}) do
    end_stream(id, { id = id, err = errors.new("CANCELLED", t.name .. " ended; its stream was closed") }, true)
  end
  if live[t] then live[t], nlive = nil, nlive - 1 end
  if t.deadline_entry then t.deadline_entry.dead = true end
  if coroutine.status(t.co) ~= "running" then coroutine.close(t.co) end
  if err and err.code ~= "CANCELLED" then
    log.debug("engine", "%s failed: %s", t.name, tostring(err))
  end
  for _, w in ipairs(t.waiters) do wake(w, true) end
  t.waiters = {}
  prune(t)
end

-- request handlers: each either wakes the task now or records its wait

local handlers = {}

function handlers.sleep(t, seconds)
  seconds = tonumber(seconds) or 0
  if seconds <= 0 then return wake_later(t, true) end
  t.waiting_on = { kind = "timer", entry = add_timer(core.now() + seconds, t, "sleep") }
end

function handlers.yield(t)
  wake_later(t, true)
end

function handlers.http(t, req)
  local id, err = core.http_start(req)
  if not id then return wake(t, true, nil, err) end
  http_waiting[id] = t
  t.waiting_on = { kind = "http", id = id }
end

-- starts a streaming transfer, hands stream:_open(handle, id) its C handle
-- (core.http_open) and wakes the task at once with the id (or nil, err);
-- from then on deliver() hands stream:_data(event) the bytes as they
-- arrive and stream:_done(event) the end. The task owns the stream: its
-- end cancels the transfer; so does the collection of a stream dropped
-- before. None of these methods yields.
function handlers.http_stream(t, req, stream)
  local h, id = core.http_open(req)
  if not h then return wake(t, true, nil, id) end
  stream:_open(h, id)
  http_streams[id] = stream
  stream_owner[id] = t
  t.streams = t.streams or {}
  t.streams[id] = true
  wake(t, true, id)
end

-- M.close_stream(id): cancels a stream's transfer and forgets it; the
-- stream hears _done with CANCELLED. Does nothing once it has ended.
function M.close_stream(id)
  end_stream(id, { id = id, err = errors.new("CANCELLED", "the stream was closed") }, true)
end

-- waits until cancelled (a server's main task)
function handlers.forever(t)
  t.waiting_on = { kind = "forever" }
end

-- a job submitted to the worker pool by a binding (e.g. credentials)
function handlers.job(t, id)
  job_waiting[id] = t
  t.waiting_on = { kind = "job", id = id }
end

function handlers.join(t, other)
  if other.status == "done" or other.status == "failed" then return wake(t, true) end
  other.waiters[#other.waiters + 1] = t
  t.waiting_on = { kind = "join", target = other }
end

-- waits until the signal fires (true) or timeout seconds pass (false)
function handlers.signal(t, sig, timeout)
  sig.waiters[t] = true
  local w = { kind = "signal", target = sig }
  if timeout then w.entry = add_timer(core.now() + timeout, t, "signal") end
  t.waiting_on = w
end

-- the budgets of a run: a task running a tool (it or an ancestor has a
-- guard: hypd.tool.guard) gets the strict one, any other (the host's own: the
-- sandbox, servers, tests) the generous one
local function budgets(t)
  local p = t
  while p do
    if p.guard then return M.slice, M.tool_budget, "tool" end
    p = p.parent
  end
  return M.slice, M.budget, "host"
end

-- the error an unexpected yield gets, raised in the task where it yielded
local function stray_yield(t)
  return errors.new("SANDBOX", t.name .. ": coroutine.yield reached the engine, which answers only its own " ..
    "requests: a playbook may not yield to the engine directly (use hypd.sleep, or a coroutine of its own)")
end

-- a handler that raised (a binding's misuse error): the task's wait fails
-- with it, so the error raises in the task, never in the loop
local function handler_error(t, kind, e)
  clear_wait(t)
  if type(e) ~= "table" then
    e = errors.new("VALIDATION", "hypd " .. tostring(kind) .. ": the engine refused the request: " .. tostring(e))
  elseif not getmetatable(e) then
    setmetatable(e, errors.mt)
  end
  e.abort = nil -- misuse, not a cancellation: the tool may catch it
  wake(t, false, e)
end

-- resume(t, ...): runs t until it yields. inject: an error to raise in the
-- task at its first instruction (its last yield was no engine request, or
-- the hook preempted it, so resume values never reach it as an answer).
local function resume(t, inject, ...)
  local slice, budget, class = budgets(t)
  -- a tool's budget counts CPU time (a system call per reading); the
  -- host's generous one real time while it runs (cheap: most runs are its)
  local clock = class == "tool" and core.cpu or core.mono
  local t0 = clock() -- the engine's work for this run counts too
  current, t.status = t, "running"
  if class ~= t.class then t.busy, t.class = 0, class end -- a tool's budget starts when its code does
  local busy = t.busy or 0
  core.arm(t.co, t.deadline, slice, M.preempt, budget - busy, budget, inject, clock == core.cpu, t.steady)
  local r = table.pack(coroutine.resume(t.co, ...))
  local preempted, spent = core.disarm()
  t.busy = spent and 0 or busy + (clock() - t0)
  current = nil
  if coroutine.status(t.co) == "dead" then
    if r[1] then
      return finish(t, nil, table.pack(table.unpack(r, 2, r.n)))
    end
    return finish(t, core.error(t.co, r[2]))
  end
  t.status = "waiting"
  if r[2] ~= REQUEST then
    t.preempted = true -- no await to answer: resume values would reach the wrong code
    if preempted and r.n == 1 then return wake_later(t) end -- the hook yielded it: the network first
    return wake(t, stray_yield(t)) -- raised where it yielded
  end
  if t.abort then return wake(t, false, t.abort) end
  local h = handlers[r[3]]
  if not h then
    t.preempted = true
    return wake(t, errors.new("INTERNAL", "unknown engine request " .. tostring(r[3])))
  end
  local ok, e = pcall(h, t, table.unpack(r, 4, r.n))
  if not ok then return handler_error(t, r[3], e) end
  -- a real wait (a timer, the network, a job, a signal, another task) ends
  -- the stretch its CPU budget counts; a wake at once (sleep(0),
  -- checkpoint) does not
  if t.waiting_on then t.busy = 0 end
end

-- run_ready(): one pass over the tasks ready when it starts; those woken
-- during the pass wait for the next one, and those that woke themselves
-- (wake_later) for the network too
local function run_ready()
  local last = qtail
  while qhead <= last do
    local t = queue[qhead]
    queue[qhead] = nil
    qhead = qhead + 1
    t.queued = false
    if live[t] then
      local args = t.resume_args
      t.resume_args = nil
      if t.abort and not t.started then
        finish(t, t.abort)
      elseif t.preempted then -- it did not yield at an await: resume values would reach the wrong code
        t.preempted = nil
        resume(t, t.abort or args[1])
      elseif t.abort then
        resume(t, nil, false, t.abort)
      else
        t.started = true
        resume(t, nil, table.unpack(args, 1, args.n))
      end
    end
  end
  if qhead > qtail then qhead, qtail = 1, 0 end
end

local function fire_timers()
  local now = core.now()
  while true do
    local e = heap_peek()
    if not e or e.at > now then return end
    heap_pop()
    if e.kind == "deadline" then
      M.cancel(e.task, errors.new("TIMEOUT", string.format(
        "%s: deadline of %gs exceeded", e.task.name, e.task.timeout)))
    elseif live[e.task] then
      local w = e.task.waiting_on
      if w and w.kind == "signal" then w.target.waiters[e.task] = nil end
      e.task.waiting_on = nil
      wake(e.task, true, e.kind ~= "signal")
    end
  end
end

-- a finished transfer or job wakes the task waiting on it
local function deliver_one(r)
  local waiting = r.job and job_waiting or http_waiting
  local t = waiting[r.id]
  waiting[r.id] = nil
  if r.job and r.result and r.result.server then
    M.serve_request(r.result)
  elseif t then
    t.waiting_on = nil
    if r.job then
      wake(t, true, r.result)
    elseif r.err then
      wake(t, true, nil, r.err)
    else
      wake(t, true, r)
    end
  end
end

-- events from core.poll; a stream's go to the stream, not to a waiting task
local function deliver(done)
  for _, r in ipairs(done) do
    if r.job or not stream_owner[r.id] then
      deliver_one(r)
    elseif r.data then
      local stream = http_streams[r.id]
      if stream then stream:_data(r) end -- else collected: its cancel is on the way
    else
      end_stream(r.id, r)
    end
  end
end

-- serving_asleep() -> true when a task serving a request of a server in
-- this process sleeps on a timer (a simulated latency): under the virtual
-- clock a transfer in flight may be waiting for that very answer (a tool
-- calling the in-process sandbox), so time must move for it to come
local function serving_asleep()
  for t in pairs(live) do
    if t.serving and t.waiting_on and t.waiting_on.kind == "timer" then return true end
  end
  return false
end

-- M.serve_request(req): what the engine does with a request that arrived on
-- the HTTP server; hypd.http_server replaces it. Until then: 503.
function M.serve_request(req)
  hserver.respond(req.server, req.id, 503, { ["content-type"] = "text/plain" }, "no handler\n")
end

-- M.run([until_fn]) runs the loop until until_fn() is true (returns true) or
-- nothing can happen any more (returns false).
function M.run(until_fn)
  while true do
    run_ready()
    local ready = qhead <= qtail or #later > 0 -- tasks woken during that pass
    -- until_fn is asked once nothing is ready, and at once when the host is
    -- interrupted: the caller's own handling of the interrupt (hypd serve's
    -- graceful stop) comes before the loop's; otherwise the branch below
    -- took the interrupt whenever it landed while a task was ready, cleared
    -- it and cancelled every task, and the caller, never seeing it, ran on
    if (not ready or core.interrupted()) and until_fn and until_fn() then return true end
    if core.interrupted(true) then
      queue_later()
      for t in pairs(live) do M.cancel(t, errors.new("CANCELLED", "interrupted")) end
    elseif ready then
      -- the network and the timers before their next run, without waiting
      deliver(core.poll(0))
      fire_timers()
      queue_later()
    else
      -- the ready queue is empty: wait for a timer or the network
      local e, inflight = heap_peek(), core.inflight()
      if not e and inflight == 0 and not hserver.listening() then return false end
      -- open streams (watches, log follows) may stay open for ever: under the
      -- virtual clock they must not hold time still, so they get a moment
      -- to deliver what is on the wire, then time moves on
      local streams = 0
      if e and inflight > 0 and core.virtual() then
        for _ in pairs(stream_owner) do streams = streams + 1 end
      end
      if e and inflight == 0 and core.virtual() then
        core.advance_to(e.at)
      elseif e and ((streams > 0 and inflight <= streams) or
          (inflight > 0 and core.virtual() and serving_asleep())) then
        local done = core.poll(0.002)
        if #done > 0 then deliver(done) else core.advance_to(e.at) end
      else
        local timeout
        if e and not core.virtual() then timeout = math.max(0, e.at - core.now()) end
        deliver(core.poll(timeout))
      end
      fire_timers()
    end
  end
end

-- M.spawn(fn, opts, ...) -> task. opts: name, timeout (seconds), daemon
-- (background work of a server: not counted by stats(), nor are the HTTP
-- streams it holds open, e.g. a cache's watches, so tests do not
-- take it for a leak), serving (a server's request handler, until it answers).
-- A task started inside another keeps the earlier of the two deadlines,
-- and the guard (hypd.tool.guard) current where it is started: its own, for its
-- whole life, so a task a tool starts stays under that tool's guard after
-- the tool has returned (an ancestor's guard may be gone by then).
-- detached: a task of its own, not the child of the one that starts it
-- (no deadline, guard or cancellation of the starter's: a shared cache
-- that outlives the call that opened it sets its own guard)
function M.spawn(fn, opts, ...)
  opts = opts or {}
  next_id = next_id + 1
  local starter = current
  if opts.detached then current = nil end
  local g = current
  while g and not g.guard do g = g.parent end
  local t = setmetatable({
    id = next_id, name = opts.name or ("task " .. next_id), status = "pending",
    waiters = {}, children = {}, parent = current, started = false, -- children: a set
    guard = g and g.guard,
  }, Task)
  t.co = coroutine.create(fn)
  core.guard(t.co)
  if opts.timeout then
    t.timeout = opts.timeout
    t.deadline = core.now() + opts.timeout
    t.deadline_entry = add_timer(t.deadline, t, "deadline")
  end
  if current then
    current.children[t] = true
    if current.deadline and (not t.deadline or current.deadline < t.deadline) then
      t.deadline = current.deadline
    end
  end
  t.daemon = opts.daemon
  t.serving = opts.serving
  -- steady: the host's interrupt does not strike it (the in-process
  -- sandbox, a simulated remote AWS that a SIGTERM to hypd leaves alone);
  -- what it starts is steady too
  t.steady = opts.steady or (current and current.steady) or nil
  live[t], nlive = true, nlive + 1
  current = starter
  wake(t, ...)
  return t
end

-- M.await(kind, ...): yields an engine request from the running task.
function M.await(kind, ...)
  if not current or not coroutine.isyieldable() then
    errors.raise("STATE", "hypd " .. kind .. " must run inside a task (a playbook or a tool call)")
  end
  local r = table.pack(coroutine.yield(REQUEST, kind, ...))
  if r[1] then return table.unpack(r, 2, r.n) end
  error(r[2], 0)
end

-- M.signal() -> a condition tasks wait on: sig:wait([timeout]) -> true when
-- fired, false on timeout; sig:fire() wakes every task waiting now.
local Signal = {}
Signal.__index = Signal

function Signal:wait(timeout)
  return M.await("signal", self, timeout)
end

function Signal:fire()
  local ws = self.waiters
  self.waiters = {}
  for t in pairs(ws) do
    local w = t.waiting_on
    if w and w.entry then w.entry.dead = true end
    t.waiting_on = nil
    wake(t, true, true)
  end
end

function M.signal() return setmetatable({ waiters = {} }, Signal) end

-- M.cancel(t [, err]) -> true if the task was still running.
function M.cancel(t, err)
  if not live[t] then return false end
  err = err or errors.new("CANCELLED", t.name .. " was cancelled")
  err.abort = true
  if not t.abort then t.abort = err end
  if t == current then error(t.abort, 0) end
  if t.status == "waiting" then
    clear_wait(t)
    wake(t, false, t.abort)
  elseif not t.queued then
    wake(t)
  end
  return true
end

-- M.cancel_tree(t): cancels t and every task it started, recursively.
function M.cancel_tree(t, err)
  for c in pairs(t.children) do M.cancel_tree(c, err) end
  M.cancel(t, err)
end

-- M.settled(t) -> true when t and every task it started have finished
function M.settled(t)
  return not live[t] and next(t.children) == nil
end

function M.current() return current end

-- M.stats() -> {tasks, timers, http, streams}: what is alive now (leak
-- checks); streams: streaming transfers whose end has not reached the loop
function M.stats()
  local timers, tasks, streams = 0, 0, 0
  for i = 1, heap_n do
    local e = heap[i]
    if not e.dead and e.kind ~= "deadline" and not e.task.daemon then timers = timers + 1 end
  end
  for t in pairs(live) do
    if not t.daemon then tasks = tasks + 1 end
  end
  local background = 0 -- a daemon's open streams (a cache's watches) are its background work too
  for _, owner in pairs(stream_owner) do
    streams = streams + 1
    if owner.daemon then background = background + 1 end
  end
  return { tasks = tasks, timers = timers, http = core.inflight(true) - background, streams = streams }
end

-- task methods

-- t:wait() -> true, results... | false, err (like pcall)
function Task:wait()
  if live[self] then M.await("join", self) end
  if self.status == "done" then return true, table.unpack(self.result, 1, self.result.n) end
  return false, self.err
end

function Task:cancel(reason)
  return M.cancel(self, reason and errors.new("CANCELLED", tostring(reason)) or nil)
end

function Task:finished() return not live[self] end

return M
