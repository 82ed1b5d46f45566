-- hypd.statelock: only one process at a time runs or resumes operations on
-- a state directory. Two that both resumed the same unfinished operation
-- both created its AWS resources. That process holds the directory's lock
-- for its life (hypd._lock: an flock on <state>/lock, O_CLOEXEC, naming
-- its holder's pid, command and start; the kernel drops it when the process
-- ends, kill -9 included).
--
-- Who takes it (the front ends decide; op and tool enforce it):
--   hypd serve, hypd sandbox     at start, acquire{wait = true}: refused while
--                                another process holds it; a holder that is
--                                stopping (SIGTERM grace) is waited for
--   hypd call TOOL, in-process   a mutating or destructive TOOL, before the call
--   hypd mcp, in-process         at start when free; else read_only(): read
--                                tools work, the others answer LOCKED
--   any other process            on demand (hypd run, hypd test, a program
--                                embedding hypd.h): the first operation it
--                                starts or resumes, or mutating tool it calls,
--                                takes the lock when it is free
--   never                        token, tools, doctor, kubeconfig, eks-token,
--                                --api, read tools (SQLite WAL lets them read
--                                and write the store beside the holder)
--
--   acquire{command, hint, wait} -> true | nil, err (LOCKED names the holder)
--   check(what) -> true | nil, err: operations.start, operations.resume and dispatch.call ask it
--   read_only(hint)      this process never takes the lock
--   stopping(grace)      a graceful stop has begun: a new serve waits for it
--   advertise(url)       where this process serves its API (named in refusals)
--   held() -> bool; describe(holder) -> text
local config = require "hypd.config"
local errors = require "hypd.errors"
local lock = require "hypd._lock"

local M = {}

M.WAIT_MARGIN = 5   -- seconds past a stopping holder's grace that a new serve waits
M.SETTLE = 1        -- seconds a new serve waits for a holder that may just have been sent SIGTERM
M.HINT = "Reach it through its API instead: hypd call --api URL TOOL ... or hypd mcp --api URL " ..
  "(token in HYPD_TOKEN)."
M.HINT_SERVE = "To use it, talk to it through --api: hypd call --api URL TOOL ..., hypd mcp --api URL " ..
  "(token in HYPD_TOKEN); to restart it, stop it first (kill -TERM PID): a new hypd serve waits for " ..
  "a stopping one."

local mode = "on_demand" -- "on_demand" | "read_only"
local hint = M.HINT      -- how the person reaches the holder, for this process's refusals
local seen               -- read_only: the holder when the lock was refused

local function dir() return config.state_dir end

-- the command of this process, for the lock file: "hypd run x.lua" (the
-- program, its command word and first operand; never key=value arguments)
local function process_command()
  local f = io.open("/proc/self/cmdline", "rb")
  local raw = f and f:read(4096) or ""
  if f then f:close() end
  local argv = {}
  for a in raw:gmatch("([^%z]*)%z") do argv[#argv + 1] = a end
  local i = 2
  while argv[i] and argv[i]:sub(1, 2) == "--" do i = i + 2 end
  local words = { (argv[1] or "hypd"):match("[^/]*$"), argv[i] }
  local operand = argv[i + 1]
  if operand and not operand:find("=", 1, true) and operand:sub(1, 1) ~= "-" then words[3] = operand end
  return table.concat(words, " ")
end

local function when(t)
  if type(t) ~= "number" or t <= 0 then return "an unknown time" end
  return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t))
end

-- describe(holder) -> "pid 42 (hypd serve --listen 127.0.0.1:3099) since 2026-01-01T00:00:00Z, serving URL"
function M.describe(h)
  h = h or {}
  local s = "pid " .. tostring(h.pid or "unknown")
  if h.command then s = s .. " (" .. h.command .. ")" end
  s = s .. " since " .. when(h.since)
  if h.url then s = s .. ", serving " .. h.url end
  if h.stopping then s = s .. ", stopping" end
  return s
end

-- refused(err, how [, lead]) -> err with the message a person needs: who
-- holds the directory, and how to reach it instead
local function refused(err, how, lead)
  local h = err.holder or {}
  local text = (how or hint):gsub("URL", function() return h.url or "URL" end)
    :gsub("PID", function() return tostring(h.pid or "PID") end)
  if not h.url then
    text = text .. " It serves no API now" .. (h.pid and " (pid " .. h.pid .. ")" or "") ..
      ": wait for it to finish, or stop it."
  end
  err.message = (lead or "") .. "the state directory " .. tostring(err.dir or dir()) ..
    " is in use by another hypd process: " ..
    M.describe(h) .. ". Only one process at a time may run or resume operations there. " .. text
  return err
end

function M.held() return lock.held() == dir() and dir() ~= nil end

-- acquire{command, hint, wait, out} -> true | nil, err: takes the lock now
-- (or finds it already held). wait: a holder that is stopping is waited for
-- (its grace plus WAIT_MARGIN seconds, saying so on out, default stderr).
function M.acquire(opts)
  opts = opts or {}
  local command = opts.command or process_command()
  local ok, err = lock.acquire(dir(), command, 0, opts.wait and M.SETTLE or 0)
  if not ok and err.code == "LOCKED" and opts.wait and err.holder.stopping then
    local bound = (tonumber(err.holder.grace) or 0) + M.WAIT_MARGIN
    local out = opts.out or io.stderr
    out:write("hypd: the state directory ", dir(), " belongs to ", M.describe(err.holder),
      "; waiting up to ", string.format("%g", bound), " s for it to stop\n")
    out:flush()
    ok, err = lock.acquire(dir(), command, bound)
    if ok then
      out:write("hypd: the previous process has stopped; taking over ", dir(), "\n")
      out:flush()
    end
  end
  if ok then
    if opts.hint then hint = opts.hint end
    return true
  end
  if err.code == "LOCKED" then return nil, refused(err, opts.hint) end
  return nil, err
end

-- read_only(hint, holder): this process does not take the lock, even when
-- it becomes free (hypd mcp beside a server); holder: who had it
function M.read_only(how, holder)
  mode, seen = "read_only", holder
  if how then hint = how end
end

-- check(what) -> true | nil, LOCKED err: may this process run `what` (start
-- or resume an operation, call a mutating tool)? On demand, takes the lock.
function M.check(what)
  if M.held() then return true end
  if mode == "on_demand" then
    local ok, err = M.acquire {}
    if ok then return true end
    if err.code == "LOCKED" then err.message = tostring(what) .. ": " .. err.message end
    return nil, err
  end
  return nil, refused(errors.new("LOCKED", "", { dir = dir(), holder = lock.holder(dir()) or seen or {} }), nil,
    tostring(what) .. ": this hypd is read-only: when it started, ")
end

-- stopping(grace): the graceful stop of up to grace seconds has begun
function M.stopping(grace)
  if M.held() then return lock.update { stopping = true, grace = grace } end
  return true
end

-- advertise(url): this process serves its API at url
function M.advertise(url)
  if M.held() then return lock.update { url = url } end
  return true
end

-- release(): gives the lock up (tests; the host releases it when it closes)
function M.release() lock.release() end

return M
