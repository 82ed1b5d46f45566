-- A second opinion on the network and IAM stages: cluster_create_eks run
-- against moto's server (when the machine's python3 has it) instead of the
-- sandbox. moto accepts any signature and skips intermediate states, so this
-- checks that what the workflow sends, moto understands, and that a second
-- run finds everything again and makes nothing twice.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local aws = require "hypd.aws"
local core = require "hypd.core"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
require("hypd.tool.loader").load()
local sys = require "hypd.sys"

local have = H.sh("python3 -c 'import moto.server, flask' 2>/dev/null") == 0
local dir = H.tmpdir()
local port = 20000 + (tonumber(tostring(os.time()):sub(-4)) % 20000)
if have then
  os.execute(string.format("MOTO_IAM_LOAD_MANAGED_POLICIES=true python3 -m moto.server -H 127.0.0.1 -p %d >%s/moto.log " ..
    "2>&1 & echo $! >%s/moto.pid", port, dir, dir))
  sys.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:" .. port)
  sys.setenv("AWS_REGION", "us-east-1")
  core.virtual(true)
end
t.cleanup(function()
  if have then os.execute("kill $(cat " .. dir .. "/moto.pid) 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)

local WHO = { name = "moto-test", scope = "admin", front = "test" }

local function count(service, op_name, key, filters)
  local out = aws.call(service, op_name, filters or {})
  return #(out[key] or {})
end

t.test("the EKS stage runs against moto's server: network, IAM, the cluster", function()
  if not have then return t.skip("moto is absent from this machine's python3") end
  for _ = 1, 100 do -- moto takes a moment to start (real time: the test's clock is virtual)
    if aws.try("sts", "GetCallerIdentity", {}, { max_attempts = 1 }) then break end
    os.execute("sleep 0.1")
  end
  local acc = assert(dispatch.call("cluster_create_eks", { cluster_tag = "second" }, WHO))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", require("hypd.json").encode(v.error or {}))
  local names = {}
  for i, s in ipairs(v.steps) do names[i] = s.name .. ":" .. s.status end
  t.eq(names[1], "vpc:done")
  t.eq(names[7], "iam:done")
end)

t.test("a second run against moto finds everything again and creates nothing twice", function()
  if not have then return t.skip("moto is absent from this machine's python3") end
  local tag = { { Name = "tag:hypd:cluster-tag", Values = { "second" } } }
  local before = { vpcs = count("ec2", "DescribeVpcs", "Vpcs", { Filters = tag }),
    subnets = count("ec2", "DescribeSubnets", "Subnets", { Filters = tag }) }
  local acc = assert(dispatch.call("cluster_create_eks", { cluster_tag = "second" }, WHO))
  t.eq(op.wait(acc.operation_id).status, "succeeded")
  t.eq({ count("ec2", "DescribeVpcs", "Vpcs", { Filters = tag }), count("ec2", "DescribeSubnets", "Subnets",
    { Filters = tag }) }, { before.vpcs, before.subnets })
  t.eq(before, { vpcs = 1, subnets = 4 })
end)
