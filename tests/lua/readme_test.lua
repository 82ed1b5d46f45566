-- The README's quick start works as written: the server `make run` starts
-- (its recipe, from `make -n run`) prints export lines, and every command
-- of the quick start's second block then succeeds, one by one, with only
-- the documented knobs changed (RUN_LISTEN, RUN_STATE) and scratch files
-- under a temporary directory. The playbook examples of "Using it" run too.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local readme = assert(H.read("README.md"), "README.md")

-- blocks(section) -> the ```sh blocks under "## section", each a list of lines
local function blocks(section)
  local body = readme:match("\n## " .. section:gsub("%p", "%%%0") .. "\n(.-)\n## ") or ""
  local out = {}
  for code in body:gmatch("```sh\n(.-)```") do
    local lines = {}
    for line in code:gmatch("[^\n]+") do lines[#lines + 1] = line end
    out[#out + 1] = lines
  end
  return out
end

-- a command without its trailing comment (two spaces, then #)
local function command(line) return (line:gsub("%s%s+#.*$", "")) end

local quick = blocks("Quick start")
t.ok(#quick == 2 and #quick[2] >= 5, "the quick start has its two blocks")

local _, port = H.sh("python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); " ..
  "print(s.getsockname()[1])'")
local listen = "127.0.0.1:" .. port:match("%d+")
local state = dir .. "/run-state"
local _, recipe = H.sh("make -s -n run BUILD=" .. H.quote(H.build) .. " RUN_LISTEN=" .. listen ..
  " RUN_STATE=" .. H.quote(state))
local serve_cmd = recipe:match("[^\n]* serve %-%-sandbox[^\n]*")

t.test("make run's recipe serves the sandbox fast and prints the export lines and the state directory", function()
  t.ok(serve_cmd ~= nil, "make -n run shows the serve command: " .. tostring(recipe))
  t.like(serve_cmd, "%-%-speed 30", "RUN_SPEED=30 by default")
end)

local out_file, pid_file = dir .. "/run.out", dir .. "/run.pid"
os.execute(string.format("(exec %s) >%s 2>%s.err </dev/null & echo $! >%s", serve_cmd or "false", H.quote(out_file),
  H.quote(out_file), H.quote(pid_file)))
local printed = ""
for _ = 1, 500 do
  printed = H.read(out_file) or ""
  if printed:find("stops it", 1, true) then break end
  os.execute("sleep 0.02")
end

local env = {}
for k, v in printed:gmatch("export ([%w_]+)=(%S+)") do env[k] = v end

t.test("make run prints the sandbox's export lines, HYPD_TOKEN and the state directory for more tokens", function()
  t.ok(env.AWS_ENDPOINT_URL and env.AWS_ACCESS_KEY_ID and env.AWS_SECRET_ACCESS_KEY and env.AWS_REGION,
    "the sandbox's endpoint and keys: " .. printed)
  t.like(env.HYPD_TOKEN or "", "^hypd_", "an admin token")
  t.like(printed, "speed 30", "it says the sandbox runs fast")
  t.ok(printed:find("--state " .. state .. " token create", 1, true), "the state directory for hypd token create")
end)

local home = dir .. "/home"
os.execute("mkdir -p " .. H.quote(home))

-- run(line) -> status, stdout, stderr: a README command in a shell that
-- pasted the export lines
local function run(line)
  local cmd = command(line):gsub("127%.0%.0%.1:3099", listen):gsub("/tmp/hypd%-run", state)
    :gsub("/tmp/hypd%-demo%.kubeconfig", dir .. "/hypd-demo.kubeconfig"):gsub("^build/hypd", H.quote(H.hypd))
  local parts = { "env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u HYPD_STATE HOME=" .. H.quote(home) }
  for k, v in pairs(env) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  return H.sh(table.concat(parts, " ") .. " bash -c " .. H.quote(cmd))
end

local CHECKS = {
  ["cluster_create_eks"] = function(out) t.like(out, '"status": "succeeded"') end,
  ["cluster_get_status"] = function(out) t.like(out, '"active": true') t.like(out, '"name": "hypd%-demo"') end,
  ["aws eks describe%-cluster"] = function(out) t.like(out, "ACTIVE") end,
  ["get namespaces"] = function(out) t.like(out, "default") end,
  ["token create"] = function(out) t.like(out, "^hypd_") end,
  ["/api/v1/tools"] = function(out) t.like(out, '"tools"') end,
}

for _, line in ipairs(quick[2] or {}) do
  t.test("README quick start: " .. command(line), function()
    local rc, out, err = run(line)
    t.eq(rc, 0, "exit status; stderr: " .. tostring(err) .. " stdout: " .. tostring(out):sub(1, 400))
    for pat, check in pairs(CHECKS) do
      if line:find(pat) then check(out) end
    end
  end)
end

t.test("the README's playbook examples run as written", function()
  local n = 0
  for _, block in ipairs(blocks("Using it")) do
    for _, line in ipairs(block) do
      if line:find("run ", 1, true) and line:find("playbook", 1, true) or line:find("run hello", 1, true) then
        n = n + 1
        local rc, _, err = run(line)
        local want = line:find("--timeout", 1, true) and 1 or 0
        t.eq(rc, want, command(line) .. ": " .. tostring(err))
      end
    end
  end
  t.ok(n >= 4, "the examples were found (" .. n .. ")")
end)

t.cleanup(function()
  os.execute("kill -TERM " .. ((H.read(pid_file) or ""):match("%d+") or "0") .. " 2>/dev/null; sleep 0.3")
  os.execute("rm -rf " .. H.quote(dir))
end)
