-- hypd kubeconfig against a `hypd sandbox --virtual-clock` process: the
-- kubeconfig names the cluster's endpoint and CA from DescribeCluster and
-- runs `hypd eks-token` as its exec plugin; kubectl reads it. And the file
-- `aws eks update-kubeconfig` writes takes hypd's own client to the cluster.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local env, pid = {}, nil
local absent -- why the first test could not make the cluster (nil: it tried)

local function with_env(cmd) return H.with_env(env, dir, cmd) end

t.test("a sandbox with an ACTIVE EKS cluster", function()
  env, pid = H.sandbox_process(dir, "--virtual-clock")
  env = env or {}
  t.ok(env.AWS_ENDPOINT_URL, "the sandbox started")
  if H.sh("python3 -c 'import boto3'") ~= 0 then
    absent = "boto3 is absent"
    return t.skip(absent)
  end
  local rc, said, err = with_env([==[python3 -c '
import boto3, json
iam, ec2, eks = boto3.client("iam"), boto3.client("ec2"), boto3.client("eks")
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
  "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
role = iam.create_role(RoleName="kc-eks", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.%d.0/24" % i, AvailabilityZone=z)["Subnet"]["SubnetId"]
           for i, z in enumerate(zones)]
eks.create_cluster(name="kc", roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
                   accessConfig={"authenticationMode": "API"})
eks.get_waiter("cluster_active").wait(name="kc", WaiterConfig={"Delay": 1, "MaxAttempts": 60})
print(eks.describe_cluster(name="kc")["cluster"]["endpoint"])
']==])
  t.eq(rc, 0, err)
  env.ENDPOINT = said:match("%S+")
end)

t.test("hypd kubeconfig writes a private file kubectl reads, with hypd eks-token as the plugin", function()
  if not env.ENDPOINT then return t.skip(absent or "no cluster: the first test failed to make it") end
  local file = dir .. "/kubeconfig"
  local rc, _, err = with_env(H.hypd .. " kubeconfig --cluster kc --write " .. H.quote(file))
  t.eq(rc, 0, err)
  t.like(err, "wrote .* for cluster kc")
  local _, mode = H.sh("stat -c %a " .. H.quote(file))
  t.eq(mode, "600\n")
  if H.sh("command -v kubectl") ~= 0 then return t.skip("no kubectl") end
  local krc, out, kerr = H.sh("kubectl config view --raw -o json --kubeconfig " .. H.quote(file))
  t.eq(krc, 0, kerr)
  local cfg = json.decode(out)
  t.eq(cfg.clusters[1].cluster.server, env.ENDPOINT)
  t.like(cfg["current-context"], "^arn:aws:eks:us%-west%-2:123456789012:cluster/kc$")
  local exec = cfg.users[1].user.exec
  t.eq(exec.args, json.array { "eks-token", "--cluster", "kc", "--region", "us-west-2" })
  t.like(exec.command, "hypd$")
  -- the plugin command works as kubectl would call it
  local trc, tout = with_env(H.quote(exec.command) .. " eks-token --cluster kc --region us-west-2")
  t.eq(trc, 0)
  t.like(json.decode(tout).status.token, "^k8s%-aws%-v1%.")
end)

t.test("hypd kubeconfig for a missing cluster fails with the EKS error", function()
  if not env.ENDPOINT then return t.skip(absent or "no cluster: the first test failed to make it") end
  local rc, out, err = with_env(H.hypd .. " kubeconfig --cluster nope")
  t.eq({ rc, out }, { 1, "" })
  t.like(err, "^hypd: ResourceNotFoundException: No cluster found for name: nope%.")
end)

t.test("the kubeconfig aws eks update-kubeconfig writes takes hypd's client to the cluster", function()
  if not env.ENDPOINT then return t.skip(absent or "no cluster: the first test failed to make it") end
  if H.sh("command -v aws") ~= 0 then return t.skip("no AWS CLI") end
  local file = dir .. "/aws-cli-kubeconfig"
  local rc, _, err = with_env("aws eks update-kubeconfig --name kc --kubeconfig " .. H.quote(file))
  t.eq(rc, 0, err)
  t.like(H.read(file) or "", "command: aws")
  local script = H.write(dir .. "/from_kubeconfig_test.lua", [==[
local t = require "hypd.tap"
local k8s = require "hypd.k8s"
t.test("from_kubeconfig, then a get", function()
  local c = k8s.from_kubeconfig { path = os.getenv("KC_FILE") }
  t.eq(c.eks.cluster, "kc")
  t.eq(assert(c:get("v1", "Namespace", "kube-system")).metadata.name, "kube-system")
end)
]==])
  local out
  rc, out, err = with_env("KC_FILE=" .. H.quote(file) .. " " .. H.hypd .. " test " .. H.quote(script))
  t.eq(rc, 0, tostring(out) .. tostring(err))
  t.like(out, "ok 1 %- from_kubeconfig, then a get")
end)

t.cleanup(function()
  os.execute("kill " .. tostring(pid) .. " 2>/dev/null")
  os.execute("rm -rf " .. H.quote(dir))
end)
