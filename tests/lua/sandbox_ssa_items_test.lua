-- The sandbox's server-side apply drops a keyed list item its manager no
-- longer applies as a whole: an ownerReferences entry (merge key uid) or a
-- container env entry left out of the next apply goes, key fields and
-- all, as the API server does; before, it was removed leaf by leaf and the
-- item kept a remnant such as {"kind": "Job"} without its uid, which the
-- next apply could not merge (500, "table index is nil").
local t = require "hypd.tap"
local json = require "hypd.json"
local merge = require "sandbox.k8s.merge"

local NOW = "2026-01-01T00:00:00Z"
local OWNER = { apiVersion = "batch/v1", kind = "Job", name = "j", uid = "u-1", controller = false,
  blockOwnerDeletion = false }

local function secret(owner, token)
  local o = { apiVersion = "v1", kind = "Secret", type = "Opaque",
    metadata = { name = "s", namespace = "default", labels = { a = "b" } }, data = { HF_TOKEN = token } }
  if owner then o.metadata.ownerReferences = { owner } end
  return o
end

t.test("an ownerReferences item the manager stops applying goes whole, the next apply merges, and one another " ..
  "manager also owns stays", function()
  local live = assert(merge.apply(nil, secret(OWNER, "eA=="), "hypd", false, NOW))
  t.eq(live.metadata.ownerReferences, { OWNER })
  local dropped = assert(merge.apply(live, secret(nil, "eQ=="), "hypd", true, NOW))
  t.eq(dropped.metadata.ownerReferences == nil or #dropped.metadata.ownerReferences == 0, true,
    "no remnant: " .. json.encode(dropped.metadata.ownerReferences))
  t.eq(dropped.data.HF_TOKEN, "eQ==")
  local again, err = merge.apply(dropped, secret(OWNER, "eQ=="), "hypd", false, NOW)
  t.ok(again, "merged: " .. json.encode(err))
  t.eq(again and again.metadata.ownerReferences, { OWNER })
  -- one another manager also owns stays
  live = assert(merge.apply(nil, secret(OWNER, "eA=="), "hypd", false, NOW))
  live = assert(merge.apply(live, { apiVersion = "v1", kind = "Secret",
    metadata = { name = "s", namespace = "default", ownerReferences = { OWNER } } }, "other", false, NOW))
  local out = assert(merge.apply(live, secret(nil, "eA=="), "hypd", true, NOW))
  t.eq(out.metadata.ownerReferences, { OWNER }, "kept for the other manager")
end)
