-- cluster_create survives the server errors AWS actually shows. Against
-- the in-process sandbox under the virtual clock, with a share of the
-- requests to every AWS service answered InternalFailure 500, half of them
-- before the work (error5xx) and half after it was done (error5xx_after:
-- the caller cannot tell whether its create took effect), each of several
-- pipelines (differently seeded) succeeds in its first run, not in a
-- re-run, and makes each resource once: the create-like mutations in the
-- sandbox's audit log are those of a calm run. (Before, one 5xx on any
-- create failed the pipeline: an unsafe create is not retried by the
-- client, and ensure raised what reached it.)
local t = require "hypd.tap"
local faults = require "sandbox.faults"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local store = require "hypd.store"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local sandbox_srv = H.sandbox_here()
local E = dofile("tests/lua/eks_helpers.lua")
local mark = E.mark

local SERVICES = { "ec2", "eks", "iam", "s3", "sagemaker", "servicequotas", "sts" }
local RATES = { 0.05, 0.06, 0.07, 0.08, 0.09, 0.10 } -- one pipeline each, its seed its own
local function pipeline(tag)
  return { cluster_tag = tag, instance_type = "ml.g5.12xlarge", instance_count = 1, availability_zone = "us-west-2a",
    features = { training_operator = true } }
end

local function run(params)
  local acc, err = dispatch.call("cluster_create", params, E.WHO)
  assert(acc, json.encode(err))
  return op.wait(acc.operation_id)
end

-- creates(m) -> {"service Operation" = n}: the create-like mutations in
-- the sandbox's audit log since mark m. A Put* (an S3 object, an inline
-- policy) is counted once per thing it writes: the client retries a PUT
-- whose answer was lost (writing the same again is what PUT means), so
-- what counts is that nothing else was written.
local function creates(m)
  local out, seen = {}, {}
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    local d = e.kind == "sandbox.audit" and not e.data.refused and e.data
    local k = d and (d.service .. " " .. d.operation)
    if k and (k:match(" Create") or k:match(" Allocate") or k:match(" Attach") or k:match(" Associate") or
        k:match(" Put")) then
      local once = k:match(" Put") and (k .. " " .. tostring(d.target))
      if not (once and seen[once]) then out[k] = (out[k] or 0) + 1 end
      if once then seen[once] = true end
    end
  end
  return out
end

local calm
t.test("a calm run of the pipeline succeeds (the counts to compare with)", function()
  local m = mark()
  local v = run(pipeline("calm"))
  t.eq(v.status, "succeeded", json.encode(v.error))
  calm = creates(m)
end)

for i, rate in ipairs(RATES) do
  t.test(string.format("with %d%% of every service's requests answered 500 (half before the work, half after " ..
    "it), pipeline %d succeeds in its first run and makes each resource once", math.floor(rate * 100 + 0.5), i),
      function()
    local svc = {}
    for _, s in ipairs(SERVICES) do svc[s] = { error5xx = rate / 2, error5xx_after = rate / 2 } end
    assert(faults.configure { seed = 1800 + i, services = svc })
    t.cleanup(function() faults.configure {} end)
    local m = mark()
    local v = run(pipeline("chaos-" .. i))
    faults.configure {}
    t.eq(v.status, "succeeded", json.encode(v.error))
    t.eq(creates(m), calm, "the same resources as the calm run, each once")
  end)
end

t.test("the sandbox was kept", function() t.ok(sandbox_srv.port > 0) end)
