-- cluster_delete meets what AWS drains by itself (issue 19: a teardown
-- failed after 16.5 minutes with DependencyViolation on the cluster security
-- group, saying nothing of what held it): the EKS cluster's network
-- interfaces stay a while after the cluster is gone (the sandbox models it:
-- sandbox.services.ec2.managed_enis). The teardown tries the dependency
-- violation again while they drain and then succeeds; when they never go,
-- it fails naming what holds the subnet or group.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

H.sandbox_here()
local Hp = dofile("tests/lua/hyperpod_helpers.lua")
local TD = dofile("tests/lua/teardown_helpers.lua")
local E = Hp.E
local ADMIN = { name = "admin", scope = "admin", front = "test" }
local enis = require "sandbox.services.ec2.managed_enis"

local function delete(tag)
  local acc = assert(dispatch.call("cluster_delete", { cluster_tag = tag }, ADMIN))
  return op.wait(acc.operation_id), acc.operation_id
end

t.test("interfaces that drain for ten minutes: tried again until they are gone, then deleted", function()
  local was = enis.RELEASE
  t.cleanup(function() enis.RELEASE = was end)
  enis.RELEASE = 10 * 60
  Hp.stage1("thd")
  local v, id = delete("thd")
  t.eq(v.status, "succeeded", json.encode(v.error))
  local notes = json.encode(E.notes_of(id))
  t.ok(notes:find("drain", 1, true), "it waited for the dependencies to drain: " .. notes:sub(1, 400))
  t.eq(TD.tagged("thd"), {}, "nothing with the tag is left")
end)

t.test("interfaces that never go: the teardown fails naming what holds the subnet", function()
  local was = enis.RELEASE
  t.cleanup(function() enis.RELEASE = was end)
  enis.RELEASE = 24 * 3600
  Hp.stage1("thx")
  local v = delete("thx")
  t.eq(v.status, "failed")
  t.eq(v.error and v.error.code, "DependencyViolation")
  t.like(v.error and v.error.message or "", "held by Amazon EKS hypd%-thx %(network interface eni%-", "it names the holder")
  -- cluster_list keeps it in sight, with the command to finish it
  local r = assert(dispatch.call("cluster_list", {}, ADMIN))
  local l
  for _, x in ipairs(r.leftovers or {}) do if x.cluster_tag == "thx" then l = x end end
  t.ok(l, "cluster_list lists what is left")
  t.eq(l and l.remove, "hypd call cluster_delete cluster_tag=thx")
end)
