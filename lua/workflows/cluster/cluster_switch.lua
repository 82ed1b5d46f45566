-- cluster_switch: which cluster the other tools work on by default.
local P = require "_params"

return tool {
  name = "cluster_switch",
  summary = "Make an EKS cluster the active one (the default for other tools)",
  description = "Selects the active cluster, recorded in hypd's state, after checking that it exists. Tools " ..
    "that take an optional cluster use it when none is given. A cluster hypd created (cluster_create_eks) or " ..
    "imported (cluster_import) is found in the region hypd recorded for it when no region is given, and what " ..
    "hypd knows of it (its HyperPod cluster, whether hypd made it) comes back with the answer; any other EKS " ..
    "cluster of the region can be switched to as well. Its status tool, cluster_get_status, then reports the " ..
    "active cluster.",
  kind = "mutating",
  status_tool = "cluster_get_status",
  aws = { "eks:DescribeCluster", "eks:ListClusters" },
  params = P.form({ "cluster" },
    { "region" },
    { cluster = P.with(P.cluster, { required = true, description = "EKS cluster name" }), region = P.region }),
  result = { type = "object", properties = { active = { type = "object" }, previous = { type = "object" },
    known = { type = "object" }, status_tool = { type = "string" } } },
  run = function(ctx, p)
    -- a recorded cluster is looked for where hypd recorded it
    local rec = hypd.clusters.get(p.cluster, p.region)
    if not p.region and rec and rec.region then ctx.region = rec.region end
    local d, err = ctx:try("eks", "DescribeCluster", { name = p.cluster })
    if not d then
      if err.code ~= "ResourceNotFoundException" then error(err, 0) end
      -- the person mistyped or is in the wrong region: name what there is
      local names = {}
      for _, n in ipairs(hypd.aws.all("eks", "ListClusters", {}, ctx:aws_opts())) do
        names[#names + 1] = tostring(n) -- the paginator's result key: the names themselves
      end
      table.sort(names)
      hypd.errors.refuse("cluster", "exists", "no EKS cluster " .. p.cluster .. " in " .. ctx:aws_region() .. "; " ..
        (#names > 0 and "the clusters there are: " .. table.concat(names, ", ") or "it has no EKS clusters") ..
        " (cluster_list lists the ones hypd knows, with their regions)",
        { code = "NOT_FOUND", field_message = "cluster: no EKS cluster " .. p.cluster })
    end
    local c = d.cluster
    local now = { name = c.name, region = ctx:aws_region(), arn = c.arn }
    if rec and rec.arn and rec.arn ~= c.arn then rec = nil end -- a cluster of that name made again since
    local prev = hypd.clusters.set_active(now)
    local known = hypd.json.null
    if rec then
      known = { created = rec.created == true, imported = rec.imported == true, cluster_tag = rec.tag,
        hyperpod = rec.hyperpod or hypd.json.null, kubernetes_access = rec.kubernetes_access }
    end
    return { active = now, previous = prev or hypd.json.null, known = known }
  end,
}
