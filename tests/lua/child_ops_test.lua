-- hypd.tools.call from a staged tool: the called staged tool runs as a
-- child operation of the caller's, shown under it in operation_get, its
-- result returned to the calling step; killed with SIGKILL while the child
-- runs, the next server resumes both, the parent finds its child again,
-- and no second child is started.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local json = require "hypd.json"

local dir = H.tmpdir()
t.cleanup(function() os.execute("rm -rf " .. H.quote(dir)) end)
local playbooks = dir .. "/playbooks"
os.execute("mkdir -p " .. H.quote(playbooks))
H.write(playbooks .. "/job_parent.lua", [[
return tool {
  name = "job_parent", summary = "Calls job_child", kind = "mutating", status_tool = "operation_get",
  description = "A staged tool whose step calls another staged tool.",
  params = { seconds = { type = "integer", minimum = 0, required = true } },
  target = function(p) return "parent/" .. p.seconds end,
  steps = {
    { name = "child", run = function(ctx)
      ctx.state.result = { child = hypd.tools.call("job_child", { seconds = ctx.params.seconds }) }
    end },
  },
}]])
H.write(playbooks .. "/job_child.lua", [[
return tool {
  name = "job_child", summary = "Sleeps", kind = "mutating", status_tool = "operation_get",
  description = "A staged tool that sleeps in one step and answers in the next.",
  params = { seconds = { type = "integer", minimum = 0, required = true } },
  target = function(p) return "child/" .. p.seconds end,
  steps = {
    { name = "work", run = function(ctx) ctx:phase("working"); ctx:sleep(ctx.params.seconds) end },
    { name = "answer", run = function(ctx) ctx.state.result = { slept = ctx.params.seconds } end },
  },
}]])

local state = dir .. "/state"

-- serve(env) -> {url, token, pid}: hypd serve on the test's state directory
local function serve(env)
  local out = dir .. "/serve-" .. os.time() .. math.random(1000) .. ".out"
  os.execute(string.format("%s HYPD_STATE=%s %s --playbooks %s serve --listen 127.0.0.1:0 --grace 1 >%s 2>%s.err " ..
    "</dev/null & echo $! >%s.pid", env or "", H.quote(state), H.quote(H.hypd), H.quote(playbooks), H.quote(out),
    H.quote(out), H.quote(out)))
  local s = {}
  for _ = 1, 500 do
    local text = H.read(out) or ""
    s.url, s.token = text:match("listening on (http://[%d.:]+)"), text:match("token %b(): (hypd_[%w_-]+)")
    if s.url and text:find("stops it", 1, true) then break end
    os.execute("sleep 0.02")
  end
  s.pid = (H.read(out .. ".pid") or ""):match("%d+")
  s.err = function() return H.read(out .. ".err") or "" end
  return s
end

local function get(s, path, token)
  local _, body = H.sh("curl -s -H 'authorization: Bearer " .. tostring(token or s.token) .. "' " ..
    H.quote(tostring(s.url) .. "/api/v1" .. path))
  return json.decode(body or "") or {}
end

local function post(s, path, body, token)
  local _, out = H.sh("curl -s -X POST -H 'content-type: application/json' -H 'authorization: Bearer " ..
    tostring(token or s.token) .. "' -d " .. H.quote(body) .. " " .. H.quote(tostring(s.url) .. "/api/v1" .. path))
  return json.decode(out or "") or {}
end

local token

t.test("a staged tool called by a staged tool runs as its child; the parent gets its result", function()
  local s = serve("HYPD_CLOCK=virtual")
  token = s.token
  t.ok(s.url and token, "the server started: " .. s.err())
  local acc = post(s, "/tools/job_parent", '{"seconds": 5}')
  t.like(acc.operation_id, "^op%-")
  local v
  for _ = 1, 300 do
    v = get(s, "/operations/" .. acc.operation_id .. "?wait_seconds=1")
    if v.status ~= "running" then break end
  end
  t.eq(v.status, "succeeded", json.encode(v.error or json.null))
  t.eq(v.result, { child = { slept = 5 } })
  t.eq(#(v.children or {}), 1, "one child")
  local c = get(s, "/operations/" .. v.children[1].operation_id)
  t.eq({ c.tool, c.status, c.parent }, { "job_child", "succeeded", acc.operation_id })
  os.execute("kill -TERM " .. s.pid .. "; sleep 0.5")
end)

t.test("killed with SIGKILL while the child runs, the next server resumes both; no second child", function()
  local a = serve()
  local acc = post(a, "/tools/job_parent", '{"seconds": 3}', token)
  t.like(acc.operation_id, "^op%-", "accepted")
  local child
  for _ = 1, 250 do
    local v = get(a, "/operations/" .. acc.operation_id, token)
    child = v.children and v.children[1]
    if child and child.phase == "working" then break end
    os.execute("sleep 0.02")
  end
  t.ok(child and child.phase == "working", "the child is working")
  os.execute("kill -9 " .. a.pid .. "; sleep 0.2")
  local b = serve()
  t.like(b.err(), "resumed 2 running operations")
  local v
  for _ = 1, 300 do
    v = get(b, "/operations/" .. acc.operation_id .. "?wait_seconds=1", token)
    if v.status ~= "running" then break end
  end
  t.eq(v.status, "succeeded", json.encode(v.error or json.null))
  t.eq(v.result, { child = { slept = 3 } })
  local children = get(b, "/operations?tool=job_child&limit=50", token).operations or {}
  local mine = 0
  for _, c in ipairs(children) do if c.parent == acc.operation_id then mine = mine + 1 end end
  t.eq(mine, 1, "one child operation, resumed, not started again")
  t.eq(get(b, "/operations/" .. child.operation_id, token).status, "succeeded")
  os.execute("kill -TERM " .. b.pid .. "; sleep 0.5")
end)
