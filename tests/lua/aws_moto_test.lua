-- A second opinion: hypd's AWS client against moto's server (from the
-- machine's python3, when present). moto accepts any signature and skips
-- intermediate states, so this checks wire compatibility only: requests moto
-- understands and answers hypd parses, across all five protocols.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local H = dofile("tests/lua/helpers.lua")

local have = H.sh("python3 -c 'import moto.server, flask' 2>/dev/null") == 0
local base, stop
if have then
  local port = 20000 + (tonumber(tostring(os.time()):sub(-4)) % 20000)
  os.execute(string.format("python3 -m moto.server -H 127.0.0.1 -p %d >/dev/null 2>&1 & echo $! > %s",
    port, "/tmp/hypd-moto.pid." .. port))
  base = "http://127.0.0.1:" .. port
  stop = function()
    os.execute("kill $(cat /tmp/hypd-moto.pid." .. port .. ") 2>/dev/null; rm -f /tmp/hypd-moto.pid." .. port)
  end
end

local OPTS = { endpoint_url = base, region = "us-east-1" }

local function moto_test(name, fn)
  t.test(name, function()
    if not have then return t.skip("moto is absent from this machine's python3") end
    -- wait until the server answers
    for _ = 1, 100 do
      local r = aws.try("sts", "GetCallerIdentity", {}, OPTS)
      if r then break end
      require("hypd.task").sleep(0.1)
    end
    fn()
  end)
end

moto_test("STS GetCallerIdentity (query protocol, XML) parses", function()
  local id = aws.call("sts", "GetCallerIdentity", {}, OPTS)
  t.like(id.Arn, "^arn:aws:")
  t.like(id.Account, "^%d+$")
end)

moto_test("EC2 CreateVpc and DescribeVpcs with filters round-trip (EC2 query)", function()
  local vpc = aws.call("ec2", "CreateVpc", { CidrBlock = "10.42.0.0/16", TagSpecifications = {
    { ResourceType = "vpc", Tags = { { Key = "hypd:cluster-tag", Value = "moto1" } } } } }, OPTS).Vpc
  t.like(vpc.VpcId, "^vpc%-")
  local found = aws.call("ec2", "DescribeVpcs", { Filters = {
    { Name = "tag:hypd:cluster-tag", Values = { "moto1" } } } }, OPTS).Vpcs
  t.eq(#found, 1)
  t.eq(found[1].CidrBlock, "10.42.0.0/16")
  local _, err = aws.try("ec2", "DescribeVpcs", { VpcIds = { "vpc-doesnotexist" } }, OPTS)
  t.eq(err.code, "InvalidVpcID.NotFound")
end)

moto_test("IAM roles page through Marker (query protocol)", function()
  local doc = '{"Version":"2012-10-17","Statement":[]}'
  for i = 1, 5 do
    aws.call("iam", "CreateRole", { RoleName = "hypd-moto-" .. i, AssumeRolePolicyDocument = doc }, OPTS)
  end
  local roles = aws.all("iam", "ListRoles", { MaxItems = 2 }, OPTS)
  local mine = 0
  for _, r in ipairs(roles) do if r.RoleName:find("^hypd%-moto%-") then mine = mine + 1 end end
  t.eq(mine, 5)
end)

moto_test("S3 buckets and objects (restXml, path style on an IP endpoint)", function()
  aws.call("s3", "CreateBucket", { Bucket = "hypd-moto" }, OPTS)
  aws.call("s3", "PutObject", { Bucket = "hypd-moto", Key = "dir/a b.txt", Body = "hello\0world" }, OPTS)
  local obj = aws.call("s3", "GetObject", { Bucket = "hypd-moto", Key = "dir/a b.txt" }, OPTS)
  t.eq(obj.Body, "hello\0world")
  local list = aws.call("s3", "ListObjectsV2", { Bucket = "hypd-moto", Prefix = "dir/", Delimiter = "/" }, OPTS)
  t.eq(list.Contents[1].Key, "dir/a b.txt")
  local _, err = aws.try("s3", "HeadBucket", { Bucket = "hypd-nothing" }, OPTS)
  t.eq(err.status, 404)
end)

moto_test("EKS CreateCluster and DescribeCluster (restJson1)", function()
  local vpc = aws.call("ec2", "CreateVpc", { CidrBlock = "10.43.0.0/16" }, OPTS).Vpc.VpcId
  local subnets = {}
  for i = 1, 2 do
    subnets[i] = aws.call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.43." .. i .. ".0/24" }, OPTS)
      .Subnet.SubnetId
  end
  local c = aws.call("eks", "CreateCluster", { name = "moto-eks", roleArn = "arn:aws:iam::123456789012:role/eks",
    resourcesVpcConfig = { subnetIds = subnets } }, OPTS).cluster
  t.eq(c.name, "moto-eks")
  local d = aws.call("eks", "DescribeCluster", { name = "moto-eks" }, OPTS).cluster
  t.eq(d.arn, c.arn)
  local _, err = aws.try("eks", "DescribeCluster", { name = "nope" }, OPTS)
  t.eq(err.code, "ResourceNotFoundException")
end)

moto_test("SageMaker ListClusters (awsJson1.1)", function()
  local out = aws.call("sagemaker", "ListClusters", {}, OPTS)
  t.ok(type(out.ClusterSummaries) == "table", "a list of summaries")
end)

t.cleanup(function()
  if stop then stop() end
end)
