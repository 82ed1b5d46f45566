-- make bench: the Kubernetes path. hypd's client against a sandbox cluster's
-- API over HTTPS with an EKS token: listing 5,000 pods in pages, reads of
-- one object, server-side applies, and a watch's event rate.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local json = require "hypd.json"
local k8s = require "hypd.k8s"
local sandbox = require "sandbox"
local skube = require "sandbox.k8s"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local function report(name, value, unit)
  print(string.format("# bench %-40s %12.1f %s", name .. ":", value, unit))
end

local AKID, SECRET = os.getenv("AWS_ACCESS_KEY_ID"), os.getenv("AWS_SECRET_ACCESS_KEY")
local srv = assert(sandbox.start { listen = "127.0.0.1:0", credentials = { [AKID] = SECRET } })
local OPTS = { endpoint_url = "http://127.0.0.1:" .. srv.port, region = "us-west-2" }
local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end
local conn, cl

t.test("a sandbox EKS cluster (virtual clock for the setup)", function()
  core.virtual(true)
  H.eks_cluster(call, "bench", 71)
  conn = k8s.connect { cluster = "bench", region = "us-west-2", endpoint_url = OPTS.endpoint_url }
  cl = skube.cluster("us-west-2", "bench")
  local nsr, pods = cl.reg:find("", "v1", "namespaces"), cl.reg:find("", "v1", "pods")
  assert(cl:create(nsr, { metadata = { name = "load" } }))
  local start = core.mono()
  for i = 1, 5000 do
    assert(cl:create(pods, { metadata = { name = string.format("p-%05d", i), namespace = "load",
      labels = { tier = i % 2 == 0 and "a" or "b" } },
      spec = { nodeName = "n", schedulerName = "none", containers = { { name = "c", image = "busybox" } } } }))
  end
  report("sandbox object creates (durable)", 5000 / (core.mono() - start), "objects/s")
  t.ok(conn, "connected")
end)

t.test("list 5,000 pods in pages of 500 over HTTPS", function()
  local start, n = core.mono(), 0
  for _ = 1, 5 do
    local items = assert(conn:list("v1", "Pod", { namespace = "load" }))
    n = n + #items
  end
  local secs = core.mono() - start
  t.eq(n, 25000)
  report("k8s list 5000 pods", 5 / secs, "lists/s")
  report("k8s pods listed", n / secs, "pods/s")
  start = core.mono()
  local sel = assert(conn:list("v1", "Pod", { namespace = "load", labels = { tier = "a" } }))
  t.eq(#sel, 2500)
  report("k8s list with a label selector", 1 / (core.mono() - start), "lists/s")
end)

t.test("get of one object and idempotent server-side apply", function()
  local start = core.mono()
  for _ = 1, 500 do assert(conn:get("v1", "Pod", "p-00001", { namespace = "load" })) end
  report("k8s get", 500 / (core.mono() - start), "req/s")
  local cm = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "applied", namespace = "load" },
    data = { a = "1" } }
  start = core.mono()
  for _ = 1, 200 do assert(conn:apply(json.decode(json.encode(cm)))) end
  report("k8s server-side apply (no change)", 200 / (core.mono() - start), "req/s")
end)

t.test("watch events delivered", function()
  local cms = cl.reg:find("", "v1", "configmaps")
  local got = 0
  local w = task.spawn(function()
    conn:watch("v1", "ConfigMap", { namespace = "load", labels = "w=1" }, function()
      got = got + 1
      return got < 2000
    end)
  end)
  task.sleep(0.05)
  local start = core.mono()
  for i = 1, 2000 do
    assert(cl:create(cms, { metadata = { name = "w" .. i, namespace = "load", labels = { w = "1" } } }))
    if i % 100 == 0 then task.checkpoint() end
  end
  w:wait()
  t.eq(got, 2000)
  report("k8s watch events (create to delivery)", 2000 / (core.mono() - start), "events/s")
  skube.stop_all()
  srv:stop()
end)
