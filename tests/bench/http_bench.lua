-- make bench: the HTTP server under wrk (Debian package wrk) at 100
-- connections, for each way libmicrohttpd can run it: one thread polling
-- with poll(), and epoll with a pool of 2 and of 4 threads (server.start's
-- threads). Endpoints: GET /api/v1/health (no token) and a cached read,
-- POST /api/v1/tools/operation_list with a bearer token. wrk runs in the
-- background, so the engine keeps serving; numbers are reported, never
-- asserted. Without wrk the measurement is skipped and says so.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local core = require "hypd.core"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local DURATION = tonumber(os.getenv("HYPD_WRK_SECONDS") or "") or 5
local MODES = { { name = "poll, 1 thread", threads = 1 }, { name = "epoll, pool of 2", threads = 2 },
                { name = "epoll, pool of 4", threads = 4 } }

local function report(name, value, unit)
  print(string.format("# bench %-44s %12.1f %s", name .. ":", value, unit))
end

local dir = H.tmpdir()
local runs = 0

-- wrk(url, script) -> requests/s, non-2xx answers, socket errors (wrk's
-- summary), or nil and wrk's output
local function wrk(url, script)
  runs = runs + 1
  local base = string.format("%s/wrk-%d", dir, runs)
  H.write(base .. ".lua", script or "")
  os.execute(string.format("{ wrk -t2 -c100 -d%ds -s %s %s >%s.out 2>&1; mv %s.out %s.done; } &",
    DURATION, H.quote(base .. ".lua"), H.quote(url), base, base, base))
  local deadline = core.mono() + DURATION + 60
  while core.mono() < deadline do
    local out = H.read(base .. ".done")
    if out then
      local rate = tonumber(out:match("Requests/sec:%s*([%d.]+)"))
      if not rate then return nil, out end
      local errs = 0
      for n in (out:match("Socket errors:([^\n]*)") or ""):gmatch("%d+") do errs = errs + tonumber(n) end
      return rate, tonumber(out:match("Non%-2xx or 3xx responses:%s*(%d+)") or "0"), errs
    end
    task.sleep(0.1)
  end
  error("wrk did not finish: " .. url)
end

t.test("wrk at 100 connections: health and a cached read, poll against epoll with a thread pool", function()
  if H.sh("command -v wrk") ~= 0 then
    print("# bench wrk: skipped, wrk is absent (Debian: apt-get install wrk)")
    return t.skip("wrk is absent")
  end
  local token = assert(auth.create { name = "bench-wrk", scope = "admin" })
  local read = string.format([[
wrk.method = "POST"
wrk.body = '{"limit":5}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
]], token)
  for _, mode in ipairs(MODES) do
    local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, threads = mode.threads })
    local base = "http://127.0.0.1:" .. srv.port
    local ok, err = pcall(function()
      for _, ep in ipairs { { "GET /api/v1/health", "/api/v1/health" },
                            { "POST /tools/operation_list", "/api/v1/tools/operation_list", read } } do
        local rate, bad, errs = wrk(base .. ep[2], ep[3])
        t.ok(rate, "wrk ran: " .. tostring(bad))
        report(string.format("wrk %s (%s)", ep[1], mode.name), rate, "req/s")
        if bad > 0 or errs > 0 then
          print(string.format("# bench   %d answers not 2xx, %d socket errors", bad, errs))
        end
      end
    end)
    srv:stop()
    if not ok then error(err, 0) end
  end
end)

t.cleanup(function()
  os.execute("rm -rf " .. H.quote(dir))
end)
