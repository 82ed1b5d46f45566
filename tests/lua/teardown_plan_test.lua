-- cluster_delete's plan is true (issue 19, "Plans are true" and "Teardown
-- converges"): on a cluster built by the stage tools (EKS, dependencies,
-- HyperPod, S3 storage with data, FSx storage, the training and inference
-- operators), the plan lists each resource
-- once with one action, no keep reason names a resource the same plan
-- deletes, and the run then deletes exactly what the plan said (by type and
-- id, from the sandbox's audit log) and leaves nothing with the tag but what
-- the plan kept; again with force (the EKS cluster gone, the FSx file
-- system and the data bucket kept the first time), nothing is left.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

H.sandbox_here()
local Hp = dofile("tests/lua/hyperpod_helpers.lua")
local E = Hp.E
local call = E.call
local ADMIN = { name = "admin", scope = "admin", front = "test" }
local TD = dofile("tests/lua/teardown_helpers.lua")

local TAG = "tpl"
local DATA = "hypd-tpl-data-123456789012-us-west-2"
local P = {}

t.test("a cluster with S3 storage holding data, FSx storage and the training and inference operators", function()
  TD.build(TAG, { fsx = true, features = true })
  call("s3", "PutObject", { Bucket = DATA, Key = "datasets/a.bin", Body = "someone's data" })
end)

t.test("the plan lists each resource once, with one action", function()
  local m = E.mark()
  local p, err = dispatch.call("cluster_delete", { cluster_tag = TAG, plan = true }, ADMIN)
  t.ok(p, "the plan answers: " .. json.encode(err))
  P.plan = p
  local _, total = E.since(m)
  t.eq(total, 0, "the plan sends no mutation")
  local seen = {}
  for _, e in ipairs(p.plan or {}) do
    local k = TD.key(e)
    t.ok(not seen[k], "listed once: " .. k .. " (" .. e.action .. (seen[k] and (", and before " .. seen[k]) or "")
      .. ")")
    seen[k] = e.action
  end
  t.ok((p.delete or 0) > 10, "it deletes the cluster's resources: " .. tostring(p.delete))
  print("# plan: " .. json.encode(E.rows(p)))
end)

t.test("its keep reasons agree with its actions: none names a resource the plan deletes", function()
  local deleted = {}
  for _, e in ipairs(P.plan.plan or {}) do
    if e.action == "delete" and e.id then deleted[#deleted + 1] = e.id end
  end
  local keeps = 0
  for _, e in ipairs(P.plan.plan or {}) do
    if e.action == "keep" then
      keeps = keeps + 1
      t.ok(type(e.why) == "string" and e.why ~= "", "a keep says why: " .. e.type .. " " .. e.name)
      for _, id in ipairs(deleted) do
        t.ok(not TD.names(e.why, id), string.format("%s %s is kept because of %s, which the plan " ..
          "deletes: %s", e.type, e.name, id, tostring(e.why)))
      end
    end
  end
  t.ok(keeps >= 1, "the data bucket is kept")
  local b = TD.entry(P.plan, "s3:bucket", DATA)
  t.eq(b and b.action, "keep", "the data bucket is kept (it holds data)")
end)

t.test("the run deletes what the plan listed, by type and id, and leaves only what it kept", function()
  local m = E.mark()
  local acc = assert(dispatch.call("cluster_delete", { cluster_tag = TAG }, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", "cluster_delete: " .. json.encode(v.error))
  local missing, extra = TD.compare(P.plan, m)
  t.eq(missing, {}, "every AWS delete of the plan was sent")
  t.eq(extra, {}, "nothing was deleted that the plan did not list")
  local left = TD.tagged(TAG)
  local kept = {}
  for _, e in ipairs(P.plan.plan or {}) do if e.action == "keep" then kept[TD.key(e)] = true end end
  for _, k in ipairs(left) do t.ok(kept[k], "left with the tag only as the plan kept it: " .. k) end
  t.ok(#left >= 1, "the kept data bucket is still there")
end)

-- leftovers(tag) -> cluster_list's entry for the tag's leftovers
local function leftovers(tag)
  local r = assert(dispatch.call("cluster_list", {}, ADMIN))
  for _, c in ipairs(r.clusters or {}) do t.ok(c.cluster_tag ~= tag, "the EKS cluster is not listed: " .. c.name) end
  for _, l in ipairs(r.leftovers or {}) do if l.cluster_tag == tag then return l end end
end

t.test("cluster_list shows what the teardown left, with the command that removes it", function()
  local l = leftovers(TAG)
  t.ok(l, "the tag is listed with its leftovers")
  local have = {}
  for _, x in ipairs(l and l.resources or {}) do have[x.type .. " " .. x.id] = true end
  for _, k in ipairs(TD.tagged(TAG)) do
    if k:match("^ec2:vpc ") or k:match("^ec2:security%-group ") or k:match("^ec2:subnet ") or
        k:match("^fsx:") or k:match("^s3:") then
      t.ok(have[k], "listed: " .. k)
    end
  end
  t.ok(have["s3:bucket " .. DATA], "the data bucket is listed")
  t.eq(l.data, true, "it says data is among them")
  -- the command is complete: the CLI's words, a tool and its parameters the registry accepts
  local tname, rest = l.remove:match("^hypd call (%S+)%s*(.*)$")
  t.eq(tname, "cluster_delete")
  local params = {}
  for k, v in rest:gmatch("(%S-):?=(%S+)") do params[k] = v end
  for k, v in rest:gmatch("(%S-):=(%S+)") do params[k] = json.decode(v) end
  t.eq(params, { cluster_tag = TAG, force = true }, l.remove)
  P.remove = params
  t.ok(tool.validate(tool.get(tname), params), "the registry accepts it")
end)

t.test("with force, the plan of what was kept is what the run deletes, and nothing with the tag is left", function()
  local m = E.mark()
  local args = { plan = true }
  for k, v in pairs(P.remove) do args[k] = v end -- the command cluster_list gave
  local p, err = dispatch.call("cluster_delete", args, ADMIN)
  t.ok(p, "the plan answers: " .. json.encode(err))
  local _, total = E.since(m)
  t.eq(total, 0, "the plan sends no mutation")
  local seen = {}
  for _, e in ipairs(p.plan or {}) do
    local k = TD.key(e)
    t.ok(not seen[k], "listed once: " .. k)
    seen[k] = true
    t.ok(e.action == "delete" or e.type == "ec2:route-table" or e.type == "ec2:security-group",
      "with force nothing of the cluster's is kept but what goes with its VPC: " .. e.action .. " " .. k ..
      (e.why and (": " .. e.why) or ""))
  end
  m = E.mark()
  local acc = assert(dispatch.call("cluster_delete", P.remove, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", "cluster_delete force: " .. json.encode(v.error))
  local missing, extra = TD.compare(p, m)
  t.eq(missing, {}, "every AWS delete of the plan was sent")
  t.eq(extra, {}, "nothing was deleted that the plan did not list")
  t.eq(TD.tagged(TAG), {}, "nothing carries hypd:cluster-tag=" .. TAG)
  t.eq(leftovers(TAG), nil, "cluster_list lists no leftovers for it")
  local again = assert(dispatch.call("cluster_delete", { cluster_tag = TAG, force = true, plan = true }, ADMIN))
  t.eq(#(again.plan or {}), 0, "a plan once it is all gone lists nothing: " .. json.encode(again.plan))
end)
