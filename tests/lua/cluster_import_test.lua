-- cluster_import on clusters made outside hypd (direct calls to the
-- in-process sandbox, as the AWS SDK makes them): with an access entry it
-- reaches the Kubernetes API, records the EKS cluster and its HyperPod
-- cluster, and cluster_switch works on it as on a created one; without one
-- it refuses and says exactly what is missing (no access entry for the
-- principal, an entry without a policy that lets it read, a CONFIG_MAP-only
-- cluster, a cluster that is not ACTIVE), records nothing and sends no AWS
-- mutation.
local t = require "hypd.tap"
local O = dofile("tests/lua/outside_helpers.lua") -- the in-process sandbox and the tools
local E = dofile("tests/lua/eks_helpers.lua")
local srv = O.srv
local dispatch = require "hypd.tool.dispatch"
local json = require "hypd.json"
local clusters = require "hypd.clusters"
local call, mark, since = O.call, E.mark, E.since

local function import(name)
  local m = mark()
  local out, err = dispatch.call("cluster_import", { cluster = name }, E.WHO)
  local counts, n = since(m)
  t.eq(n, 0, "cluster_import sends no AWS mutation: " .. json.encode(counts))
  return out, err
end

local function refused(name, code, reason)
  local out, err = import(name)
  t.eq(out, nil, "refused")
  t.eq({ err and err.code, err and err.reason }, { code, reason }, json.encode(err))
  t.eq(clusters.get(name, "us-west-2"), nil, "nothing is recorded")
  return err and err.message or ""
end

local outside, hp_arn

t.test("an EKS cluster and its HyperPod cluster made outside hypd are imported and recorded", function()
  outside = O.eks("outside", 61)
  hp_arn = O.hyperpod("outside-hp", outside)
  t.eq(clusters.active(), nil, "no cluster is active yet")
  local out, err = import("outside")
  t.ok(out, json.encode(err))
  out = out or {}
  t.eq({ out.cluster, out.region, out.arn, out.version, out.authentication_mode, out.kubernetes_access, out.active,
    out.created_by_hypd }, { "outside", "us-west-2", outside.arn, "1.34", "API", "read-write", true, false })
  t.eq(out.principal, O.PRINCIPAL)
  t.eq(out.hyperpod and { out.hyperpod.name, out.hyperpod.arn }, { "outside-hp", hp_arn })
  local rec = clusters.get("outside", "us-west-2") or {}
  t.eq({ rec.imported, rec.arn, rec.vpc_id, rec.kubernetes_access }, { true, outside.arn,
    outside.resourcesVpcConfig.vpcId, "read-write" })
  t.eq(rec.hyperpod and { rec.hyperpod.name, rec.hyperpod.arn }, { "outside-hp", hp_arn })
  t.eq(rec.subnet_ids, outside.subnets)
  t.eq((clusters.active() or {}).name, "outside", "the first cluster hypd knows becomes the active one")
end)

t.test("cluster_switch works on the imported cluster as on a created one; an unrecorded one still switches", function()
  local other = O.eks("plain", 62)
  local out, err = dispatch.call("cluster_switch", { cluster = "plain" }, E.WHO)
  t.ok(out, json.encode(err))
  t.eq(out and out.known, json.null, "hypd knows nothing of a cluster it neither made nor imported")
  t.eq(out and out.active.arn, other.arn)
  out, err = dispatch.call("cluster_switch", { cluster = "outside" }, E.WHO)
  t.ok(out, json.encode(err))
  t.eq(out and out.previous and out.previous.name, "plain")
  t.eq(out and { out.known.imported, out.known.created, out.known.hyperpod.name }, { true, false, "outside-hp" })
  local st = assert(dispatch.call("cluster_get_status", {}, E.READ))
  t.eq({ st.active, st.eks.name, st.hyperpod and st.hyperpod.name }, { true, "outside", "outside-hp" })
end)

t.test("cluster_switch to a cluster there is not: NOT_FOUND naming the clusters there are, nothing switched", function()
  local out, err = dispatch.call("cluster_switch", { cluster = "hypd-nope" }, E.WHO)
  t.eq(out, nil, "refused")
  t.eq(err and err.code, "NOT_FOUND", "not AWS's raw ResourceNotFoundException: " .. json.encode(err))
  t.like(err and err.message or "", "no EKS cluster hypd%-nope in us%-west%-2")
  t.like(err and err.message or "", "the clusters there are: [^;]*outside")
  t.like(err and err.message or "", "the clusters there are: [^;]*plain")
  t.eq(err and err.fields and err.fields[1].field, "cluster", "the field is named")
  t.eq((clusters.active() or {}).name, "outside", "the active cluster is unchanged")
end)

t.test("importing again refreshes the record and changes nothing else", function()
  local out = import("outside")
  t.eq(out and out.hyperpod and out.hyperpod.name, "outside-hp")
  t.eq((clusters.active() or {}).name, "outside")
end)

t.test("without an access entry for hypd's principal: refused, naming the principal and the missing entry", function()
  O.eks("noentry", 63, { bootstrap = false })
  local msg = refused("noentry", "FORBIDDEN", "no_access_entry")
  E.has(msg, "it has no access entry for hypd's principal " .. O.PRINCIPAL, "the message")
  E.has(msg, "aws eks create-access-entry --cluster-name noentry --principal-arn " .. O.PRINCIPAL, "the fix")
end)

t.test("an access entry without an access policy: refused, naming the policies it has and the one it needs", function()
  call("eks", "CreateAccessEntry", { clusterName = "noentry", principalArn = O.PRINCIPAL })
  local msg = refused("noentry", "FORBIDDEN", "no_access_policy")
  E.has(msg, "does not allow reading namespaces (its access policies: none)", "the message")
  E.has(msg, "Associate AmazonEKSClusterAdminPolicy", "the fix")
end)

t.test("a view-only access entry imports, recorded read-only with a note on what stage 3 needs", function()
  call("eks", "AssociateAccessPolicy", { clusterName = "noentry", principalArn = O.PRINCIPAL, policyArn = O.VIEW,
    accessScope = { type = "cluster" } })
  local out, err = import("noentry")
  t.ok(out, json.encode(err))
  t.eq(out and out.kubernetes_access, "read-only")
  E.has(out and out.notes[1], "may read but not write in the cluster; cluster_configure_dependencies needs " ..
    "AmazonEKSClusterAdminPolicy", "the note")
  t.eq(out and out.hyperpod, json.null)
  t.eq((clusters.get("noentry", "us-west-2") or {}).kubernetes_access, "read-only")
end)

t.test("a CONFIG_MAP-only cluster is refused, naming the authentication mode and the change it needs", function()
  O.eks("cmonly", 64, { mode = "CONFIG_MAP" })
  local msg = refused("cmonly", "FORBIDDEN", "config_map_only")
  E.has(msg, "its authenticationMode is CONFIG_MAP, which takes no access entries", "the message")
  E.has(msg, "authenticationMode=API_AND_CONFIG_MAP", "the fix")
end)

t.test("a cluster that is still CREATING is refused (not ACTIVE)", function()
  O.eks("young", 65, { wait = false })
  local msg = refused("young", "CONFLICT", "not_active")
  E.has(msg, "EKS cluster young is CREATING, not ACTIVE", "the message")
end)

t.test("a cluster that does not exist is NOT_FOUND, naming the field", function()
  local out, err = import("nowhere")
  t.eq(out, nil)
  t.eq(err and err.code, "NOT_FOUND")
  t.eq(err and err.fields and err.fields[1].field, "cluster")
end)

t.cleanup(function() srv:stop() end)
