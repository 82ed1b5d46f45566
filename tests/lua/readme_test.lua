-- The README's path works in order: every command of every ```sh block
-- of README.md, all sections, runs in the order written against the
-- server `make run` starts (its recipe, from `make -n run`, with only the
-- documented knobs RUN_LISTEN and RUN_STATE changed), in a shell that
-- pasted the export lines it printed, and exits as its comment says
-- (0 unless the comment says "exits N").
--
-- The placeholder rule (the README states it too):
--   127.0.0.1:3099, http://host:3099   the server make run started
--   /tmp/hypd-run                      its state directory
--   /tmp/NAME (any other), ~           a scratch directory (HOME is one)
--   127.0.0.1:4566                     a free port
--   $HF_TOKEN                          a token of the form Hugging Face gives
--   make run, make test                not run: this test is the first, and
--                                      the second runs this test
-- A command whose comment says "terminal 1" is a server: it is started in
-- the background, and the rest of its block runs with the export lines
-- it prints (the README's "terminal 2"). A line `a; b` runs under set -e.
-- Some commands' output is checked too (CHECKS below), and any number of
-- tools the README states is checked against the registry.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local readme = assert(H.read("README.md"), "README.md")

-- commands() -> every command of the README in order: {section, block,
-- text, comment}; continued lines (a trailing \) are joined
local function commands()
  local out, section, nblock = {}, nil, 0
  local in_block, pending = false, nil
  for line in (readme .. "\n"):gmatch("([^\n]*)\n") do
    if not in_block then
      section = line:match("^## (.+)$") or section
      if line == "```sh" then in_block, nblock = true, nblock + 1 end
    elseif line == "```" then
      in_block = false
    elseif line:match("^%s*#") or line:match("^%s*$") then -- a comment line, no command
      if pending then error("README: a continued command ends in a comment line: " .. pending) end
    else
      local full = (pending and pending .. " " or "") .. line:gsub("^%s+", "")
      if full:sub(-1) == "\\" then
        pending = full:sub(1, -2):gsub("%s+$", "")
      else
        pending = nil
        -- the comment: two spaces, then # (a command's own text has no "  #")
        local cmd, comment = full:match("^(.-)%s%s+#%s*(.*)$")
        out[#out + 1] = { section = section, block = nblock, text = cmd or full, comment = comment or "" }
      end
    end
  end
  return out
end

local all = commands()

local function free_port()
  local _, port = H.sh("python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); " ..
    "print(s.getsockname()[1])'")
  return port:match("%d+")
end

local listen = "127.0.0.1:" .. free_port()
local other_port = free_port()
local state = dir .. "/run-state"
local home = dir .. "/home"
os.execute("mkdir -p " .. H.quote(home))
local _, recipe = H.sh("make -s -n run BUILD=" .. H.quote(H.build) .. " RUN_LISTEN=" .. listen ..
  " RUN_STATE=" .. H.quote(state))
local serve_cmd = recipe:match("[^\n]* serve %-%-sandbox[^\n]*")

t.test("the README has its commands, and the quick start its two blocks", function()
  t.ok(#all >= 80, "commands found: " .. #all)
  local quick = {}
  for _, c in ipairs(all) do
    if c.section == "Quick start" then quick[c.block] = true end
  end
  local n = 0
  for _ in pairs(quick) do n = n + 1 end
  t.eq(n, 2, "two blocks")
  for _, c in ipairs(all) do -- a comment after one space would be run as part of the command's text
    t.eq(c.text:find("%S #%s"), nil, "a comment starts after two spaces: " .. c.text)
  end
end)

t.test("make run's recipe serves the sandbox fast", function()
  t.ok(serve_cmd ~= nil, "make -n run shows the serve command: " .. tostring(recipe))
  t.like(serve_cmd or "", "%-%-speed 30", "RUN_SPEED=30 by default")
end)

-- start(cmd, out) -> pid file: cmd in the background, stdout in out
local function start(cmd, out)
  local pid_file = out .. ".pid"
  os.execute(string.format("(exec %s) >%s 2>%s.err </dev/null & echo $! >%s", cmd, H.quote(out), H.quote(out),
    H.quote(pid_file)))
  return pid_file
end

-- until_printed(out, what, seconds) -> what it printed once `what` is in it
local function until_printed(out, what, seconds)
  local printed = ""
  for _ = 1, seconds * 20 do
    printed = H.read(out) or ""
    if printed:find(what, 1, true) then break end
    os.execute("sleep 0.05")
  end
  return printed
end

local function stop(pid_file)
  os.execute("kill -TERM " .. ((H.read(pid_file) or ""):match("%d+") or "0") .. " 2>/dev/null; sleep 0.3")
end

local server_out = dir .. "/run.out"
local server_pid = start(serve_cmd or "false", server_out)
local printed = until_printed(server_out, "stops it", 120)

local function exports(text)
  local env = {}
  for k, v in text:gmatch("export ([%w_]+)=(%S+)") do env[k] = v end
  return env
end
local env = exports(printed)

t.test("make run prints the sandbox's export lines, HYPD_TOKEN, HYPD_STATE and the state directory", function()
  t.ok(env.AWS_ENDPOINT_URL and env.AWS_ACCESS_KEY_ID and env.AWS_SECRET_ACCESS_KEY and env.AWS_REGION,
    "the sandbox's endpoint and keys: " .. printed)
  t.like(env.HYPD_TOKEN or "", "^hypd_", "an admin token")
  t.eq(env.HYPD_STATE, state, "the state directory, so hypd token and hypd call in that shell use the server's")
  t.like(printed, "speed 30", "it says the sandbox runs fast")
  t.ok(printed:find("--state " .. state .. " token create", 1, true), "the state directory for hypd token create")
end)

t.test("the README states no number of tools that differs from the registry", function()
  local _, out = H.run_hypd({ HYPD_STATE = dir .. "/tools-state" }, "tools", "--json")
  local tools = (json.decode(out or "") or {}).tools or {}
  t.ok(#tools > 0, "the registry")
  local stated = {}
  for n in readme:gmatch("(%d+)%s+tools") do stated[#stated + 1] = n end
  for n in readme:gmatch("tools%s*%((%d+)") do stated[#stated + 1] = n end
  for n in readme:gmatch("(%d+)%s+built%-in tools") do stated[#stated + 1] = n end
  for _, n in ipairs(stated) do t.eq(tonumber(n), #tools, "the README says " .. n .. " tools") end
end)

local hf_token = "hf_readme" .. string.format("%08x", os.time() % 0x7fffffff) .. "TestToken"

-- fill(text) -> the command with its placeholders filled (the rule above)
local function fill(text, sandbox_port)
  return (text:gsub("http://host:3099", "http://" .. listen):gsub("127%.0%.0%.1:3099", listen)
    :gsub("127%.0%.0%.1:4566", "127.0.0.1:" .. (sandbox_port or other_port))
    :gsub("/tmp/([%w%._%-]+)", function(name) return name == "hypd-run" and state or dir .. "/" .. name end)
    :gsub("%f[%w/]build/hypd%f[^%w]", H.hypd))
end

-- run(text, with) -> status, stdout, stderr: a README command in a shell
-- that pasted the export lines (with: the ones in force)
local function run(text, with)
  local parts = { "env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u HYPD_STATE -u HYPD_TOKEN HOME=" .. H.quote(home),
    "HF_TOKEN=" .. hf_token }
  for k, v in pairs(with) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  return H.sh(table.concat(parts, " ") .. " timeout 600 bash -c " .. H.quote("set -e; " .. text))
end

local function has(pat) return function(out) t.like(out, pat) end end

-- what some commands print, beyond their exit status
local CHECKS = {
  { "cluster_create_eks cluster_tag=demo %-%-wait", has('"status": "succeeded"') },
  { "cluster_get_status", function(out) t.like(out, '"active": true') t.like(out, '"name": "hypd%-demo"') end },
  { "aws eks describe%-cluster", has("ACTIVE") },
  { "get namespaces", has("default") },
  { "/api/v1/tools$", has('"tools"') },
  { "/api/v1/tools/cluster_list", has('"clusters":%[{') },
  { "/api/v1/tools/cluster_delete", has('"delete":%d') },
  { "/api/v1/health", has('"ok":true') },
  { "cluster_create .*plan:=true", has('"create": %d') },
  { "training_get_job name=demo", function(out)
    local g = json.decode(out) or {}
    t.ok(type(g.pods) == "table" and #g.pods >= 1, "the demo job shows its pods: " .. out:sub(1, 300))
    local lines = 0
    for _, p in ipairs(g.pods or {}) do lines = lines + #(p.logs or {}) end
    t.ok(lines > 0, "and their log lines")
  end },
  { "job_get_logs kind=training_job name=demo", function(out)
    local r = json.decode(out) or {}
    local text = {}
    for _, l in ipairs(r.lines or {}) do text[#text + 1] = l.line end
    t.like(table.concat(text, "\n"), "%[rank 0%] step %d+/600", "the demo job's step lines: " .. out:sub(1, 300))
  end },
  { "training_get_metrics name=demo", function(out)
    t.like(out, '"loss"', "the demo job reported its loss to MLflow")
  end },
  { "inference_call_model name=qwen", has('"answer"') },
}

local tokens = {} -- name -> a token the README's token create printed

local function check(c, out)
  for _, ch in ipairs(CHECKS) do
    if c.text:find(ch[1]) then ch[2](out or "") end
  end
  local name = c.text:match("token create .*%-%-name (%S+)")
  if name then
    tokens[name] = (out or ""):match("hypd_[%w_%-]+")
    t.ok(tokens[name], "token create printed a token")
    -- a token made as written is one the server knows
    local rc, body = H.sh("curl -s -o /dev/null -w '%{http_code}' -H " ..
      H.quote("Authorization: Bearer " .. tostring(tokens[name])) .. " http://" .. listen .. "/api/v1/tools")
    t.eq({ rc, body }, { 0, "200" }, "the server accepts the token " .. name .. " made")
  end
end

local background -- {pid, block}: a "terminal 1" server of the block being run
local with = env  -- the export lines in force

-- enter(block): the tests run in order; a block's background server stops
-- when the next block begins
local function enter(block)
  if background and background.block ~= block then
    stop(background.pid)
    background, with = nil, env
  end
end

for _, c in ipairs(all) do
  local text = fill(c.text)
  local label = "README " .. tostring(c.section) .. ": " .. c.text:sub(1, 110)
  if c.text:match("^make run%f[%s%z]") or c.text:match("^make test%f[%s%z]") then
    t.test(label, function() t.skip("the server of this test; the suite runner") end)
  elseif c.comment:find("terminal 1", 1, true) then
    t.test(label, function()
      enter(c.block)
      local out = dir .. "/terminal1-" .. c.block .. ".out"
      local pid = start("env HOME=" .. H.quote(home) .. " " .. text, out)
      background = { pid = pid, block = c.block }
      local said = until_printed(out, "export AWS_SECRET_ACCESS_KEY", 60)
      local e = exports(said)
      t.ok(e.AWS_ENDPOINT_URL, "it printed its export lines: " .. said .. (H.read(out .. ".err") or ""))
      local merged = {}
      for k, v in pairs(env) do merged[k] = v end
      for k, v in pairs(e) do merged[k] = v end
      with = merged
    end)
  else
    t.test(label, function()
      enter(c.block)
      local want = tonumber(c.comment:match("exits (%d+)")) or 0
      local rc, out, err = run(text, with)
      t.eq(rc, want, "exit status; stderr: " .. tostring(err):sub(-1500) .. " stdout: " .. tostring(out):sub(1, 400))
      check(c, out)
    end)
  end
end

t.cleanup(function()
  if background then stop(background.pid) end
  stop(server_pid)
  os.execute("rm -rf " .. H.quote(dir))
end)
