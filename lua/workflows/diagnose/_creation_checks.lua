-- diagnose/_creation_checks: the AWS side of diagnose_cluster_creation,
-- one function a source (the EKS cluster and its add-ons, its access
-- entries, the HyperPod cluster and its nodes, the lifecycle scripts' log
-- group, the Service Quotas; the IAM roles' trust is _trust_checks'), each adding findings
-- (diagnose/_findings) to r. w: {name (EKS cluster), region_given, eks (its
-- DescribeCluster or nil), hyperpod (its DescribeCluster or nil), texts
-- (the error texts seen, for the capacity and quota checks)}.
local F = require "diagnose._findings"

local M = {}

local ev = F.evidence

local function status_step(w, why)
  return F.step("inspect", "cluster_get_status", { cluster = w.name, region = w.region_given }, why)
end

-- eks(ctx, r, w): the cluster's status and health issues, then its add-ons'
function M.eks(ctx, r, w)
  local c = w.eks
  if not c then return end
  r:checked("EKS cluster", w.name .. " is " .. tostring(c.status))
  if c.status == "FAILED" then
    r:add { severity = "critical", code = "EKS_CLUSTER_FAILED", subject = "EKS cluster " .. w.name,
      summary = "the EKS cluster failed to create", evidence = { ev("eks DescribeCluster cluster.status", c.status) },
      explanation = "EKS could not create the control plane; its health issues (below, when EKS reports any) " ..
        "say why. A FAILED cluster cannot be repaired: delete it and create it again once the cause is fixed",
      next = { status_step(w, "see the cluster, its add-ons and the operations on it") } }
  end
  for _, i in ipairs(((c.health or {}).issues) or {}) do
    r:add { severity = "critical", code = "EKS_HEALTH_ISSUE", subject = "EKS cluster " .. w.name,
      summary = "EKS reports " .. tostring(i.code), evidence = { ev("eks DescribeCluster cluster.health.issues",
        tostring(i.code) .. ": " .. tostring(i.message)) },
      explanation = "EKS found a problem with what the cluster depends on (its IAM role, subnets, security " ..
        "groups or KMS key): until it is fixed the control plane cannot work as it should",
      next = { status_step(w, "see the cluster's status after the fix") } }
  end
  if c.status ~= "ACTIVE" then return end
  local names = hypd.aws.all("eks", "ListAddons", { clusterName = w.name }, ctx:aws_opts())
  local bad = 0
  for _, a in ipairs(names) do
    local d = ctx:try("eks", "DescribeAddon", { clusterName = w.name, addonName = a })
    d = d and d.addon
    local issues = d and (d.health or {}).issues or {}
    if d and (#issues > 0 or d.status == "CREATE_FAILED" or d.status == "DEGRADED") then
      bad = bad + 1
      local evidence = { ev("eks DescribeAddon " .. a .. " addon.status", tostring(d.status)) }
      for _, i in ipairs(issues) do
        evidence[#evidence + 1] = ev("eks DescribeAddon " .. a .. " addon.health.issues",
          tostring(i.code) .. ": " .. tostring(i.message))
      end
      r:add { severity = "critical", code = "ADDON_UNHEALTHY", subject = "EKS add-on " .. a,
        summary = "add-on " .. a .. " is " .. tostring(d.status),
        evidence = evidence,
        explanation = "EKS reports the add-on unhealthy: its pods are not all running (replicas short, a " ..
          "dependency missing, its IAM role refused); HyperPod's nodes and hypd's later stages depend on it",
        next = { F.step("inspect", "cluster_get_dependency_status", { cluster = w.name, region = w.region_given },
          "see every add-on and dependency hypd installs, with its state") } }
    end
  end
  r:checked("EKS add-ons", string.format("%d add-ons, %d unhealthy", #names, bad))
end

-- principal(arn) -> the IAM ARN an access entry names for a caller (an
-- assumed role's session becomes its role)
local function principal(arn)
  local part, acct, role = tostring(arn):match("^arn:([^:]+):sts::(%d+):assumed%-role/([^/]+)/")
  if part then return string.format("arn:%s:iam::%s:role/%s", part, acct, role) end
  return arn
end

local ADMIN = "AmazonEKSClusterAdminPolicy"

-- access(ctx, r, w): the authentication mode HyperPod needs and the access
-- entry (with the cluster-admin policy) hypd's stages need for the caller
function M.access(ctx, r, w)
  local c = w.eks
  if not c or c.status ~= "ACTIVE" then return end
  local mode = (c.accessConfig or {}).authenticationMode or "CONFIG_MAP"
  if mode == "CONFIG_MAP" then
    r:add { severity = "critical", code = "AUTH_MODE_CONFIG_MAP", subject = "EKS cluster " .. w.name,
      summary = "the cluster takes no access entries (authenticationMode CONFIG_MAP)",
      evidence = { ev("eks DescribeCluster cluster.accessConfig.authenticationMode", mode) },
      explanation = "HyperPod requires authenticationMode API or API_AND_CONFIG_MAP: it gives its nodes " ..
        "access through access entries. Change it with aws eks update-cluster-config --name " .. w.name ..
        " --access-config authenticationMode=API_AND_CONFIG_MAP",
      next = { status_step(w, "see the authentication mode after the change") } }
    return
  end
  local who = principal(ctx:call("sts", "GetCallerIdentity", {}).Arn)
  if not who:match("^arn:[^:]+:iam::%d+:role/") and not who:match("^arn:[^:]+:iam::%d+:user/") then
    r:checked("access entries", "the caller " .. who .. " is no IAM user or role: not checked")
    return
  end
  local entries = hypd.aws.all("eks", "ListAccessEntries", { clusterName = w.name }, ctx:aws_opts())
  local found = false
  for _, e in ipairs(entries) do found = found or e == who end
  r:checked("access entries", string.format("%d entries; hypd's principal %s %s", #entries, who,
    found and "has one" or "has none"))
  local fix = "aws eks create-access-entry --cluster-name " .. w.name .. " --principal-arn " .. who ..
    "; aws eks associate-access-policy --cluster-name " .. w.name .. " --principal-arn " .. who ..
    " --policy-arn arn:aws:eks::aws:cluster-access-policy/" .. ADMIN .. " --access-scope type=cluster"
  if not found then
    local list = {}
    for i = 1, math.min(10, #entries) do list[i] = entries[i] end
    r:add { severity = "critical", code = "ACCESS_ENTRY_MISSING", subject = "access entry for " .. who,
      summary = "hypd's principal has no access entry on the cluster",
      evidence = { ev("eks ListAccessEntries " .. w.name .. " accessEntries",
        #list > 0 and table.concat(list, ", ") or "(none)") },
      explanation = "hypd installs HyperPod's dependencies and reads the nodes through the Kubernetes API as " ..
        who .. "; without an access entry with " .. ADMIN .. " the API answers Unauthorized. Create it: " .. fix,
      next = { status_step(w, "see the cluster's authentication mode; run the commands above, then look again") } }
    return
  end
  local pols = ctx:try("eks", "ListAssociatedAccessPolicies", { clusterName = w.name, principalArn = who })
  local admin = false
  local shown = {}
  for _, a in ipairs(pols and pols.associatedAccessPolicies or {}) do
    local short = tostring(a.policyArn):match("([^/]+)$")
    shown[#shown + 1] = short .. " (" .. tostring((a.accessScope or {}).type) .. ")"
    admin = admin or (short == ADMIN and (a.accessScope or {}).type == "cluster")
  end
  if pols and not admin then
    r:add { severity = "critical", code = "ACCESS_POLICY_MISSING", subject = "access entry for " .. who,
      summary = "hypd's access entry lacks " .. ADMIN,
      evidence = { ev("eks ListAssociatedAccessPolicies " .. who, #shown > 0 and table.concat(shown, ", ") or "(none)") },
      explanation = "hypd's stages write cluster-wide objects (namespaces, CRDs, RBAC) and need " .. ADMIN ..
        " with cluster scope. Associate it: " .. fix:match("; (.*)$"),
      next = { status_step(w, "see the cluster's authentication mode; run the commands above, then look again") } }
  end
end

-- hyperpod(ctx, r, w): the HyperPod cluster's FailureMessage and its nodes' statuses
function M.hyperpod(ctx, r, w)
  local d = w.hyperpod
  if not d then return end
  r:checked("HyperPod cluster", d.ClusterName .. " is " .. tostring(d.ClusterStatus))
  local steps = { F.step("inspect", "hyperpod_get_creation_status", { cluster = w.name, region = w.region_given },
    "see the HyperPod creation, its instance groups and its nodes") }
  if d.ClusterStatus == "Failed" then
    local msg = tostring(d.FailureMessage or "(no FailureMessage)")
    w.texts[#w.texts + 1] = { source = "sagemaker DescribeCluster " .. d.ClusterName .. " FailureMessage", text = msg }
    r:add { severity = "critical", code = "HYPERPOD_CREATION_FAILED", subject = "HyperPod cluster " .. d.ClusterName,
      summary = "the HyperPod cluster failed to create",
      evidence = { ev("sagemaker DescribeCluster " .. d.ClusterName .. " ClusterStatus", d.ClusterStatus),
        ev("sagemaker DescribeCluster " .. d.ClusterName .. " FailureMessage", msg) },
      explanation = "SageMaker gave up creating the cluster; its FailureMessage says why (capacity, a quota, " ..
        "the lifecycle scripts, the execution role). A Failed cluster is not repaired: delete it and create " ..
        "it again once the cause is fixed",
      next = steps }
  end
  local failed, waiting = {}, {}
  local token
  repeat
    local page = ctx:call("sagemaker", "ListClusterNodes", { ClusterName = d.ClusterName, MaxResults = 100,
      NextToken = token })
    for _, n in ipairs(page.ClusterNodeSummaries or {}) do
      local st = n.InstanceStatus or {}
      if st.Status == "Failure" then failed[#failed + 1] = n end
      if st.Status == "Pending" and tostring(st.Message):find("capacity", 1, true) then waiting[#waiting + 1] = n end
      if st.Message and st.Message ~= "" then
        w.texts[#w.texts + 1] = { source = "sagemaker ListClusterNodes " .. n.InstanceId .. " InstanceStatus.Message",
          text = st.Message }
      end
    end
    token = page.NextToken
  until not token
  r:checked("HyperPod nodes", string.format("%d failed, %d waiting for capacity", #failed, #waiting))
  if #failed > 0 then
    local evidence = {}
    for i = 1, math.min(5, #failed) do
      local n = failed[i]
      evidence[#evidence + 1] = ev("sagemaker ListClusterNodes " .. n.InstanceId .. " (" .. n.InstanceGroupName ..
        ") InstanceStatus", "Failure: " .. tostring(n.InstanceStatus.Message))
    end
    local next = { steps[1] }
    if hypd.tools.exists("diagnose_node_health") and d.Orchestrator and d.Orchestrator.Eks then
      next[2] = F.step("inspect", "diagnose_node_health", { cluster = w.name, region = w.region_given },
        "look at each failed node's Kubernetes side")
    end
    r:add { severity = "critical", code = "HYPERPOD_NODES_FAILED", subject = "HyperPod cluster " .. d.ClusterName,
      summary = string.format("%d node%s failed", #failed, #failed == 1 and "" or "s"), evidence = evidence,
      explanation = "SageMaker marks a node Failure when its lifecycle script or its health checks fail; " ..
        "with automatic node recovery it replaces the node, otherwise the node stays failed",
      next = next }
  end
end

-- lifecycle(ctx, r, w): the error lines of the lifecycle scripts' log group
M.ERRORS = "?ERROR ?Error ?error ?FAILED ?failed ?Traceback ?fatal"
function M.lifecycle(ctx, r, w)
  local d = w.hyperpod
  if not d then return end
  local group = "/aws/sagemaker/Clusters/" .. d.ClusterName .. "/" .. (tostring(d.ClusterArn):match("([^/]+)$") or "")
  local out, err = ctx:try("logs", "FilterLogEvents", { logGroupName = group, logStreamNamePrefix = "LifecycleConfig/",
    filterPattern = M.ERRORS, limit = 200 })
  if not out then
    if err.code ~= "ResourceNotFoundException" then error(err, 0) end
    r:checked("lifecycle script logs", "no log group " .. group .. " (no node has run its scripts yet)")
    return
  end
  local by, order = {}, {}
  for _, e in ipairs(out.events or {}) do
    if not by[e.logStreamName] then by[e.logStreamName] = {}; order[#order + 1] = e.logStreamName end
    table.insert(by[e.logStreamName], e)
  end
  r:checked("lifecycle script logs", string.format("%s: %d error lines in %d streams", group, #(out.events or {}),
    #order))
  for i = 1, math.min(5, #order) do
    local stream = order[i]
    local evidence = {}
    for j = 1, math.min(5, #by[stream]) do
      local e = by[stream][j]
      evidence[#evidence + 1] = ev("CloudWatch Logs " .. group .. " " .. stream, e.message,
        os.date("!%Y-%m-%dT%H:%M:%SZ", e.timestamp // 1000))
      w.texts[#w.texts + 1] = { source = "CloudWatch Logs " .. group .. " " .. stream, text = e.message }
    end
    local grp = stream:match("^LifecycleConfig/([^/]+)/") or "?"
    r:add { severity = "critical", code = "LIFECYCLE_SCRIPT_ERROR", subject = "lifecycle script on " ..
        (stream:match("([^/]+)$") or stream) .. " (" .. grp .. ")",
      summary = "the lifecycle script logged errors", evidence = evidence,
      explanation = "HyperPod runs the group's OnCreate script on every new node and fails the node (and a " ..
        "cluster being created) when it exits non-zero; the lines quoted are the script's own. Fix the script " ..
        "or what it reaches (S3, FSx, a package mirror), upload it again and create the cluster again",
      next = { F.step("inspect", "hyperpod_list_instance_groups", { cluster = w.name, region = w.region_given },
        "see the group's lifecycle configuration (SourceS3Uri, OnCreate)") } }
  end
end

-- quotas(ctx, r, w): each instance group's target against the account's
-- HyperPod quota for its instance type (Service Quotas)
function M.quotas(ctx, r, w)
  local d = w.hyperpod
  if not d or #(d.InstanceGroups or {}) == 0 then return end
  local list, err = ctx:try("servicequotas", "ListServiceQuotas", { ServiceCode = "sagemaker", MaxResults = 100 })
  if not list then
    r:checked("service quotas", "not readable: " .. tostring(err.message))
    return
  end
  local quotas = {}
  local token = list.NextToken
  for _, q in ipairs(list.Quotas or {}) do quotas[q.QuotaName] = q end
  while token do
    local page = ctx:call("servicequotas", "ListServiceQuotas", { ServiceCode = "sagemaker", MaxResults = 100,
      NextToken = token })
    for _, q in ipairs(page.Quotas or {}) do quotas[q.QuotaName] = q end
    token = page.NextToken
  end
  local want = {}
  for _, g in ipairs(d.InstanceGroups) do want[g.InstanceType] = (want[g.InstanceType] or 0) + (g.TargetCount or 0) end
  local n = 0
  for itype, count in pairs(want) do
    n = n + 1
    local q = quotas[itype .. " for cluster usage"]
    if q and q.Value < count then
      r:add { severity = "critical", code = "QUOTA_TOO_LOW", subject = "quota " .. q.QuotaName,
        summary = string.format("the account's quota allows %d %s, the cluster asks %d", math.floor(q.Value), itype,
          count),
        evidence = { ev("servicequotas ListServiceQuotas sagemaker " .. q.QuotaCode .. " Value", string.format("%g", q.Value)),
          ev("sagemaker DescribeCluster " .. d.ClusterName .. " InstanceGroups TargetCount (" .. itype .. ")",
            tostring(count)) },
        explanation = "SageMaker refuses capacity above the quota (ResourceLimitExceeded); ask for an increase " ..
          "in Service Quotas (quota " .. q.QuotaCode .. ") or lower the groups' counts",
        next = { F.step("inspect", "hyperpod_list_instance_groups", { cluster = w.name, region = w.region_given },
          "see each group's target count") } }
    end
  end
  r:checked("service quotas", n .. " instance types against the account's HyperPod quotas")
end

-- capacity(r, w): the capacity and quota errors in every text seen (the
-- operation's error, FailureMessage, node messages, log lines)
local KINDS = {
  { pattern = "InsufficientCapacity", code = "CAPACITY_INSUFFICIENT",
    summary = "AWS had no capacity for the instance type in the zone",
    why = "the zone had no free capacity of the type when HyperPod asked: try again later, another zone " ..
      "(another subnet), another instance type, or reserved capacity (a training plan)" },
  { pattern = "ResourceLimitExceeded", code = "QUOTA_EXCEEDED", summary = "an account quota was exceeded",
    why = "the request asked more than the account's Service Quotas allow; ask for an increase in Service " ..
      "Quotas or ask for less" },
}
function M.capacity(r, w)
  for _, k in ipairs(KINDS) do
    local evidence, seen = {}, {}
    for _, t in ipairs(w.texts) do
      if t.text:find(k.pattern, 1, true) and not seen[t.text] and #evidence < 5 then
        seen[t.text] = true
        evidence[#evidence + 1] = ev(t.source, t.text)
      end
    end
    if #evidence > 0 then
      local next = { F.step("inspect", "aws_get_availability_zones", { region = w.region_given },
        "see the zones of the region (a group's subnets choose its zone)") }
      if k.code == "CAPACITY_INSUFFICIENT" then
        next[2] = F.step("inspect", "aws_get_instance_types", { region = w.region_given },
          "see which instance types each zone offers")
      end
      r:add { severity = "critical", code = k.code, subject = "cluster " .. w.name, summary = k.summary,
        evidence = evidence, explanation = k.why, next = next }
    end
  end
end

return M
