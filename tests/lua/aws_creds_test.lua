-- hypd._aws: settings and credentials reach Lua as names, sources and
-- expirations, never as keys. Lua cannot set environment variables, so the
-- checks run in a child `hypd test` with its own environment (shared files
-- in a temporary directory, container credentials from
-- tests/tools/fake_metadata.py); each child check is mirrored here.
local t = require "hypd.tap"
local http = require "hypd.http"
local H = dofile("tests/lua/helpers.lua")

local SECRET = "wJalrXUtnFEMI-lua-test-secret-key"
local TOKEN = "FwoGZXIvYXdzELUA-session-token"
local CONTAINER_TOKEN = "pod-identity-lua-token"

local dir = H.tmpdir()
H.write(dir .. "/config", [[
[default]
region = us-west-2
max_attempts = 5
retry_mode = adaptive
services = local
endpoint_url = http://127.0.0.1:1/global

[profile dev-role]
role_arn = arn:aws:iam::123456789012:role/dev
source_profile = dev
region = eu-west-1
services = local

[services local]
sts =
  endpoint_url = http://127.0.0.1:1/sts
]])
H.write(dir .. "/credentials", string.format([[
[dev]
aws_access_key_id = AKIDLUATEST
aws_secret_access_key = %s
aws_session_token = %s
]], SECRET, TOKEN))

-- the fake container credentials endpoint
local p = assert(io.popen("python3 tests/tools/fake_metadata.py 120 2>/dev/null & echo PID $!"))
local lines = { p:read("l"), p:read("l") }
p:close()
local port, pid
for _, l in ipairs(lines) do
  port = port or (l or ""):match("^PORT (%d+)")
  pid = pid or (l or ""):match("^PID (%d+)")
end
assert(port and pid, "the fake metadata server did not start")
local configured = http.request { method = "POST", url = "http://127.0.0.1:" .. port .. "/_config",
  body = string.format('{"container_token": "%s"}', CONTAINER_TOKEN) }
assert(configured and configured.status == 200, "the fake took its configuration")

-- the child's checks: one t.test each; names are mirrored below
local CHILD = [==[
local t = require "hypd.tap"
local aws = require "hypd._aws"
local sched = require "hypd._sched"
local SECRET, TOKEN, CONTAINER_TOKEN = %q, %q, %q

-- walks every key and value of v; true when none holds a secret
local function clean(v, seen)
  seen = seen or {}
  if type(v) == "string" then
    return not (v:find(SECRET, 1, true) or v:find(TOKEN, 1, true) or v:find(CONTAINER_TOKEN, 1, true))
  end
  if type(v) ~= "table" or seen[v] then return true end
  seen[v] = true
  for k, x in pairs(v) do
    if type(k) == "string" and (k:find("secret") or k:find("token") or k:find("access_key")) then
      return false
    end
    if not clean(k, seen) or not clean(x, seen) then return false end
  end
  return true
end

local function await(id) return sched.await("job", id) end

t.test("config gives the default profile's settings", function()
  local c = assert(aws.config())
  t.eq(c.profile, "default")
  t.eq(c.region, "us-west-2")
  t.eq(math.type(c.max_attempts), "integer")
  t.eq(c.max_attempts, 5)
  t.eq(c.retry_mode, "adaptive")
  t.eq(c.endpoint_url, "http://127.0.0.1:1/global")
  t.eq(c.services, { sts = { endpoint_url = "http://127.0.0.1:1/sts" } })
  t.eq(c.ignore_configured_endpoint_urls, false)
end)

t.test("config never holds a secret key or token", function()
  t.ok(clean(assert(aws.config())), "default profile")
  t.ok(clean(assert(aws.config("dev"))), "profile with static keys")
  t.ok(clean(assert(aws.config("dev-role"))), "role profile")
end)

t.test("config of a role profile gives its role settings", function()
  local c = assert(aws.config("dev-role"))
  t.eq({ c.role_arn, c.source_profile, c.region },
    { "arn:aws:iam::123456789012:role/dev", "dev", "eu-west-1" })
end)

t.test("config of a missing profile fails with NOT_FOUND", function()
  t.fails(nil, select(2, aws.config("nosuch")), "NOT_FOUND")
end)

t.test("region and endpoint_url follow the shared files", function()
  t.eq(aws.region(), "us-west-2")
  t.eq(aws.region("dev-role"), "eu-west-1")
  t.eq(aws.endpoint_url("sts"), "http://127.0.0.1:1/sts")
  t.eq(aws.endpoint_url("s3"), "http://127.0.0.1:1/global")
end)

t.test("credentials resolve through the job path and give no key", function()
  local r = await(aws.credentials("dev"))
  t.eq(r, { source = "profile:dev", profile = "dev" })
  t.ok(clean(r))
end)

t.test("credentials_cached gives the same info without waiting", function()
  t.eq(aws.credentials_cached("dev"), { source = "profile:dev", profile = "dev" })
  t.eq(aws.credentials_cached("dev-role"), nil)
end)

t.test("a missing profile gives a CREDENTIALS error naming it", function()
  local r = await(aws.credentials("nosuch"))
  t.eq(r.err.code, "CREDENTIALS")
  t.like(r.err.message, "nosuch")
end)

t.test("container credentials come with their expiration", function()
  local r = await(aws.credentials())
  t.eq(r.source, "container")
  t.eq(r.profile, "default")
  t.ok(type(r.expiration) == "number" and r.expiration > os.time() + 3000, "an expiration an hour ahead")
  t.ok(clean(r))
end)

t.test("a role whose STS is unreachable fails with what was tried", function()
  local r = await(aws.credentials("dev-role"))
  t.eq(r.err.code, "CREDENTIALS")
  t.like(r.err.message, "127%%.0%%.0%%.1:1/sts")
  t.ok(clean(r.err.message))
end)

t.test("imds_region reports a disabled metadata service", function()
  local r = await(aws.imds_region())
  t.eq(r.err.code, "IMDS")
  t.like(r.err.message, "disabled")
end)
]==]

local names = {}
for name in CHILD:gmatch('t%.test%("([^"]+)"') do names[#names + 1] = name end

local child = dir .. "/child_test.lua"
H.write(child, string.format(CHILD, SECRET, TOKEN, CONTAINER_TOKEN))
local env = {
  PATH = os.getenv("PATH"), HOME = dir, HYPD_STATE = dir .. "/state", HYPD_LOG_LEVEL = "debug",
  AWS_CONFIG_FILE = dir .. "/config", AWS_SHARED_CREDENTIALS_FILE = dir .. "/credentials",
  AWS_EC2_METADATA_DISABLED = "true",
  AWS_CONTAINER_CREDENTIALS_FULL_URI = "http://127.0.0.1:" .. port .. "/container/lua",
  AWS_CONTAINER_AUTHORIZATION_TOKEN = CONTAINER_TOKEN,
}
local parts = { "env -i" }
for k, v in pairs(env) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
parts[#parts + 1] = H.quote(H.hypd) .. " test " .. H.quote(child)
local status, out, err = H.sh(table.concat(parts, " "))
os.execute("kill " .. pid .. " 2>/dev/null")
os.execute("rm -rf " .. H.quote(dir))

t.test("the child run passes every check", function()
  t.eq(status, 0, (out or "") .. (err or ""))
  t.ok(#names >= 10, "the child has its checks")
  t.like(out, "1%.%." .. #names)
end)

for _, name in ipairs(names) do
  local pat = name:gsub("%p", "%%%0")
  t.test(name, function()
    local passed = ("\n" .. (out or "")):match("\nok %d+ %- " .. pat .. "\n")
    local why = (out or ""):match("not ok %d+ %- " .. pat .. "[^\n]*\n[^\n]*\n[^\n]*")
    t.ok(passed, "the child reports: " .. (why or "nothing"))
  end)
end

t.test("no output of the child, logs included, holds a secret", function()
  local all = (out or "") .. (err or "")
  t.ok(not all:find(SECRET, 1, true), "the secret key stays out")
  t.ok(not all:find(TOKEN, 1, true), "the session token stays out")
  t.ok(not all:find(CONTAINER_TOKEN, 1, true), "the container token stays out")
  t.like(err, "creds: credentials for dev from profile:dev", "the debug log was on")
end)
