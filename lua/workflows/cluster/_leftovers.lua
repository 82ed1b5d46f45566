-- cluster/_leftovers: what still carries a cluster tag whose EKS cluster is
-- gone, so that what a teardown kept (data on purpose, or what failed)
-- stays in sight: cluster_list reports it and the Clusters page shows it,
-- with the command that removes it. Read from AWS itself (not from the
-- teardown's report): what is there is there, whoever left it.
--   find(ctx, live) -> {{cluster_tag, eks_name, resources = {{type, id,
--       name}}, data, remove, note}}, one per tag, sorted; live: the tags
--       whose EKS cluster exists (their resources are the cluster's, not
--       leftovers)
local Names = require "_names"
local M = {}


local function tag_of(tags, key)
  for _, t in ipairs(tags or {}) do if t.Key == (key or Names.TAG) then return t.Value end end
end

local function has_key() return { { Name = "tag-key", Values = { Names.TAG } } } end

function M.find(ctx, live)
  local by = {}
  local function add(tag, typ, id, name, data)
    if not tag or live[tag] then return end
    local e = by[tag] or { cluster_tag = tag, eks_name = Names.eks(tag), resources = hypd.json.array(), data = false }
    e.resources[#e.resources + 1] = { type = typ, id = id, name = name or id }
    e.data = e.data or data or false
    by[tag] = e
  end
  for _, v in ipairs(ctx:call("ec2", "DescribeVpcs", { Filters = has_key() }).Vpcs or {}) do
    add(tag_of(v.Tags), "ec2:vpc", v.VpcId, tag_of(v.Tags, "Name"))
  end
  for _, g in ipairs(ctx:call("ec2", "DescribeSecurityGroups", { Filters = has_key() }).SecurityGroups or {}) do
    add(tag_of(g.Tags), "ec2:security-group", g.GroupId, g.GroupName)
  end
  for _, s in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = has_key() }).Subnets or {}) do
    add(tag_of(s.Tags), "ec2:subnet", s.SubnetId, tag_of(s.Tags, "Name"))
  end
  for _, n in ipairs(ctx:call("ec2", "DescribeNatGateways", { Filter = has_key() }).NatGateways or {}) do
    if n.State ~= "deleted" then add(tag_of(n.Tags), "ec2:nat-gateway", n.NatGatewayId, tag_of(n.Tags, "Name")) end
  end
  for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
    if fs.Lifecycle ~= "DELETED" then
      add(tag_of(fs.Tags), "fsx:file-system", fs.FileSystemId, tag_of(fs.Tags, "Name"), true)
    end
  end
  -- hypd names its buckets hypd-<tag>-... (the inference operator's TLS
  -- bucket hyperpod-tls-<tag>-...): only those are asked for their tags
  local s3 = require "_s3"
  for _, b in ipairs(ctx:call("s3", "ListBuckets", {}).Buckets or {}) do
    if b.Name:match("^hypd%-") or b.Name:match("^hyperpod%-tls%-") then
      local h = s3.head(ctx, b.Name)
      local tag = h and s3.tags(ctx, b.Name, h.Region)[Names.TAG]
      if tag then add(tag, "s3:bucket", b.Name, b.Name, true) end
    end
  end
  local out = {}
  for tag, e in pairs(by) do
    e.remove = "hypd call cluster_delete cluster_tag=" .. tag .. (e.data and " force:=true" or "")
    e.note = e.data and ("its teardown kept storage that may hold data: force:=true deletes it with its data " ..
      "(hypd call cluster_delete cluster_tag=" .. tag .. " plan:=true lists what goes)")
      or "a teardown left these (cluster_delete again removes them; plan:=true lists what goes)"
    out[#out + 1] = e
  end
  table.sort(out, function(a, b) return a.cluster_tag < b.cluster_tag end)
  return out
end

M.AWS = { "ec2:DescribeVpcs", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeNatGateways",
  "fsx:DescribeFileSystems", "s3:ListBuckets", "s3:HeadBucket", "s3:GetBucketTagging" }

return M
