-- _wait: what wait_seconds means, for every status tool that takes it.
-- Agents poll with wait_seconds, so it is never a sleep: the call answers
-- at once when the thing is settled (no operation runs on it and its state
-- is not one that changes by itself, such as Creating or Pending), else as
-- soon as what it reports changes, else when the time is up. The answer
-- says which: waited = {seconds, ended = "settled" | "changed" | "timeout"}.
--   local W = require "_wait"
--   local out, waited = W.follow(p.wait_seconds, { read = function() ... end,
--     settled = function(out) ... end, signature = function(out) ... end, every = 5 })
--   out.waited = waited
local M = {}

M.EVERY = 5 -- seconds between looks at AWS or Kubernetes while a caller waits
M.QUICK = 0.5 -- seconds between looks at hypd's own operations (its store)

-- the states a thing leaves by itself (AWS, Kubernetes and hypd spellings,
-- compared without case, '_', '-' or spaces)
local MOVING = {}
for _, s in ipairs { "creating", "updating", "deleting", "pending", "containercreating", "provisioning",
  "starting", "stopping", "rebooting", "replacing", "scaling", "inprogress", "rollingback", "systemupdating",
  "shuttingdown", "terminating", "queued", "initializing", "podinitializing", "restarting",
  "modifying", "backingup", "migrating" } do
  MOVING[s] = true
end

-- moving(state) -> true when state is one a thing leaves by itself
function M.moving(state)
  if type(state) ~= "string" then return false end
  return MOVING[(state:lower():gsub("[%s_%-]", ""))] == true
end

-- any_moving(list) -> the first of list's states that is moving, or nil
function M.any_moving(list)
  for _, s in ipairs(list) do if M.moving(s) then return s end end
end

local function waited(started, ended)
  return { seconds = math.floor((hypd.now() - started) * 1000 + 0.5) / 1000, ended = ended }
end

-- follow(seconds, spec) -> the answer, and waited (nil when seconds is 0)
-- spec.read() -> the answer as it is now; spec.settled(answer) -> true when
-- nothing on it will change by itself; spec.signature(answer) -> a text
-- that differs when what the answer reports changed; spec.every: seconds
-- between reads (default EVERY); spec.quick() -> a cheap text (hypd's own
-- operations: workflows _running's fingerprint) looked at every QUICK
-- seconds between reads, so a change of an operation is answered at once
function M.follow(seconds, spec)
  local started = hypd.now()
  local out = spec.read()
  if not seconds or seconds <= 0 then return out end
  if spec.settled(out) then return out, waited(started, "settled") end
  local before = spec.signature(out)
  local deadline = started + seconds
  while true do
    local left = deadline - hypd.now()
    if left <= 0 then return out, waited(started, "timeout") end
    local next_read = hypd.now() + math.min(spec.every or M.EVERY, left)
    if spec.quick then
      local q = spec.quick()
      repeat
        hypd.sleep(math.min(M.QUICK, next_read - hypd.now()))
      until hypd.now() >= next_read or spec.quick() ~= q
    else
      hypd.sleep(next_read - hypd.now())
    end
    out = spec.read()
    if spec.signature(out) ~= before then return out, waited(started, "changed") end
  end
end

return M
