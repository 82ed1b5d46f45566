-- /ws topic monitor:<cluster>: a subscriber (a token of scope read: the
-- tool is a read tool) gets monitor_get_cluster's answer at once, then a
-- new snapshot when the cluster changes; a cluster that does not exist is
-- an error message on the topic. The sandbox runs in this process; the
-- client is tests/tools/ws_client.py (scenario hypd_monitor).
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local aws = require "hypd.aws"
local core = require "hypd.core"
local json = require "hypd.json"
local kcache = require "hypd.k8s.cache"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local skube = require "sandbox.k8s"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local _, OPTS = H.sandbox_here()
require("hypd.tool.loader").load()
local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end
local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local token = assert(auth.create { name = "ws-monitor", scope = "read" })
local dir = H.tmpdir()
local cl

local function client(topic, name, snapshots)
  local out = dir .. "/" .. name .. ".json"
  os.execute(string.format("WS_TOKEN=%s WS_TOPIC=%s WS_SNAPSHOTS=%d WS_READY=%s python3 tests/tools/ws_client.py " ..
    "%d hypd_monitor %s >%s.log 2>&1 &", H.quote(token), H.quote(topic), snapshots, H.quote(out .. ".ready"), srv.port,
    H.quote(out), H.quote(out)))
  return out
end

local function await_file(path)
  for _ = 1, 1500 do
    local s = H.read(path)
    if s then return s end
    task.sleep(0.02)
  end
end

local function pod(name)
  assert(cl:create(cl.reg:find("", "v1", "pods"), { metadata = { name = name, namespace = "default" },
    spec = { containers = { { name = "c", image = "busybox" } } } }))
end

-- each test stops the cache whatever happens (its watches are open
-- transfers the harness would wait for)
local function stopping(fn)
  return function()
    local ok, err = pcall(fn)
    kcache.stop_all()
    task.sleep(0.1)
    if not ok then error(err, 0) end
  end
end

t.test("a subscriber gets a snapshot at once and another at a change", stopping(function()
  H.eks_cluster(call, "ws-mon", 73) -- under the virtual clock: minutes of creation at once
  core.virtual(false) -- then the real one: the client is another process
  cl = skube.cluster("us-west-2", "ws-mon")
  pod("one")
  local out = client("monitor:ws-mon", "good", 2)
  if not await_file(out .. ".ready") then
    error("no first snapshot; the client says: " .. tostring(await_file(out) or H.read(out .. ".log")), 0)
  end
  pod("two")
  local r = json.decode(await_file(out))
  t.eq(r.status, 101)
  local snaps = {}
  for _, m in ipairs(r.messages) do
    if m.type == "event" then
      t.eq(m.topic, "monitor:ws-mon")
      snaps[#snaps + 1] = m.event.snapshot
    end
    t.ok(m.type ~= "error", "no error: " .. tostring(m.message))
  end
  t.eq(#snaps, 2, "two snapshots")
  t.eq(snaps[1].cluster, "ws-mon")
  t.eq(snaps[1].pods.total, 1, "the first as the cluster was")
  t.eq(snaps[2].pods.total, 2, "the second after the change")
  t.ok(snaps[2].cache and snaps[2].cache.state == "warm", "from the cache")
  for _, k in ipairs { "nodes", "instance_groups", "gpus", "pending", "services", "deployments", "events", "history" } do
    t.ok(snaps[2][k] ~= nil, "the snapshot has " .. k)
  end
end))

t.test("a cluster that does not exist is an error on the topic", stopping(function()
  local out = client("monitor:no-such-cluster", "missing", 1)
  local r = json.decode(await_file(out))
  local err
  for _, m in ipairs(r.messages) do if m.type == "error" then err = m end end
  t.ok(err, "an error message")
  t.like(err and err.message or "", "no%-such%-cluster")
end))

t.cleanup(function()
  kcache.stop_all()
  srv:stop()
  skube.stop_all()
  os.execute("rm -rf " .. H.quote(dir))
end)
