-- make bench: monitor_get_cluster at scale. A sandbox in another process
-- (tests/tools/monitor_sandbox.lua: 2,000 nodes, 60,000 training pods of
-- about 4 KB of JSON each), then: the first answer (the cache built from
-- paginated lists), a cached answer, the peak RSS of this hypd process
-- (VmHWM), and `kubectl get pods -A -o json` on the same cluster. Each
-- number is printed next to its target; nothing here asserts a time.
--   MONITOR_NODES, MONITOR_PODS: other sizes (passed to the sandbox);
--   MONITOR_KUBECTL=0: no kubectl (it takes two minutes on 60,000 pods)
local t = require "hypd.tap"
local core = require "hypd.core"
local dispatch = require "hypd.tool.dispatch"
local json = require "hypd.json"
local kcache = require "hypd.k8s.cache"
local sys = require "hypd.sys"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local function report(name, value, unit, target)
  print(string.format("# bench %-40s %12.1f %-6s (target: %s)", name .. ":", value, unit, target))
end

local function vm(key)
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match(key .. ":%s*(%d+) kB") or 0) / 1024
end

local READ = { name = "bench", scope = "read", front = "bench" }
local dir = H.tmpdir()
local pid, env, sandbox_says

t.test("a sandbox process with the cluster", function()
  local out = dir .. "/sandbox.out"
  local p = io.popen(string.format("env HYPD_STATE=%s %s --log-level warn test tests/tools/monitor_sandbox.lua " ..
    ">%s 2>&1 & echo $!", H.quote(dir .. "/state"), H.hypd, H.quote(out)))
  pid = p:read("l")
  p:close()
  t.cleanup(function() os.execute("kill " .. pid .. " 2>/dev/null") end)
  for _ = 1, 6000 do -- seeding 60,000 pods takes a minute or so
    local text = H.read(out) or ""
    local line = text:match("MONITOR%-SANDBOX (%b{})")
    if line then
      env, sandbox_says = json.decode(line), text:match("# seeded [^\n]+")
      break
    end
    if text:match("\nnot ok") then error("the sandbox failed: " .. text, 0) end
    task.sleep(0.05)
  end
  t.ok(env, "the sandbox is up")
  print(sandbox_says and ("# " .. sandbox_says:sub(3)) or "# the sandbox did not say how it seeded")
  -- this process's AWS environment points at the sandbox process until
  -- the end of this file (make bench runs the other benches after it)
  local saved = {}
  local names = { "AWS_PROFILE", "AWS_SESSION_TOKEN" }
  for svc in pairs(require("hypd.aws").SERVICES) do names[#names + 1] = require("hypd.aws").endpoint_env(svc) end
  for k in pairs(env) do names[#names + 1] = k end
  for _, k in ipairs(names) do saved[k] = os.getenv(k) or false end
  t.cleanup(function()
    for k, v in pairs(saved) do if v then sys.setenv(k, v) else sys.setenv(k) end end
  end)
  for _, k in ipairs(names) do sys.setenv(k) end
  for k, v in pairs(env) do sys.setenv(k, v) end
  require("hypd.tool.loader").load()
end)

t.test("monitor_get_cluster: cold, cached, peak RSS", function()
  if not env then return t.skip("no sandbox") end
  local before = vm("VmRSS")
  local start = core.mono()
  local out, err = dispatch.call("monitor_get_cluster", { cluster = "bench-mon" }, READ)
  local cold = core.mono() - start
  t.ok(out, "answered: " .. json.encode(err))
  if not out or out.errors then
    print("# the sandbox's log ends: " .. tostring((H.read(dir .. "/sandbox.out") or ""):sub(-3000)):gsub("\n", "\n# "))
  end
  if not out then return end
  t.eq(out.cache.state, "cold")
  t.eq(out.pods.total, tonumber(os.getenv("MONITOR_PODS") or "") or 60000, "every pod counted")
  t.eq(out.nodes.total, tonumber(os.getenv("MONITOR_NODES") or "") or 2000, "every node counted")
  report("monitor cold (lists, 60,000 pods)", cold, "s", "< 3 s")
  report("monitor cache build (lists only)", out.cache.built_seconds or -1, "s", "< 3 s")
  local n, start2 = 20, core.mono()
  for _ = 1, n do
    out = assert(dispatch.call("monitor_get_cluster", { cluster = "bench-mon" }, READ))
  end
  local cached = (core.mono() - start2) / n
  t.eq(out.cache.state, "warm")
  report("monitor cached answer", cached * 1000, "ms", "< 50 ms")
  start2 = core.mono()
  for _ = 1, n do
    out = assert(dispatch.call("monitor_get_cluster", { cluster = "bench-mon", namespace = "team-3" }, READ))
  end
  report("monitor cached answer, one namespace", (core.mono() - start2) / n * 1000, "ms", "< 50 ms")
  t.eq(out.namespace, "team-3")
  collectgarbage()
  report("hypd peak RSS (VmHWM)", vm("VmHWM"), "MB", "< 300 MB")
  report("hypd RSS held by the cache", vm("VmRSS") - before, "MB", "-")
  report("cold vs kubectl (see below)", cold, "s", "faster than kubectl get pods -A -o json")
  kcache.stop_all()
  task.sleep(0.1)
end)

t.test("where the cold time goes: the pod pages' transfer, then their projected decode", function()
  if not env then return t.skip("no sandbox") end
  local conn = require("hypd.k8s").connect { cluster = "bench-mon", region = "us-west-2" }
  assert(conn:kind("v1", "Pod"))
  local keep = { metadata = true, items = dofile("lua/workflows/monitor/_kinds.lua").KINDS[2].keep }
  local cont, bytes, pages, took, decode = nil, 0, 0, 0, 0
  repeat
    local p = "/api/v1/pods?limit=500" .. (cont and ("&continue=" .. cont:gsub("[^%w]", function(c)
      return string.format("%%%02X", c:byte())
    end)) or "")
    local start = core.mono()
    local resp = assert(conn:request("GET", p))
    took = took + core.mono() - start
    bytes, pages = bytes + #resp.body, pages + 1
    start = core.mono()
    local l = assert(json.decode(resp.body, { keep = keep }))
    decode = decode + core.mono() - start
    cont = l.metadata.continue
    if cont == "" then cont = nil end
  until not cont
  report("pod pages: transfer (one at a time)", took, "s", "-")
  report("pod pages: projected decode", decode, "s", "-")
  report("pod pages: bytes", bytes / 1048576, "MB", "-")
  report("pod pages", pages, "pages", "-")
end)

t.test("kubectl get pods -A -o json on the same cluster", function()
  if not env then return t.skip("no sandbox") end
  if H.sh("command -v kubectl") ~= 0 then return t.skip("no kubectl on this machine") end
  if os.getenv("MONITOR_KUBECTL") == "0" then return t.skip("MONITOR_KUBECTL=0") end
  local kc = dir .. "/kubeconfig"
  local rc, _, err = H.with_env(env, dir, H.hypd .. " kubeconfig --cluster bench-mon --write " .. H.quote(kc))
  t.eq(rc, 0, "hypd kubeconfig: " .. tostring(err))
  local start = core.mono()
  local krc, _, kerr = H.with_env(env, dir, "sh -c " .. H.quote("kubectl --kubeconfig " .. H.quote(kc) ..
    " --cache-dir " .. H.quote(dir .. "/kcache") .. " get pods -A -o json > " .. H.quote(dir .. "/pods.json")))
  local secs = core.mono() - start
  t.eq(krc, 0, "kubectl: " .. tostring(kerr))
  local f = io.open(dir .. "/pods.json")
  local size = f and f:seek("end") or 0
  if f then f:close() end
  report("kubectl get pods -A -o json", secs, "s", "slower than the cold answer")
  io.stdout:flush()
  report("kubectl's JSON", size / 1048576, "MB", "-")
end)

t.cleanup(function() os.execute("rm -rf " .. H.quote(dir)) end)
