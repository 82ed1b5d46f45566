-- An operator overrides a built-in tool: `hypd playbook show
-- cluster_create_eks` into the playbook directory, one default changed, and
-- the server runs the edited version, marked overridden in hypd tools, GET
-- /api/v1/tools and MCP tools/list, its source and content hash in every
-- operation record. A broken edit is refused on reload (POST
-- /api/v1/playbooks/reload) and the previous version keeps serving; SIGHUP
-- reloads too; removing the file gives the built-in back.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local json = require "hypd.json"

local dir = H.tmpdir()
local playbooks, state = dir .. "/playbooks", dir .. "/state"
local file = playbooks .. "/cluster/cluster_create_eks.lua"
os.execute("mkdir -p " .. H.quote(playbooks .. "/cluster"))
local pid
t.cleanup(function()
  if pid then os.execute("kill -TERM " .. pid .. " 2>/dev/null; sleep 0.3") end
  os.execute("rm -rf " .. H.quote(dir))
end)

local url, token
local function api(method, path, body)
  local cmd = "curl -s -X " .. method .. " -H 'authorization: Bearer " .. tostring(token) .. "'"
  if body then cmd = cmd .. " -H 'content-type: application/json' -d " .. H.quote(body) end
  local _, out = H.sh(cmd .. " " .. H.quote(tostring(url) .. path))
  return json.decode(out or "") or {}
end

local function plan_cidr(tag)
  local p = api("POST", "/api/v1/tools/cluster_create_eks", json.encode { cluster_tag = tag, plan = true })
  for _, e in ipairs(p.plan or {}) do
    if e.type == "ec2:vpc" then return e.fields and e.fields.CidrBlock end
  end
  return "no plan: " .. json.encode(p)
end

t.test("hypd playbook show gives the built-in file; a copy with one default changed is checked clean", function()
  local rc, src, err = H.run_hypd({ HYPD_STATE = state }, "playbook", "show", "cluster_create_eks")
  t.eq(rc, 0, err)
  t.like(err, "save this as <playbook dir>/cluster/cluster_create_eks%.lua")
  local edited, n = src:gsub('default = "10%.192%.0%.0/16"', 'default = "10.77.0.0/16"')
  t.eq(n, 1, "the default is in the tool's own file")
  H.write(file, edited)
  local crc, out = H.run_hypd({ HYPD_STATE = state }, "playbook", "check", file)
  t.eq(crc, 0, out)
  t.like(out, "a built%-in tool's name")
end)

t.test("the server runs the edited version, marked overridden in all three front ends", function()
  local out = dir .. "/serve.out"
  os.execute(string.format("HYPD_CLOCK=virtual HYPD_STATE=%s %s --playbooks %s serve --sandbox --listen " ..
    "127.0.0.1:0 --grace 1 >%s 2>%s.err </dev/null & echo $! >%s.pid", H.quote(state), H.quote(H.hypd),
    H.quote(playbooks), H.quote(out), H.quote(out), H.quote(out)))
  for _ = 1, 500 do
    local text = H.read(out) or ""
    url, token = text:match("listening on (http://[%d.:]+)"), text:match("export HYPD_TOKEN=(%S+)")
    if url and token and text:find("stops it", 1, true) then break end
    os.execute("sleep 0.02")
  end
  pid = (H.read(out .. ".pid") or ""):match("%d+")
  t.ok(url and token, "the server started: " .. tostring(H.read(out .. ".err")))
  t.like(H.read(out .. ".err") or "", "tool cluster_create_eks is overridden by " .. file:gsub("%p", "%%%0"))
  local listed = api("GET", "/api/v1/tools/cluster_create_eks")
  t.eq({ listed.overrides, listed.source }, { "built-in", file }, "REST")
  t.like(listed.hash or "", "^sha256:%x+$")
  local _, mcp = H.sh("curl -s -H 'authorization: Bearer " .. token .. "' -H 'content-type: application/json' " ..
    "-H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-11-25' -d " ..
    H.quote(json.encode { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
      capabilities = json.object(), clientInfo = { name = "ovr", version = "1" } } }) .. " -D " .. H.quote(dir .. "/h") ..
    " " .. H.quote(url .. "/mcp"))
  t.ok(json.decode(mcp or "") ~= nil, "MCP initialize")
  local sid = (H.read(dir .. "/h") or ""):match("[Mm]cp%-[Ss]ession%-[Ii]d: (%S+)")
  local _, list = H.sh("curl -s -H 'authorization: Bearer " .. token .. "' -H 'content-type: application/json' " ..
    "-H 'accept: application/json' -H 'mcp-protocol-version: 2025-11-25' -H 'mcp-session-id: " .. tostring(sid) ..
    "' -d '{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}' " .. H.quote(url .. "/mcp"))
  local marked
  for _, tl in ipairs(((json.decode(list or "") or {}).result or {}).tools or {}) do
    if tl.name == "cluster_create_eks" then marked = tl._meta and tl._meta["hypd.io/overrides"] end
  end
  t.eq(marked, "built-in", "MCP tools/list")
  local rc, tools_out = H.run_hypd({ HYPD_STATE = dir .. "/cli" }, "--playbooks", playbooks, "tools")
  t.eq(rc, 0)
  t.like(tools_out, "cluster_create_eks%s+mutating.-%[overridden by " .. file:gsub("%p", "%%%0") .. "%]", "hypd tools")
  t.eq(plan_cidr("ovr"), "10.77.0.0/16", "the edited default is the one used")
  local acc = api("POST", "/api/v1/tools/cluster_create_eks", '{"cluster_tag": "ovr"}')
  local v
  for _ = 1, 200 do
    v = api("GET", "/api/v1/operations/" .. tostring(acc.operation_id) .. "?wait_seconds=2")
    if v.status ~= "running" then break end
  end
  t.eq(v.status, "succeeded", json.encode(v.error or json.null))
  t.eq({ v.source, v.source_hash }, { file, listed.hash }, "the operation record names the playbook and its hash")
end)

t.test("a broken edit is refused on reload and the previous version keeps serving", function()
  local before = api("GET", "/api/v1/tools/cluster_create_eks").hash
  H.write(file, (H.read(file) or "") .. "\nthis is not Lua\n")
  local r = api("POST", "/api/v1/playbooks/reload")
  t.eq(#(r.errors or {}), 1, json.encode(r))
  t.eq(r.errors[1].file, file)
  t.like(r.errors[1].message, "does not compile")
  local now = api("GET", "/api/v1/tools/cluster_create_eks")
  t.eq({ now.overrides, now.hash }, { "built-in", before }, "the edited version still serves")
  t.eq(plan_cidr("ovr-2"), "10.77.0.0/16")
end)

t.test("SIGHUP reloads the directory; removing the file gives the built-in tool back", function()
  local text = (H.read(file) or ""):gsub("\nthis is not Lua\n", ""):gsub('"10%.77%.0%.0/16"', '"10.66.0.0/16"')
  H.write(file, text)
  os.execute("kill -HUP " .. pid)
  local cidr
  for _ = 1, 100 do
    cidr = plan_cidr("ovr-3")
    if cidr == "10.66.0.0/16" then break end
    os.execute("sleep 0.05")
  end
  t.eq(cidr, "10.66.0.0/16", "the new edit serves after SIGHUP")
  os.remove(file)
  local r = api("POST", "/api/v1/playbooks/reload")
  t.eq(r.restored, { "cluster_create_eks" })
  local back = api("GET", "/api/v1/tools/cluster_create_eks")
  t.eq({ back.source, back.overrides }, { "built-in", nil })
  t.eq(plan_cidr("ovr-4"), "10.192.0.0/16")
end)
