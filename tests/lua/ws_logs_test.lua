-- Live log streams on /ws of hypd serve, against the in-process sandbox
-- under the virtual clock (an EKS cluster with a HyperPod cluster of three
-- nodes). The clients are real WebSocket clients (tests/tools/
-- ws_logs_client.py): they authenticate, send logs.follow and a ping, and
-- collect what arrives. While a client connects the test keeps an HTTP
-- request in flight, so simulated time stands still (nothing is written
-- meanwhile); then it lets time run and the pods write their numbered lines
-- (the sandbox's seq_loop program: `for i in $(seq 1 N); do echo ...;
-- sleep 1; done`). The sandbox fault log_stream_cuts cuts a follow in the
-- middle of a line, as an API server drops a long stream.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local _, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local LH = dofile("tests/lua/logs_helpers.lua")
local call = FH.aws(OPTS)
local auth = require "hypd.api.auth"
local faults = require "sandbox.faults"
local http = require "hypd.http"
local json = require "hypd.json"
local logstream = require "hypd.logstream"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local EKS, HP = "wslogs-a", "wslogs-a-hp"
local READER = { name = "ws-logs-reader", scope = "read", front = "test" }

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local BASE = "http://127.0.0.1:" .. srv.port
local token = assert(auth.create { name = "ws-logs", scope = "read" })
local dir = H.tmpdir()
local conn

-- hold(path, seconds) -> the file's text: waits for it with an HTTP request
-- always in flight, so simulated time stands still
local function hold(path, seconds)
  local deadline = os.time() + (seconds or 30)
  while os.time() < deadline do
    local s = H.read(path)
    if s then return s end
    http.request { url = BASE .. "/api/v1/health", timeout = 5 }
  end
end

-- run(path, seconds) -> the file's text: waits for it while simulated time runs
local function run(path, seconds)
  local deadline = os.time() + (seconds or 60)
  while os.time() < deadline do
    local s = H.read(path)
    if s then return s end
    task.sleep(0.5)
    http.request { url = BASE .. "/api/v1/health", timeout = 5 }
  end
end

local n = 0
-- client(connections) -> outfile: starts the client; returns once every
-- connection has its follows open (simulated time held meanwhile)
local function client(connections)
  n = n + 1
  local out = dir .. "/c" .. n .. ".json"
  local spec = json.encode { token = token, connections = connections, seconds = 60 }
  os.execute(string.format("python3 tests/tools/ws_logs_client.py %d %s %s %s >%s.log 2>&1 &", srv.port,
    H.quote(out), H.quote(out .. ".ready"), H.quote(spec), H.quote(out)))
  t.ok(hold(out .. ".ready"), "the client's follows are open")
  return out
end

local function result(out)
  local r = json.decode(run(out) or "{}") or {}
  for i, c in ipairs(r.connections or {}) do
    t.eq(c.error, nil, "connection " .. i .. " ran")
  end
  return r.connections or {}
end

local function lines(c, id)
  local out, ends = {}, {}
  for _, m in ipairs(c.messages or {}) do
    if m.type == "logs.line" and m.id == id then out[#out + 1] = m.line end
    if m.type == "logs.end" and m.id == id then ends[#ends + 1] = m end
  end
  return out, ends
end

local function follow(id, kind, name, extra)
  local m = { type = "logs.follow", id = id, cluster = EKS, kind = kind, name = name }
  for k, v in pairs(extra or {}) do m[k] = v end
  return m
end

local function container(script)
  return { name = "main", image = "busybox:1.36", command = { "sh", "-c", script } }
end

local function deployment(name, script)
  return assert(conn:create { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = name, namespace = "default" },
    spec = { replicas = 1, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = { app = name } }, spec = { containers = { container(script) } } } } })
end

-- lines_of(kind, name, n): waits (simulated time running) until the
-- workload has written n lines
local function lines_of(kind, name, count)
  FH.wait(function()
    local r = dispatch.call("job_get_logs", { cluster = EKS, kind = kind, name = name }, READER)
    return r and #r.lines >= count
  end, 300, 0.5)
end

t.test("a cluster: EKS and a HyperPod cluster with a group of three ml.g5.12xlarge nodes", function()
  conn = FH.gpu_cluster(call, EKS, HP, 84, 3)
  t.ok(conn, "three GPU nodes")
end)

t.test("a WebSocket client receives every line of a running job in order, with no duplicates across two " ..
  "upstream reconnects, and the stream ends with completed when the pod ends", function()
  -- every follow of the job's pod is cut in the middle of its 8th line, twice
  assert(faults.configure { log_stream_cuts = { { pod_prefix = "ticker-", after_lines = 8, count = 2 } } })
  assert(conn:create { apiVersion = "batch/v1", kind = "Job", metadata = { name = "ticker", namespace = "default" },
    spec = { backoffLimit = 0, template = { spec = { restartPolicy = "Never",
      containers = { container('for i in $(seq 1 30); do echo "n=$i of 30"; sleep 1; done') } } } } })
  lines_of("job", "ticker", 3)
  local before = logstream.stats()
  local out = client { { follows = { follow("run", "job", "ticker", { tail = 5000 }) } } }
  local c = result(out)[1] or {}
  local got, ends = lines(c, "run")
  local want = {}
  for i = 1, 30 do want[i] = "n=" .. i .. " of 30" end
  t.eq(got, want, "all 30 lines, in order, none twice, none cut")
  t.eq(#ends, 1, "one logs.end")
  t.eq(ends[1] and ends[1].reason, "completed")
  local last = c.messages and c.messages[#c.messages]
  t.eq(last and last.type, "logs.end", "logs.end is the last message of the follow")
  local after = logstream.stats()
  t.ok(after.reconnects - before.reconnects >= 2, "the upstream reconnected: " .. json.encode(after))
  t.ok(after.deduped - before.deduped >= 1, "lines sent again after a reconnect were dropped")
  for _, m in ipairs(c.messages or {}) do
    if m.type == "logs.line" then
      t.like(m.pod, "^ticker%-")
      t.eq(m.container, "main")
      t.like(m.time, "^%d%d%d%d%-%d%d%-%d%dT")
    end
  end
  faults.configure {}
  t.eq({ after.groups, after.upstreams }, { 0, 0 }, "nothing left running")
end)

t.test("two subscribers on two connections share one upstream stream; logs.stop ends each with stopped", function()
  deployment("shared", 'for i in $(seq 1 40); do echo "s$i"; sleep 1; done; sleep 3600')
  lines_of("deployment", "shared", 2)
  local before = logstream.stats()
  local out = client {
    { follows = { follow("x", "deployment", "shared") }, stop = { x = 12 } },
    { follows = { follow("y", "deployment", "shared") }, stop = { y = 12 } },
  }
  local mid = logstream.stats()
  t.eq({ mid.groups - before.groups, mid.subscribers - before.subscribers }, { 1, 2 }, "one group, two subscribers")
  local m = assert(http.request { url = BASE .. "/metrics", headers = { authorization = "Bearer " .. token } })
  t.like(m.body, "\nhypd_log_follow_subscribers 2\n", "/metrics counts the two follows")
  t.like(m.body, "\nhypd_log_follow_upstreams 1\n", "and the one upstream they share")
  local cs = result(out)
  local x, xend = lines(cs[1] or {}, "x")
  local y, yend = lines(cs[2] or {}, "y")
  t.ok(#x >= 12 and #y >= 12, #x .. " and " .. #y .. " lines")
  local same = true
  for i = 1, 12 do same = same and x[i] == y[i] and x[i] == "s" .. i end
  t.ok(same, "both got s1..s12: " .. table.concat(x, ",") .. " / " .. table.concat(y, ","))
  t.eq({ xend[1] and xend[1].reason, yend[1] and yend[1].reason }, { "stopped", "stopped" })
  local after = logstream.stats()
  t.eq(after.follows_opened - before.follows_opened, 1, "one upstream follow for both")
  t.eq(after.history_reads - before.history_reads, 1, "one history read")
  t.eq({ after.groups, after.upstreams, after.subscribers }, { 0, 0, 0 }, "the last stop closed the upstream")
end)

t.test("two identical lines written at the same instant both arrive once, across a cut between them", function()
  assert(faults.configure { log_stream_cuts = { { pod_prefix = "twins-", after_lines = 1, count = 1 } } })
  assert(conn:create { apiVersion = "batch/v1", kind = "Job", metadata = { name = "twins", namespace = "default" },
    spec = { backoffLimit = 0, template = { spec = { restartPolicy = "Never",
      containers = { container('for i in $(seq 1 3); do sleep 2; echo same; echo same; echo "i=$i"; done') } } } } })
  FH.wait(function()
    local r = dispatch.call("job_get_logs", { cluster = EKS, kind = "job", name = "twins", tail = 0 }, READER)
    return r and r.pods[1] and r.pods[1].containers[1].state == "running"
  end, 120, 0.5)
  local before = logstream.stats()
  local c = result(client { { follows = { follow("tw", "job", "twins") } } })[1] or {}
  local got, ends = lines(c, "tw")
  t.eq(got, { "same", "same", "i=1", "same", "same", "i=2", "same", "same", "i=3" })
  t.eq(ends[1] and ends[1].reason, "completed")
  local after = logstream.stats()
  t.eq(after.reconnects - before.reconnects, 1, "cut once, after the first line")
  t.ok(after.deduped - before.deduped >= 1, "the first line, sent again after the cut, was dropped")
  faults.configure {}
end)

t.test("a subscriber joining a running follow gets its own tail from the shared upstream, then the same lines",
  function()
    deployment("late", 'for i in $(seq 1 30); do echo "t$i"; sleep 1; done; sleep 3600')
    lines_of("deployment", "late", 2)
    local before = logstream.stats()
    local first = client { { follows = { follow("early", "deployment", "late", { tail = 5000 }) }, stop = { early = 20 } } }
    -- ten more lines written while only the first follows
    local t0 = require("hypd.core").now()
    FH.wait(function() return require("hypd.core").now() - t0 >= 10 end, 60, 0.5)
    local second = client { { follows = { follow("joined", "deployment", "late", { tail = 3 }) },
      stop = { joined = 8 } } }
    local a = lines(result(first)[1] or {}, "early")
    local b = lines(result(second)[1] or {}, "joined")
    t.ok(#a >= 20 and #b >= 8, #a .. " and " .. #b .. " lines")
    local at
    for i, l in ipairs(a) do if l == b[1] then at = i end end
    t.ok(at and at > 1, "the joiner's first line is one the first follower had: " .. tostring(b[1]))
    local same = at ~= nil
    for i = 1, 8 do same = same and b[i] == a[at + i - 1] end
    t.ok(same, "then the same lines: " .. table.concat(b, ",") .. " / " .. table.concat(a, ","))
    local after = logstream.stats()
    t.eq({ after.follows_opened - before.follows_opened, after.history_reads - before.history_reads }, { 1, 1 },
      "one upstream for both")
    t.eq({ after.groups, after.upstreams }, { 0, 0 })
  end)

t.test("a follow of the active cluster's workload with no pods yet waits for them: scaled up from 0, its lines come",
  function()
    require("hypd.clusters").set_active { name = EKS, region = "us-west-2" }
    local d = deployment("later", 'for i in $(seq 1 20); do echo "p$i"; sleep 1; done; sleep 3600')
    assert(conn:patch("apps/v1", "Deployment", "later", { spec = { replicas = 0 } }, { namespace = "default" }))
    FH.wait(function() return #conn:list("v1", "Pod", { namespace = "default", labels = { app = "later" } }) == 0 end,
      60, 0.5)
    local m = follow("w", "deployment", "later")
    m.cluster = nil -- the active one
    local out = client { { follows = { m }, stop = { w = 3 } } }
    task.spawn(function()
      task.sleep(3)
      assert(conn:patch("apps/v1", "Deployment", "later", { spec = { replicas = 1 } }, { namespace = "default" }))
    end)
    local got, ends = lines(result(out)[1] or {}, "w")
    t.eq({ got[1], got[2], got[3] }, { "p1", "p2", "p3" }, "the first pod's lines from its first")
    t.eq(ends[1] and ends[1].reason, "stopped")
    t.ok(d, "deployment made")
  end)

t.test("a Job's next pod after a failed one is followed too; the Job failing ends the stream with completed",
  function()
    assert(conn:create { apiVersion = "batch/v1", kind = "Job", metadata = { name = "retry", namespace = "default" },
      spec = { backoffLimit = 1, template = { metadata = { annotations = { ["sandbox.hypd.io/exit-code"] = "1" } },
        spec = { restartPolicy = "Never",
          containers = { container('for i in $(seq 1 3); do echo "try $i"; sleep 2; done') } } } } })
    lines_of("job", "retry", 1)
    local c = result(client { { follows = { follow("re", "job", "retry", { tail = 5000 }) } } })[1] or {}
    local got, ends = lines(c, "re")
    t.eq(got, { "try 1", "try 2", "try 3", "try 1", "try 2", "try 3" }, "both pods' lines, one pod after the other")
    local pods = {}
    for _, m in ipairs(c.messages or {}) do if m.type == "logs.line" then pods[m.pod] = true end end
    local npods = 0
    for _ in pairs(pods) do npods = npods + 1 end
    t.eq(npods, 2, "two pods")
    t.eq(ends[1] and ends[1].reason, "completed")
    t.like(ends[1] and ends[1].message or "", "is Failed")
  end)

t.test("a deleted target ends the stream with deleted, a finished one with completed after its last lines; " ..
  "bad follows are errors naming the id", function()
  deployment("doomed", 'for i in $(seq 1 100); do echo "d$i"; sleep 1; done')
  lines_of("deployment", "doomed", 1)
  local out = client { { follows = {
    follow("gone", "deployment", "doomed"),
    follow("done", "job", "ticker", { tail = 2 }),
    follow("nope", "job", "no-such-job"),
    follow("bad", "statefulset", "x"),
    { type = "logs.follow", kind = "pod", name = "x" },
  } } }
  task.spawn(function()
    task.sleep(3)
    assert(conn:delete("apps/v1", "Deployment", "doomed", { namespace = "default" }))
  end)
  local c = result(out)[1] or {}
  local got, ends = lines(c, "gone")
  t.ok(#got >= 1, #got .. " lines before the delete")
  t.eq(ends[1] and ends[1].reason, "deleted")
  local done, dends = lines(c, "done")
  t.eq(done, { "n=29 of 30", "n=30 of 30" }, "a finished job: its last lines")
  t.eq(dends[1] and dends[1].reason, "completed", "then completed at once")
  local errs = {}
  for _, m in ipairs(c.messages or {}) do
    if m.type == "error" then errs[#errs + 1] = tostring(m.id) .. ": " .. m.message end
  end
  table.sort(errs)
  t.eq(#errs, 3, json.encode(errs))
  t.like(errs[1] or "", "^bad: job_get_logs: kind: must be one of training_job, job, deployment, inference, pod")
  t.like(errs[2] or "", "^nil: logs.follow needs an id")
  t.like(errs[3] or "", "^nope: no job default/no%-such%-job")
  t.eq({ logstream.stats().groups, logstream.stats().upstreams }, { 0, 0 })
end)

t.test("a connection that closes stops its follows; the upstream closes with the last of them", function()
  deployment("left", 'for i in $(seq 1 100); do echo "l$i"; sleep 1; done')
  lines_of("deployment", "left", 1)
  -- the client closes after 3 lines without logs.stop
  local out = client { { follows = { follow("l", "deployment", "left") }, close_after = 3 } }
  t.eq(logstream.stats().subscribers, 1)
  local c = result(out)[1] or {}
  t.ok(#lines(c, "l") >= 3)
  FH.wait(function() return logstream.stats().upstreams == 0 end, 60, 0.5)
  t.eq({ logstream.stats().groups, logstream.stats().upstreams, logstream.stats().subscribers }, { 0, 0, 0 })
end)

t.test("a training job's restarted pods are followed too: a node failing mid-run, then completed", function()
  LH.training_operator(conn)
  LH.hyperpod_job(conn, "tj", { steps = 10, retries = 3 })
  lines_of("training_job", "tj", 4)
  local out = client { { follows = { follow("tj", "training_job", "tj", { tail = 5000 }) } } }
  local pod = assert(conn:get("v1", "Pod", "tj-pod-0", { namespace = "default" }))
  local uid = pod.metadata.uid
  task.spawn(function()
    task.sleep(3)
    assert(require("sandbox.k8s.controllers.nodes").fail("us-west-2", HP, pod.spec.nodeName:match("^hyperpod%-(.+)$")))
  end)
  local c = result(out)[1] or {}
  local got, ends = lines(c, "tj")
  t.eq(ends[1] and ends[1].reason, "completed", json.encode(ends))
  local starts, last = 0, false
  for _, l in ipairs(got) do
    if l:find("^%[rank 0%] Experiment configuration") then starts = starts + 1 end
    if l:find("^%[rank 0%] step 10/10") then last = true end
  end
  t.eq(starts, 2, "rank 0 started twice: the first pod and the one after the restart")
  t.ok(last, "the restarted pod's last step arrived")
  local now = assert(conn:get("v1", "Pod", "tj-pod-0", { namespace = "default" }))
  t.ok(now.metadata.uid ~= uid, "a new pod of the same name")
  t.eq({ logstream.stats().groups, logstream.stats().upstreams }, { 0, 0 })
end)

t.cleanup(function()
  srv:stop()
  os.execute("rm -rf " .. H.quote(dir))
end)
