-- The hashes behind names hypd cuts to fit (workflows' _hash) and behind
-- the sandbox's generated names (pod-template-hash, load balancer host
-- names): FNV-1a's published vectors, and the names they give, which are
-- in users' accounts and must never change.
local t = require "hypd.tap"
local playbook = require "hypd.playbook"
local ctl = require "sandbox.k8s.controllers._ctl"

local LONG = "a-cluster-tag-that-is-much-longer-than-any-name-limit-allows-for-it"

t.test("_hash.fnv1a is 32-bit FNV-1a, cut to the last digits asked for", function()
  local hash = playbook.load("_hash")
  t.eq(hash.fnv1a(""), "811c9dc5")
  t.eq(hash.fnv1a("a"), "e40c292c")
  t.eq(hash.fnv1a("foobar"), "bf9cf968")
  t.eq(hash.fnv1a("foobar", 6), "9cf968")
end)

t.test("the names cut with it keep their suffixes", function()
  local names = playbook.load("_names")
  t.eq(names.bucket(LONG, "123456789012", "us-west-2"),
    "hypd-a-cluster-tag-that-is-m-84d737-data-123456789012-us-west-2")
  local download = playbook.load("jobs._download")
  t.eq(download.default_name("org/" .. LONG), "hf-download-org-a-cluster-tag-that-is-much-longer-than-a-42d5ee")
  t.eq(download.secret_name(LONG), "a-cluster-tag-that-is-much-longer-than-any-name-84d737-hf-token")
  local feat = playbook.load("hyperpod._feat")
  t.eq(feat.fit("SageMakerHyperPodTrainingOperator-" .. LONG, 64),
    "SageMakerHyperPodTrainingOperator-a-cluster-tag-that-is-136bff01")
end)

t.test("the sandbox's fnv1a64 is 64-bit FNV-1a; its names stay the same", function()
  t.eq(string.format("%016x", ctl.fnv1a64("")), "cbf29ce484222325")
  t.eq(string.format("%016x", ctl.fnv1a64("a")), "af63dc4c8601ec8c")
  t.eq(string.format("%016x", ctl.fnv1a64("foobar")), "85944171f73967e8")
  t.eq(ctl.hash("default/web"), "bhrqrxbchd")
  t.eq(ctl.hash("default/web", 30), "bhrqrxbchdn9dng6gp99dw6scrgtkb")
end)
