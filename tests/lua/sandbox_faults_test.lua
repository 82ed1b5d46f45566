-- Injected faults: throttling and server errors per service at a seeded
-- rate, so the same seed gives the same faults; hypd's client retries them
-- as the standard retry mode says.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local sandbox = require "sandbox"

local srv = assert(sandbox.start { listen = "127.0.0.1:0",
  credentials = { [os.getenv("AWS_ACCESS_KEY_ID")] = os.getenv("AWS_SECRET_ACCESS_KEY") } })
local port = srv.port
local base = "http://127.0.0.1:" .. port
local OPTS = { endpoint_url = base, region = "us-west-2", max_attempts = 1 }

local function faults(spec)
  local r = http.request { method = "POST", url = base .. "/_sandbox/faults", body = json.encode(spec) }
  return r.status, r.body
end

-- the outcome of n calls as a string like "ok T ok E"
local function pattern(n)
  local out = {}
  for i = 1, n do
    local r, err = aws.try("sts", "GetCallerIdentity", {}, OPTS)
    out[i] = r and "ok" or (err.code == "Throttling" and "T" or err.code == "InternalFailure" and "E" or err.code)
  end
  return table.concat(out, " ")
end

t.test("a throttling rate of 1 throttles every call with the protocol's code", function()
  t.eq(faults { seed = 1, services = { sts = { throttle = 1 } } }, 200)
  local _, err = aws.try("sts", "GetCallerIdentity", {}, OPTS)
  t.eq({ err.code, err.status }, { "Throttling", 400 })
end)

t.test("the same seed gives the same faults", function()
  faults { seed = 42, services = { sts = { throttle = 0.3, error5xx = 0.2 } } }
  local first = pattern(20)
  faults { seed = 42, services = { sts = { throttle = 0.3, error5xx = 0.2 } } }
  t.eq(pattern(20), first)
  t.ok(first:find("T") and first:find("ok"), "a mix of faults and answers: " .. first)
end)

t.test("hypd's client retries throttling through to success", function()
  core.virtual(true)
  faults { seed = 7, services = { sts = { throttle = 0.5 } } }
  local ok = 0
  for _ = 1, 10 do
    if aws.try("sts", "GetCallerIdentity", {}, { endpoint_url = base, region = "us-west-2", max_attempts = 8 }) then
      ok = ok + 1
    end
  end
  core.virtual(false)
  t.eq(ok, 10)
end)

t.test("a reset rate of 1 drops every connection without an answer", function()
  faults { seed = 3, services = { sts = { reset = 1 } } }
  local _, err = aws.try("sts", "GetCallerIdentity", {}, OPTS)
  t.eq(err.code, "RESET")
  faults { seed = 3, services = {} }
end)

t.test("error5xx answers 500 before the work, error5xx_after does the work and then answers 500", function()
  local ec2 = { endpoint_url = base, region = "us-west-2", max_attempts = 1 }
  local function vpcs(name)
    local r = aws.call("ec2", "DescribeVpcs", { Filters = { { Name = "tag:Name", Values = { name } } } }, ec2)
    return #(r.Vpcs or {})
  end
  local function create(name)
    return aws.try("ec2", "CreateVpc", { CidrBlock = "10.9.0.0/16", TagSpecifications = { { ResourceType = "vpc",
      Tags = { { Key = "Name", Value = name } } } } }, ec2)
  end
  t.eq(faults { seed = 5, services = { ec2 = { error5xx = 1 } } }, 200)
  local _, err = create("faults-before")
  t.eq({ err.code, err.status }, { "InternalFailure", 500 })
  faults { seed = 5, services = {} }
  t.eq(vpcs("faults-before"), 0, "nothing was made")
  t.eq(faults { seed = 5, services = { ec2 = { error5xx_after = 1 } } }, 200)
  _, err = create("faults-after")
  t.eq({ err.code, err.status }, { "InternalFailure", 500 })
  faults { seed = 5, services = {} }
  t.eq(vpcs("faults-after"), 1, "the VPC was made although the answer said it failed")
  local r = http.request { method = "GET", url = base .. "/_sandbox/audit" }
  local audited = 0
  for _, e in ipairs(json.decode(r.body)) do
    if e.operation == "CreateVpc" then audited = audited + 1 end
  end
  t.eq(audited, 1, "and it is in the audit log, once")
  local status, body = faults { services = { ec2 = { error5xx_after = "sometimes" } } }
  t.eq(status, 400)
  t.like(body, "faults%.services%.ec2%.error5xx_after: expected throttle, error5xx, error5xx_after")
end)

t.test("a create retried with its idempotency token after a 500 that came after the work gets the first " ..
  "call's answer: one route table, one audit entry", function()
  faults { seed = 6, services = {} }
  local ec2 = { endpoint_url = base, region = "us-west-2", max_attempts = 2 }
  local vpc = aws.call("ec2", "CreateVpc", { CidrBlock = "10.8.0.0/16" }, ec2).Vpc.VpcId
  local function audited()
    local n = 0
    for _, e in ipairs(json.decode(http.request { method = "GET", url = base .. "/_sandbox/audit" }.body)) do
      if e.operation == "CreateRouteTable" then n = n + 1 end
    end
    return n
  end
  local before = audited()
  t.eq(faults { seed = 6, services = { ec2 = { error5xx_after = 1 } } }, 200)
  local r, err = aws.try("ec2", "CreateRouteTable", { VpcId = vpc }, ec2) -- the client fills ClientToken
  faults { seed = 6, services = {} }
  t.ok(r, "the retry with the same token answered: " .. json.encode(err or json.null))
  t.eq(audited() - before, 1, "the route table was made once")
  local tables = aws.call("ec2", "DescribeRouteTables", { Filters = { { Name = "vpc-id", Values = { vpc } } } },
    ec2).RouteTables
  local made = {}
  for _, rt in ipairs(tables) do
    if not ((rt.Associations or {})[1] or {}).Main then made[#made + 1] = rt.RouteTableId end
  end
  t.eq(made, { r.RouteTable.RouteTableId }, "one route table besides the main one, the one the answer names")
end)

t.test("a transition the host's stop interrupted stays scheduled for the next start (an EKS cluster is not " ..
  "left CREATING for ever)", function()
  faults { seed = 7, services = {} }
  local store, task = require "hypd.store", require "hypd.task"
  local eks = require "sandbox.services.eks"
  local original = eks.transitions.cluster_active
  eks.transitions.cluster_active = function()
    local e = require("hypd.errors").new("CANCELLED", "interrupted (the test)")
    e.abort = true -- what the engine's interrupt raises in whatever task runs Lua
    error(e, 0)
  end
  t.cleanup(function() eks.transitions.cluster_active = original end)
  core.virtual(true)
  local H = dofile("tests/lua/helpers.lua")
  local opts = { endpoint_url = base, region = "us-west-2" }
  H.eks_cluster(function(svc, op, p) return aws.call(svc, op, p, opts) end, "stopped-mid", 77, { wait = false })
  task.sleep(800) -- past the transition's moment (480 to 720 simulated seconds)
  core.virtual(false)
  local kept = {}
  for _, job in pairs(assert(store.list("sandbox/later/"))) do
    if job.transition == "cluster_active" and job.args.name == "stopped-mid" then kept[#kept + 1] = job end
  end
  t.eq(#kept, 1, "the interrupted transition is still in the store")
  t.eq(aws.call("eks", "DescribeCluster", { name = "stopped-mid" }, opts).cluster.status, "CREATING")
end)

t.test("a bad fault spec is refused and changes nothing", function()
  faults { seed = 1, services = {} }
  local status, body = faults { services = { sts = { throttle = "often" } } }
  t.eq(status, 400)
  t.like(body, "faults%.services%.sts%.throttle")
  t.eq(pattern(3), "ok ok ok")
end)

t.cleanup(function()
  srv:stop()
end)

t.test("hold keeps a service's answers, with no timeout, until the faults are configured without it", function()
  local task = require "hypd.task"
  t.eq(faults { services = { sts = { hold = true } } }, 200)
  local call = task.spawn(function() return aws.try("sts", "GetCallerIdentity", {}, OPTS) end)
  task.sleep(0.5) -- real seconds: a held request holds a virtual clock still
  t.eq(call.status ~= "done", true, "still waiting after half a second")
  t.eq(faults {}, 200)
  local _, r = call:wait()
  t.ok(r and r.Account, "answered once let go")
  local code, body = faults { services = { sts = { hold = 1 } } }
  t.eq(code, 400)
  t.like(body, "hold %(true or false%)")
  faults {}
end)
