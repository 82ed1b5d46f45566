-- Progress on every long wait in wall time (issue 19), as a person sees
-- it: a `hypd sandbox --speed 30` process (simulated AWS 30 times faster,
-- as `make run` does) and hypd's own real clock, so HyperPod is checked at
-- its real pace (every 2 minutes early on) while the sandbox is fast.
--   * in-process `hypd call ... --wait`, stderr a pipe: cluster_create_eks;
--     every output line is time-stamped as it arrives: no gap over GAP s;
--   * in-process on a terminal (script(1) gives it a pty): cluster_create's
--     status line is redrawn with a clock that keeps running while its
--     hyperpod_and_storage step waits, and shows the child's notes;
--   * `hypd serve` on the same state (the sandbox by endpoint), then
--     `hypd call --api URL ... --wait` in a pipe for
--     hyperpod_add_instance_group and training_setup_mlflow (each printed
--     one "(0s)" line in 2 minutes before): no gap over GAP s.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local json = require "hypd.json"
local task = require "hypd.task"

local GAP = 15

local dir = H.tmpdir()
local state = dir .. "/hypd"
local env, spid, serve_pid, url, token
local absent
local function skip() return t.skip(absent or "an earlier step failed") end

t.cleanup(function()
  for _, p in ipairs { serve_pid, spid } do if p then os.execute("kill " .. p .. " 2>/dev/null") end end
  os.execute("sleep 0.3; rm -rf " .. H.quote(dir))
end)

-- envline(extra) -> "env -u ... K=V ..." for a hypd client of the sandbox
local function envline(extra)
  local parts = { "env -u AWS_SESSION_TOKEN -u AWS_PROFILE" }
  for k, v in pairs(env) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  for k, v in pairs(extra or {}) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  parts[#parts + 1] = "HYPD_STATE=" .. H.quote(state)
  return table.concat(parts, " ")
end

-- run_bg(cmd, done): runs cmd in the background and waits for it with
-- task.sleep (a test task must not block for minutes in os.execute)
local function run_bg(cmd, done)
  os.remove(done)
  os.execute(string.format("(%s; touch %s) >/dev/null 2>&1 </dev/null &", cmd, H.quote(done)))
  while not H.read(done) do task.sleep(0.2) end
end

-- timed(args, extra) -> rc, view, lines: runs hypd with args, its stderr a
-- pipe read line by line and each line stamped with the wall time it came;
-- lines = {{at, text}}, with the start and the end as lines too
local function timed(args, extra)
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = H.quote(a) end
  local out, stamps, rcfile = dir .. "/out.json", dir .. "/lines", dir .. "/rc"
  local cmd = string.format("(%s %s %s 2>&1 >%s; echo $? >%s) | while IFS= read -r l; do " ..
    "printf '%%s %%s\\n' \"$(date +%%s.%%N)\" \"$l\"; done >%s",
    envline(extra), H.quote(H.hypd), table.concat(quoted, " "), H.quote(out), H.quote(rcfile), H.quote(stamps))
  local t0 = io.popen("date +%s.%N"):read("l")
  run_bg(cmd, dir .. "/done")
  local t1 = io.popen("date +%s.%N"):read("l")
  local lines = { { at = tonumber(t0), text = "(start)" } }
  for at, text in (H.read(stamps) or ""):gmatch("(%S+) ([^\n]*)") do lines[#lines + 1] = { at = tonumber(at), text = text } end
  lines[#lines + 1] = { at = tonumber(t1), text = "(end)" }
  return tonumber(H.read(rcfile)), json.decode(H.read(out) or "") or {}, lines
end

-- worst(lines) -> the longest silence in seconds, and the line after it
local function worst(lines)
  local w, at = 0, nil
  for i = 2, #lines do
    if lines[i].at - lines[i - 1].at > w then w, at = lines[i].at - lines[i - 1].at, lines[i].text end
  end
  return w, at
end

local function show(lines)
  local out = {}
  for _, l in ipairs(lines) do out[#out + 1] = string.format("%.1f %s", l.at - lines[1].at, l.text) end
  return table.concat(out, "\n")
end

local function no_gap(name, rc, v, lines)
  t.eq({ rc, v.status }, { 0, "succeeded" }, name .. ": " .. json.encode(v.error))
  local w, after = worst(lines)
  t.ok(w <= GAP, string.format("%s: the longest silence is %.1f s (before %q)\n%s", name, w, tostring(after),
    show(lines)))
  t.ok(#lines > 4, name .. ": progress lines")
end

t.test("a hypd sandbox --speed 30 process", function()
  local pid
  env, pid = H.sandbox_process(dir, "--speed 30")
  spid = pid
  t.ok(env, "the sandbox printed its environment: " .. tostring(H.read(dir .. "/sandbox.err")))
  if not env then absent = "no sandbox" end
end)

t.test("in-process hypd call cluster_create_eks --wait into a pipe: a line at least every " .. GAP .. " s", function()
  if absent then return skip() end
  local rc, v, lines = timed { "call", "cluster_create_eks", "cluster_tag=wall", "--wait" }
  no_gap("cluster_create_eks", rc, v, lines)
  if v.status ~= "succeeded" then absent = "no EKS cluster" end
end)

t.test("in-process hypd call cluster_create --wait on a terminal: the status line's clock runs while " ..
  "hyperpod_and_storage waits, with the child's notes", function()
  if absent then return skip() end
  if H.sh("command -v script") ~= 0 then return t.skip("no script(1) on this machine") end
  local tty = dir .. "/tty.out"
  local cmd = string.format("%s %s call cluster_create cluster_tag=wall instance_type=ml.g5.12xlarge " ..
    "instance_count=1 availability_zone=us-west-2a --wait", envline(), H.quote(H.hypd))
  run_bg(string.format("script -qfec %s /dev/null >%s 2>&1 </dev/null", H.quote(cmd), H.quote(tty)), dir .. "/done")
  local text = H.read(tty) or ""
  t.like(text, "succeeded in %d+:%d%d", "it finished: " .. text:sub(-600))
  local clocks, notes = {}, {}
  for draw in text:gmatch("\r\27%[K([^\r\n]*)") do
    local m, s, rest = draw:match("^  (%d+):(%d%d) hyperpod_and_storage(.*)$")
    if m then
      clocks[tonumber(m) * 60 + tonumber(s)] = true
      local note = rest:match("^  %((.*)%)$")
      if note then notes[#notes + 1] = note end
    end
  end
  local n, top = 0, 0
  for c in pairs(clocks) do n, top = n + 1, math.max(top, c) end
  t.ok(top >= 30, "the step took a while on the clock: up to " .. top .. " s")
  t.ok(n >= top * 0.6, string.format("the clock was redrawn about every second: %d distinct values up to %d s", n,
    top))
  local child = false
  for _, note in ipairs(notes) do child = child or note:find("^hyperpod_create: ") ~= nil end
  t.ok(child, "the line showed hyperpod_create's notes: " .. table.concat(notes, " | "):sub(1, 800))
end)

t.test("hypd serve on the same state, the sandbox by its endpoint", function()
  if absent then return skip() end
  local rc, out = H.sh(envline() .. " " .. H.quote(H.hypd) .. " token create --scope admin --name wall")
  t.eq(rc, 0)
  token = (out or ""):match("(hypd_[%w_-]+)")
  local so = dir .. "/serve.out"
  local p = io.popen(string.format("%s %s serve --listen 127.0.0.1:0 >%s 2>%s.err </dev/null & echo $!", envline(),
    H.quote(H.hypd), H.quote(so), H.quote(so)))
  serve_pid = p:read("l")
  p:close()
  for _ = 1, 300 do
    url = (H.read(so) or ""):match("listening on (http://[%d.:]+)")
    if url then break end
    os.execute("sleep 0.05")
  end
  t.ok(url and token, "serving: " .. tostring(H.read(so)))
  if not (url and token) then absent = "no server" end
end)

for _, case in ipairs {
  { "hyperpod_add_instance_group", "instance_group=cpu", "instance_type=ml.m5.2xlarge", "instance_count=1",
    "availability_zone=us-west-2a" },
  { "training_setup_mlflow" },
} do
  t.test("hypd call --api URL " .. case[1] .. " --wait into a pipe: a line at least every " .. GAP .. " s", function()
    if absent then return skip() end
    local args = { "call", "--api", url }
    for _, a in ipairs(case) do args[#args + 1] = a end
    args[#args + 1] = "--wait"
    local rc, v, lines = timed(args, { HYPD_TOKEN = token })
    no_gap(case[1], rc, v, lines)
  end)
end
