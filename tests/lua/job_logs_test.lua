-- job_get_logs against the in-process sandbox under the virtual clock: an
-- EKS cluster with a HyperPod cluster of three ml.g5.12xlarge nodes; the
-- pods' lines come from the sandbox kubelet (echo words of the command,
-- and the seq_loop program for a `for i in $(seq ...)` loop that prints
-- numbered lines over its run time). A batch Job's own pod (not another
-- workload's), a Deployment's two pods interleaved by time with the pod
-- names, one pod, one container, an inference deployment's pods (by its
-- label), tail and since_seconds, a training job's pods, and the errors: no pods yet (saying the phase), a container still
-- starting, a pod or container that is not the workload's, a missing name.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local _, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local LH = dofile("tests/lua/logs_helpers.lua")
local call = FH.aws(OPTS)
local dispatch = require "hypd.tool.dispatch"
local core, json = require "hypd.core", require "hypd.json"
local READER = { name = "logs-reader", scope = "read", front = "test" }
local EKS, HP = "logs-a", "logs-a-hp"

local conn

local function logs(args)
  args.cluster = EKS
  return dispatch.call("job_get_logs", args, READER)
end

local function texts(r, pod)
  local out = {}
  for _, l in ipairs(r and r.lines or {}) do
    if not pod or l.pod == pod then out[#out + 1] = l.line end
  end
  return out
end

local function seq(prefix, a, b)
  local out = {}
  for i = a, b do out[#out + 1] = prefix .. i end
  return out
end

local function container(name, script)
  return { name = name, image = "busybox:1.36", command = { "sh", "-c", script } }
end

local function job(name, script, extra)
  local j = { apiVersion = "batch/v1", kind = "Job", metadata = { name = name, namespace = "default" },
    spec = { backoffLimit = 0, template = { spec = { restartPolicy = "Never",
      containers = { container("main", script) } } } } }
  for k, v in pairs(extra or {}) do j.spec.template.spec[k] = v end
  return assert(conn:create(j))
end

local function deployment(name, replicas, containers, extra)
  local d = { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = name, namespace = "default" },
    spec = { replicas = replicas, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = { app = name } }, spec = { containers = containers } } } }
  for k, v in pairs(extra or {}) do d.spec.template.spec[k] = v end
  return assert(conn:create(d))
end

local function complete(name)
  FH.wait(function()
    local j = conn:get("batch/v1", "Job", name, { namespace = "default" })
    for _, c in ipairs(j and j.status and j.status.conditions or {}) do
      if c.type == "Complete" and c.status == "True" then return true end
    end
  end, 600, 1)
end

local function epoch(ts)
  local frac = tonumber("0" .. (ts:match("(%.%d+)Z$") or ""))
  return require("sandbox.k8s.table").epoch(ts) + frac
end

t.test("the sandbox's seq_loop program reads a counting loop as a shell runs it", function()
  local P = require "sandbox.k8s.programs.seq_loop"
  local function run(c)
    local p = P.parse(c)
    if not p then return nil end
    local out = {}
    local function each(list, v)
      for _, st in ipairs(list) do
        if st.echo then out[#out + 1] = P.expand(p, st.echo, v) end
      end
    end
    each(p.before)
    for i = p.from, p.to do each(p.body, tostring(i)) end
    each(p.after)
    return out, P.run_seconds(nil, c)
  end
  local out, secs = run(container("main", 'echo start; for i in $(seq 1 3); do echo "line $i"; sleep 0.5; done; echo done'))
  t.eq(out, { "start", "line 1", "line 2", "line 3", "done" })
  t.eq(secs, 1.5)
  out, secs = run { name = "m", image = "busybox", command = { "/bin/sh", "-c" },
    args = { "for n in $(seq 4); do sleep 2; echo 'row ${n}'; done" } }
  t.eq(out, { "row 1", "row 2", "row 3", "row 4" }, "seq N, ${var}, single quotes, sleep first")
  t.eq(secs, 8)
  t.eq(run(container("main", "echo hello; sleep 3600")), nil, "no loop: not this program")
end)

t.test("a cluster: EKS and a HyperPod cluster with a group of three ml.g5.12xlarge nodes", function()
  conn = FH.gpu_cluster(call, EKS, HP, 83, 3)
  t.ok(conn, "three GPU nodes")
end)

t.test("a batch Job's log is its own pod's lines in order, each with its pod and container", function()
  deployment("other", 1, { container("main", "echo not-the-job; sleep 3600") })
  job("count", 'for i in $(seq 1 5); do echo "line $i"; sleep 1; done')
  complete("count")
  local r, err = logs { kind = "job", name = "count" }
  t.ok(r, err and err.message)
  t.eq(texts(r), seq("line ", 1, 5), "the loop's lines, in order, nothing of the other Deployment")
  t.eq(#(r and r.pods or {}), 1)
  local pod = r and r.pods[1] or {}
  t.like(pod.name, "^count%-")
  t.eq(pod.phase, "Succeeded")
  for _, l in ipairs(r and r.lines or {}) do
    t.eq({ l.pod, l.container }, { pod.name, "main" })
    t.like(l.time, "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d")
  end
  t.eq({ r and r.phase, r and r.finished }, { "Complete", true })
  t.ok(epoch(r.lines[5].time) - epoch(r.lines[1].time) >= 4, "the lines were written a second apart")
end)

t.test("a Deployment's two pods come interleaved by time, each line with its pod; pod reads one of them", function()
  deployment("web", 2, { container("server", 'for i in $(seq 1 4); do echo "tick $i"; sleep 2; done; sleep 3600') })
  local r
  FH.wait(function()
    r = logs { kind = "deployment", name = "web" }
    return r and #r.lines == 8
  end, 120, 1)
  t.eq(#(r and r.lines or {}), 8, "four lines from each of the two pods")
  t.eq(#(r and r.pods or {}), 2)
  local names = { r.pods[1].name, r.pods[2].name }
  t.ok(names[1] ~= names[2], "two pods")
  for _, n in ipairs(names) do
    t.eq(texts(r, n), seq("tick ", 1, 4), n .. "'s lines in order")
  end
  local sorted, pods = true, {}
  for i, l in ipairs(r.lines) do
    pods[l.pod] = true
    if i > 1 and epoch(l.time) < epoch(r.lines[i - 1].time) then sorted = false end
  end
  t.ok(sorted, "ordered by time across the pods")
  t.ok(pods[names[1]] and pods[names[2]], "both pod names appear on the lines")
  local first_two = { r.lines[1].pod, r.lines[2].pod }
  t.ok(first_two[1] ~= first_two[2] or r.lines[3].pod ~= first_two[1], "interleaved, not one pod after the other")
  local one = assert(logs { kind = "deployment", name = "web", pod = names[2] })
  t.eq(texts(one), seq("tick ", 1, 4))
  t.eq(#one.pods, 1)
  t.eq(one.pods[1].name, names[2])
  local _, err = logs { kind = "deployment", name = "web", pod = "web-nope" }
  t.eq(H.field_rules(err), { "pod:member" })
  t.like(err and err.message, "is not a pod of deployment web %(its pods: ")
end)

t.test("a pod with two containers: both by default, each line naming its container; or the one named", function()
  deployment("duo", 1, { container("a", "echo alpha; sleep 3600"), container("b", "echo beta; sleep 3600") })
  local r
  FH.wait(function()
    r = logs { kind = "deployment", name = "duo" }
    return r and #r.lines == 2
  end, 120, 1)
  local got = {}
  for _, l in ipairs(r and r.lines or {}) do got[#got + 1] = l.container .. ":" .. l.line end
  table.sort(got)
  t.eq(got, { "a:alpha", "b:beta" })
  local b = assert(logs { kind = "deployment", name = "duo", container = "b" })
  t.eq(texts(b), { "beta" })
  t.eq(#b.pods[1].containers, 1)
  local pod = b.pods[1].name
  local byname = assert(logs { kind = "pod", name = pod })
  t.eq(#byname.lines, 2, "kind pod reads every container of the pod")
  local _, err = logs { kind = "deployment", name = "duo", container = "zzz" }
  t.eq(H.field_rules(err), { "container:member" })
  t.like(err and err.message, "no container zzz %(containers: a, b%)")
end)

t.test("an inference deployment's pods are the ones labelled hypd.io/inference=<name>", function()
  local labels = { app = "chat-server", ["hypd.io/inference"] = "chat", ["hypd.io/inference-kind"] = "container" }
  assert(conn:create { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = "chat-server", namespace = "default", labels = labels },
    spec = { replicas = 1, selector = { matchLabels = { app = "chat-server" } },
      template = { metadata = { labels = labels }, spec = { containers = {
        container("vllm", "echo model loaded; echo serving on 8000; sleep 3600") } } } } })
  local r
  FH.wait(function()
    r = logs { kind = "inference", name = "chat" }
    return r and #r.lines == 2
  end, 120, 1)
  t.eq(texts(r), { "model loaded", "serving on 8000" })
  t.like(r and r.pods[1].name, "^chat%-server%-")
  t.eq(r and r.phase, "1/1 ready")
  local _, err = logs { kind = "inference", name = "nobody" }
  t.eq(err and err.code, "NOT_FOUND")
  t.like(err and err.message, "no inference default/nobody")
end)

t.test("tail gives the last lines of each pod, since_seconds those of the last seconds", function()
  job("long", 'for i in $(seq 1 10); do echo "row $i"; sleep 10; done')
  complete("long")
  local all = assert(logs { kind = "job", name = "long" })
  t.eq(texts(all), seq("row ", 1, 10))
  t.eq(texts(assert(logs { kind = "job", name = "long", tail = 3 })), seq("row ", 8, 10))
  -- since: a window that starts between row 7 and row 8
  local d8 = core.now() - epoch(all.lines[8].time)
  local since = math.ceil(d8) + 1
  t.ok(since < core.now() - epoch(all.lines[7].time), "the window excludes row 7")
  t.eq(texts(assert(logs { kind = "job", name = "long", since_seconds = since })), seq("row ", 8, 10))
  t.eq(texts(assert(logs { kind = "job", name = "long", since_seconds = since, tail = 1 })), { "row 10" })
  local listed = assert(logs { kind = "job", name = "long", tail = 0 })
  t.eq({ #listed.lines, #listed.pods, listed.pods[1].containers[1].state }, { 0, 1, "terminated" },
    "tail 0 lists the pods only")
end)

t.test("a training job's pods are read by its HPJob label, interleaved", function()
  LH.training_operator(conn)
  LH.hyperpod_job(conn, "tj", { steps = 3, retries = 0 })
  local r
  FH.wait(function()
    r = logs { kind = "training_job", name = "tj" }
    return r and r.finished
  end, 300, 2)
  t.eq(r and r.phase, "Completed")
  t.eq(#(r and r.pods or {}), 2)
  local names = {}
  for _, l in ipairs(r and r.lines or {}) do names[l.pod] = (names[l.pod] or 0) + 1 end
  t.ok(names["tj-pod-0"] and names["tj-pod-1"], "lines of both pods: " .. json.encode(names))
  t.like(table.concat(texts(r, "tj-pod-1"), "\n"), "%[rank 1%] step 3/3")
end)

t.test("errors: no pods yet says the phase; a container still starting says so; unknown names", function()
  deployment("empty", 0, { container("main", "echo never") })
  local _, err = logs { kind = "deployment", name = "empty" }
  t.eq(err and err.code, "CONFLICT")
  t.like(err and err.message, "deployment default/empty has no pods yet: it is 0/0 ready")
  deployment("stuck", 1, { container("main", "echo never") }, { nodeSelector = { ["no-such"] = "label" } })
  FH.wait(function() return #(conn:list("v1", "Pod", { namespace = "default", labels = { app = "stuck" } }) or {}) == 1 end)
  _, err = logs { kind = "deployment", name = "stuck" }
  t.eq(err and err.code, "CONFLICT")
  t.like(err and err.message, "container main of pod stuck%-[%w-]+ is still starting %(Unschedulable")
  _, err = logs { kind = "job", name = "nope" }
  t.eq(err and err.code, "NOT_FOUND")
  t.like(err and err.message, "no job default/nope")
  _, err = logs { kind = "training_job", name = "nope" }
  t.like(err and err.message, "no training job default/nope")
  _, err = logs { kind = "statefulset", name = "x" }
  t.eq(H.field_rules(err), { "kind:enum" })
  _, err = logs { kind = "job", name = "count", tail = 5001 }
  t.eq(H.field_rules(err), { "tail:maximum" })
end)
