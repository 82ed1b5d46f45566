-- sandbox.k8s.programs.seq_loop: a container whose shell command is a
-- counting loop, as a real shell runs it:
--
--   sh -c 'echo start; for i in $(seq 1 40); do echo "line $i"; sleep 0.5; done; echo done'
--
-- prints "start", then "line 1" .. "line 40" one every 0.5 s of simulated
-- time, then "done", and exits 0 after the loop's run time. `seq N`,
-- `seq A B`, `$i`, `${i}`, single or double quotes and a sleep before or
-- after the echo are understood; a loop without sleep prints its lines at
-- once. The echo lines around the loop are printed when they would run.
local core = require "hypd.core"
local task = require "hypd.task"

local M = {}
M.MAX = 100000 -- iterations at most (a `seq 1 1000000000` prints this many)

local script = require("sandbox.k8s.programs").command_line

local function unquote(s)
  s = s:gsub("^%s+", ""):gsub("%s+$", "")
  return (s:gsub("^\"(.*)\"$", "%1"):gsub("^'(.*)'$", "%1"))
end

-- statements(text) -> the echo texts and sleeps of a ';'-separated list
local function statements(text)
  local out = {}
  for st in (text .. ";"):gmatch("([^;]*);") do
    st = st:gsub("^%s+", ""):gsub("^do%s+", ""):gsub("^done%s*", "")
    local e = st:match("^echo%s+(.*)$")
    local s = st:match("^sleep%s+([%d%.]+)%s*$")
    if e then out[#out + 1] = { echo = unquote(e) }
    elseif s then out[#out + 1] = { sleep = tonumber(s) } end
  end
  return out
end

-- parse(container) -> {before, var, from, to, body, after} | nil
function M.parse(c)
  local cmd = script(c)
  local pre, var, range, body, post = cmd:match("^(.-)for%s+([%a_][%w_]*)%s+in%s+%$%(seq%s+([%d%s]+)%)%s*;%s*do%s+(.-)" ..
    ";?%s*done(.*)$")
  if not var then return nil end
  local a, b = range:match("^%s*(%d+)%s+(%d+)%s*$")
  if not a then a, b = 1, range:match("^%s*(%d+)%s*$") end
  if not b then return nil end
  pre = pre:gsub("^.-%-c%s+['\"]?", "")
  post = post:gsub("['\"]%s*$", "")
  return { before = statements(pre), var = var, from = tonumber(a), to = math.min(tonumber(b), tonumber(a) + M.MAX - 1),
    body = statements(body), after = statements(post) }
end

-- expand(p, text, value) -> text with the loop variable ($i, ${i}) as value
function M.expand(p, text, value)
  if not value then return text end
  return (text:gsub("%${" .. p.var .. "}", value):gsub("%$" .. p.var .. "%f[^%w_]", value))
end

function M.match(_, c) return M.parse(c) ~= nil end

-- lines() -> none: the program prints all of the container's output as it
-- runs (not the kubelet's first lines from the command's echo words)
function M.lines() return {} end

local function seconds(list)
  local n = 0
  for _, s in ipairs(list) do n = n + (s.sleep or 0) end
  return n
end

function M.run_seconds(_, c)
  local p = M.parse(c)
  local iterations = math.max(0, p.to - p.from + 1)
  return seconds(p.before) + iterations * seconds(p.body) + seconds(p.after)
end

local function speed() return tonumber(require("sandbox").speed) or 1 end

function M.start(env)
  local p = M.parse(env.container)
  local cl, pod = env.cl, env.pod
  local pr = env.ctl:r("", "v1", "pods")
  local ns, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
  local function alive()
    local cur = pr and cl:get(pr, ns, name)
    return cur and cur.metadata.uid == uid and (cur.status or {}).phase == "Running"
  end
  local function run(list, value)
    for _, s in ipairs(list) do
      if s.sleep then
        if s.sleep > 0 then task.sleep(s.sleep / speed()) end
        if not alive() then return false end
      else
        env.log(M.expand(p, s.echo, value))
      end
    end
    return true
  end
  task.spawn(function()
    if not run(p.before) then return end
    for i = p.from, p.to do
      if not run(p.body, tostring(i)) then return end
    end
    run(p.after)
  end, { name = "sandbox seq_loop " .. ns .. "/" .. name, daemon = true })
  return core.now()
end

return M
