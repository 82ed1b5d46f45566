-- docs/playbooks.md's walkthrough works as written: every command of the
-- ```sh blocks of its section "Walkthrough: ...", in order, with the
-- section's ```lua edit put where the text says (after the check step's
-- `local p = ctx.params`) once the tool's file is copied, and each command
-- exits as its comment says (0 unless it says "exits N").
--
-- The placeholders, filled by one rule:
--   127.0.0.1:3099   the server the walkthrough starts (a free port here)
--   /tmp/pb, /tmp/pb-state   scratch directories
--   build/hypd       the binary under test
-- The command whose comment says "terminal 1" is that server: started in
-- the background (under the virtual clock, so cluster_create takes
-- seconds), and the other commands run with the export lines it printed.
-- What some commands print is checked too (CHECKS below).
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local DOC = "docs/playbooks.md"
local SECTION = "^## Walkthrough: "
local ANCHOR = "^%s*local p = ctx%.params$"

local doc = assert(H.read(DOC), DOC)

-- walkthrough() -> commands {text, comment, block}, the lua edit's text
local function walkthrough()
  local cmds, edit, inside, block, nblock = {}, nil, false, nil, 0
  for line in (doc .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^## ") then inside = line:match(SECTION) ~= nil end
    if inside then
      if block then
        if line == "```" then
          block = nil
        elseif block == "lua" then
          edit = (edit or "") .. line .. "\n"
        elseif not line:match("^%s*#") and not line:match("^%s*$") then
          local cmd, comment = line:match("^(.-)%s%s+#%s*(.*)$")
          cmds[#cmds + 1] = { text = cmd or line, comment = comment or "", block = nblock }
        end
      elseif line == "```sh" or line == "```lua" then
        block = line:sub(4)
        if block == "sh" then nblock = nblock + 1 end
      end
    end
  end
  return cmds, edit
end

local cmds, edit = walkthrough()

local dir = H.tmpdir()
local _, port = H.sh("python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); " ..
  "print(s.getsockname()[1])'")
local listen = "127.0.0.1:" .. port:match("%d+")

local function fill(text)
  text = text:gsub("/tmp/pb%-state", dir .. "/pb-state"):gsub("/tmp/pb", dir .. "/pb")
  text = text:gsub("127%.0%.0%.1:3099", listen)
  return (text:gsub("%f[%w/]build/hypd%f[%s]", H.hypd))
end

-- what some commands print (found by a part of their text)
local CHECKS = {
  ["playbook check"] = function(out) t.like(out, "replaces that tool", "check says the file replaces the built-in") end,
  ["api/v1/tools/hyperpod_scale_instance_group"] = function(out)
    local d = json.decode(out)
    t.eq({ d.overrides, d.source }, { "built-in", dir .. "/pb/hyperpod/hyperpod_scale_instance_group.lua" },
      "the tool is the file, over the built-in")
  end,
  ["instance_count=9"] = function(_, err) t.like(err, "at most 8 in this account", "the new rule refuses") end,
  ["instance_count=10"] = function(out)
    local e = (json.decode(out).plan or {})[1] or {}
    t.eq(e.changes and e.changes.TargetCount, { from = 2, to = 10 }, "the built-in again plans 10")
  end,
  ["instance_count=3"] = function(out)
    local p = json.decode(out)
    local e = p.plan and p.plan[1] or {}
    t.eq({ p.change, e.action, e.type, e.changes and e.changes.TargetCount },
      { 1, "change", "sagemaker:instance-group", { from = 2, to = 3 } }, "the plan: TargetCount from 2 to 3")
  end,
}

local server_pid -- its pid file
local env = {}   -- the export lines it printed

local function stop(pid_file)
  os.execute("kill -TERM " .. ((H.read(pid_file) or ""):match("%d+") or "0") .. " 2>/dev/null; sleep 0.3")
end

local function run(text)
  local parts = { "(set -e;" }
  for k, v in pairs(env) do parts[#parts + 1] = "export " .. k .. "=" .. H.quote(v) .. ";" end
  parts[#parts + 1] = text .. ")" -- in a subshell: its own redirections stay its own
  return H.sh(table.concat(parts, " "))
end

t.test("the walkthrough has its commands and its edit", function()
  t.ok(#cmds >= 8, "commands found: " .. #cmds)
  t.ok(edit and edit:find("team_cap", 1, true), "the lua edit: " .. tostring(edit))
end)

local edited = false
-- apply_edit(): the lua block, after the anchor line of the copied file
local function apply_edit()
  local path = dir .. "/pb/hyperpod/hyperpod_scale_instance_group.lua"
  local src = assert(H.read(path), "the copy is there: " .. path)
  local out, done = {}, false
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    out[#out + 1] = line
    if not done and line:match(ANCHOR) then
      out[#out + 1] = edit:gsub("\n$", "")
      done = true
    end
  end
  t.ok(done, "the copy has the line the walkthrough edits after: " .. src:sub(1, 300))
  H.write(path, table.concat(out, "\n"))
  edited = true
end

for _, c in ipairs(cmds) do
  local text = fill(c.text)
  t.test("walkthrough: " .. c.text:sub(1, 110), function()
    if c.block == 2 and not edited then apply_edit() end
    if c.comment:find("terminal 1", 1, true) then
      local out = dir .. "/serve.out"
      server_pid = out .. ".pid"
      os.execute(string.format("(exec env HYPD_CLOCK=virtual %s) >%s 2>%s.err </dev/null & echo $! >%s", text,
        H.quote(out), H.quote(out), H.quote(server_pid)))
      local printed = ""
      for _ = 1, 60 * 20 do
        printed = H.read(out) or ""
        if printed:find("stops it", 1, true) then break end
        os.execute("sleep 0.05")
      end
      for k, v in printed:gmatch("export ([%w_]+)=(%S+)") do env[k] = v end
      t.ok(env.AWS_ENDPOINT_URL and env.HYPD_TOKEN, "it printed its export lines: " .. printed ..
        (H.read(out .. ".err") or ""):sub(-1500))
      return
    end
    local want = tonumber(c.comment:match("exits (%d+)")) or 0
    local rc, out, err = run(text)
    t.eq(rc, want, "exit status; stderr: " .. tostring(err):sub(-1500) .. " stdout: " .. tostring(out):sub(1, 400))
    for part, fn in pairs(CHECKS) do
      if c.text:find(part, 1, true) then fn(out or "", err or "") end
    end
  end)
end

t.test("every check above ran", function()
  local ran = {}
  for part in pairs(CHECKS) do
    for _, c in ipairs(cmds) do if c.text:find(part, 1, true) then ran[#ran + 1] = part break end end
  end
  local n = 0
  for _ in pairs(CHECKS) do n = n + 1 end
  t.eq(#ran, n, "each check's command is in the walkthrough")
end)

t.cleanup(function()
  if server_pid then stop(server_pid) end
  os.execute("rm -rf " .. H.quote(dir))
end)
