-- make bench: the web UI's weight in a real browser (tests/web/weight.mjs,
-- headless chromium through playwright-core): the HTTP requests and bytes
-- received when a signed-in tab first opens the Clusters page with an empty
-- cache, and when it reloads it (the target: under 50 KB). Skipped, saying
-- why, without node, chromium or tests/web's playwright-core.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local function report(name, value, unit)
  print(string.format("# bench %-40s %12.1f %s", name .. ":", value, unit))
end

local function missing()
  if H.sh("command -v node") ~= 0 then return "node is absent" end
  if H.sh("test -x /usr/bin/chromium") ~= 0 then return "Debian's chromium is absent (apt-get install chromium)" end
  if H.sh("test -d tests/web/node_modules/playwright-core") ~= 0 then
    return "tests/web has no playwright-core (cd tests/web && npm ci)"
  end
end

t.test("a first load and a reload of the web UI: requests and bytes", function()
  local why = missing()
  if why then t.skip(why) end
  local dir = H.tmpdir()
  t.cleanup(function() os.execute("rm -rf " .. H.quote(dir)) end)
  local srv = assert(H.serve_process(dir))
  t.cleanup(srv.stop)
  local rc, out, err = H.sh(string.format("HYPD_URL=%s HYPD_TOKEN=%s NODE_NO_WARNINGS=1 timeout 120 node " ..
    "tests/web/weight.mjs", H.quote(srv.url), H.quote(srv.token)))
  t.eq(rc, 0, err)
  local w = json.decode((out or ""):match("([^\n]+)\n*$") or "")
  t.ok(w and w.first and w.reload, "weight.mjs printed its figures: " .. tostring(out))
  report("web first load: requests", w.first.requests, "requests")
  report("web first load: bytes received", w.first.bytes / 1024, "KB")
  report("web reload: requests", w.reload.requests, "requests")
  report("web reload: answered 304", w.reload.statuses["304"] or 0, "requests")
  report("web reload: bytes received", w.reload.bytes / 1024, "KB")
end)
