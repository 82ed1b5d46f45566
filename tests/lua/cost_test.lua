-- Cost on plans, from the Price List API the sandbox serves: its answers
-- have AWS's shape (PriceList a list of JSON strings, paged as boto3 pages
-- it); a plan of cluster_create costs what its instances, EKS cluster and
-- NAT gateway cost at the prices the API gives (read here through the API,
-- never written in the test); an instance type with no price is listed
-- unpriced; a policy without pricing:GetProducts leaves the plan whole with
-- cost_error instead of cost.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
H.sandbox_here()
require("hypd.tool.loader").load()
local aws, json = require "hypd.aws", require "hypd.json"
local cost = require "hypd.cost"
local dispatch = require "hypd.tool.dispatch"
local WHO = { name = "tester", scope = "admin", front = "test" }
local REGION = "us-west-2"

-- price(service, filters) -> the USD per unit the sandbox's Price List gives (nil when none)
local function price(service, filters)
  local list = { { Type = "TERM_MATCH", Field = "regionCode", Value = REGION } }
  for k, v in pairs(filters) do list[#list + 1] = { Type = "TERM_MATCH", Field = k, Value = v } end
  local out = assert(aws.call("pricing", "GetProducts", { ServiceCode = service, Filters = list },
    { region = "us-east-1" }))
  local doc = out.PriceList[1] and json.decode(out.PriceList[1])
  local _, term = next(doc and doc.terms.OnDemand or {})
  local _, d = next(term and term.priceDimensions or {})
  return d and tonumber(d.pricePerUnit.USD)
end

-- near(a, b, msg [, tol]): hourly figures are rounded to 4 places, monthly ones to cents
local function near(a, b, msg, tol) t.ok(type(a) == "number" and math.abs(a - b) < (tol or 1e-6), (msg or "") .. ": " ..
  tostring(a) .. " vs " .. tostring(b)) end

local function create_plan(itype, count, zone)
  return dispatch.call("cluster_create", { cluster_tag = "cost", instance_type = itype, instance_count = count,
    availability_zone = zone or "us-west-2a", plan = true }, WHO)
end

t.test("GetProducts answers as AWS does: PriceList holds JSON strings, pages by MaxResults and NextToken", function()
  local seen, token, pages = {}, nil, 0
  repeat
    local out = assert(aws.call("pricing", "GetProducts", { ServiceCode = "AmazonSageMaker", MaxResults = 3,
      NextToken = token, Filters = { { Type = "TERM_MATCH", Field = "regionCode", Value = REGION } } },
      { region = "us-east-1" }))
    pages = pages + 1
    t.eq(out.FormatVersion, "aws_v1")
    t.ok(#out.PriceList <= 3, "a page holds at most MaxResults")
    for _, s in ipairs(out.PriceList) do
      t.eq(type(s), "string", "each product is a JSON string")
      local doc = json.decode(s)
      t.eq(doc.serviceCode, "AmazonSageMaker")
      t.eq(doc.product.attributes.regionCode, REGION)
      t.ok(not seen[doc.product.sku], "no product twice across pages")
      seen[doc.product.sku] = true
    end
    token = out.NextToken
  until not token
  t.ok(pages > 1, "more than one page")
  local _, err = aws.try("pricing", "GetProducts", { ServiceCode = "AmazonEC2",
    Filters = { { Type = "LIKE", Field = "x", Value = "y" } } }, { region = "us-east-1" })
  t.like(err and err.message or "", "enum value set", "an unknown filter Type is refused with the model's rule")
  local _, terr = aws.try("pricing", "GetProducts", { ServiceCode = "AmazonEC2", NextToken = "nope" },
    { region = "us-east-1" })
  t.eq(terr and terr.aws_code or terr and terr.code, terr and (terr.aws_code or terr.code))
  t.like(terr and terr.message or "", "nextToken", "a token it did not give is refused")
end)

t.test("boto3 pages GetProducts of the sandbox and reads each product as JSON", function()
  if H.sh("python3 -c 'import boto3'") ~= 0 then return t.skip("no boto3 on this machine") end
  local dir = H.tmpdir()
  H.write(dir .. "/p.py", [[
import boto3, json
c = boto3.client("pricing", region_name="us-east-1")
f = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"}]
n = 0
for page in c.get_paginator("get_products").paginate(ServiceCode="AmazonSageMaker", Filters=f,
                                                      PaginationConfig={"PageSize": 4}):
    for s in page["PriceList"]:
        json.loads(s)["terms"]["OnDemand"]
        n += 1
one = c.get_products(ServiceCode="AmazonSageMaker", Filters=f, MaxResults=100)
print(json.dumps({"paged": n, "one": len(one["PriceList"])}))
]])
  -- a sandbox process of its own: this process waits on python, so the one here cannot answer
  local env, pid = H.sandbox_process(dir)
  t.ok(env, "a sandbox process")
  if not env then return end
  t.cleanup(function() os.execute("kill " .. pid) end)
  local rc, out, err = H.with_env(env, dir, "python3 " .. H.quote(dir .. "/p.py"))
  t.eq(rc, 0, err)
  local r = json.decode(out or "") or {}
  t.ok((r.one or 0) > 4, "more products than one page of 4")
  t.eq(r.paged, r.one, "paging by 4 gives every product once")
end)

t.test("a plan of cluster_create costs its instances, EKS cluster and NAT gateway at the Price List's prices", function()
  cost.forget()
  local r, err = create_plan("ml.g5.12xlarge", 2)
  t.ok(r, json.encode(err))
  local c = r and r.cost
  t.ok(c, "the plan has a cost: " .. json.encode(r and r.cost_error))
  if not c then return end
  local inst = price("AmazonSageMaker", { instanceName = "ml.g5.12xlarge", component = "HyperPod" })
  local eks = price("AmazonEKS", { productFamily = "Compute" })
  local nat = price("AmazonEC2", { productFamily = "NAT Gateway" })
  t.ok(inst and eks and nat, "the sandbox prices all three")
  local want = 2 * inst + eks + nat
  near(c.hourly, want, "hourly")
  near(c.monthly, math.floor(want * 730 * 100 + 0.5) / 100, "monthly = 730 hours")
  t.eq(c.currency, "USD")
  local by = {}
  for _, i in ipairs(c.items) do by[i.type] = i end
  t.eq(by.instance and by.instance.quantity, 2)
  near(by.instance and by.instance.unit_price, inst, "unit price")
  t.eq(by.eks and by.eks.action, "create")
  t.eq(#c.unpriced, 0, json.encode(c.unpriced))
end)

t.test("an instance type the Price List does not price is listed unpriced, never given a figure", function()
  t.eq(price("AmazonSageMaker", { instanceName = "ml.p5.48xlarge", component = "HyperPod" }), nil,
    "the sandbox has no price for it")
  local r, err = create_plan("ml.p5.48xlarge", 1, "us-west-2b")
  t.ok(r, json.encode(err))
  local c = r and r.cost or {}
  t.eq(#(c.unpriced or {}), 1, json.encode(c.unpriced))
  t.eq(c.unpriced and c.unpriced[1] and c.unpriced[1].instance_type, "ml.p5.48xlarge")
  t.like(c.unpriced and c.unpriced[1] and c.unpriced[1].why or "", "no on%-demand price")
  for _, i in ipairs(c.items or {}) do t.ok(i.type ~= "instance", "no instance priced") end
end)

t.test("without pricing:GetProducts in the policy the plan stands, with cost_error and no cost", function()
  cost.forget()
  local policy = require "sandbox.policy"
  local doc = assert(require("hypd.iam_policy").document {})
  local kept = json.array()
  for _, st in ipairs(doc.Statement) do
    local acts = type(st.Action) == "table" and st.Action or { st.Action }
    local left = json.array()
    for _, a in ipairs(acts) do if a ~= "pricing:GetProducts" then left[#left + 1] = a end end
    if #left > 0 then st.Action = left; kept[#kept + 1] = st end
  end
  doc.Statement = kept
  assert(policy.set(doc))
  t.cleanup(function() policy.set(nil) end)
  local r, err = create_plan("ml.g5.12xlarge", 2)
  t.ok(r, json.encode(err))
  t.ok(r and r.create > 0, "the plan is whole")
  t.eq(r and r.cost, nil)
  t.like(r and r.cost_error or "", "pricing:GetProducts")
  t.ok(not (r and r.cost_error or ""):find("\n"), "one line")
  policy.set(nil)
end)

t.test("hypd iam-policy grants pricing:GetProducts to the tools that price", function()
  local doc = assert(require("hypd.iam_policy").document {})
  local found = false
  for _, st in ipairs(doc.Statement) do
    for _, a in ipairs(type(st.Action) == "table" and st.Action or { st.Action }) do
      found = found or a == "pricing:GetProducts"
    end
  end
  t.ok(found, "pricing:GetProducts is in the policy")
end)

t.test("a running cluster's groups each cost count x price in hyperpod_list_instance_groups, with the total; " ..
  "a scale plan costs the new count", function()
  local Hp = dofile("tests/lua/hyperpod_helpers.lua")
  require("hypd.core").virtual(true)
  t.cleanup(function() require("hypd.core").virtual(false) end)
  t.eq(require("hypd.tool.operations").wait(Hp.E.start { cluster_tag = "cst" }).status, "succeeded")
  local v = Hp.run("hyperpod_create", { instance_type = "ml.g5.12xlarge", instance_count = 2,
    availability_zone = "us-west-2a" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  local inst = price("AmazonSageMaker", { instanceName = "ml.g5.12xlarge", component = "HyperPod" })
  local r, err = dispatch.call("hyperpod_list_instance_groups", {}, WHO)
  t.ok(r, json.encode(err))
  local g = r and r.instance_groups[1] or {}
  t.eq(g.current_count, 2)
  near(g.cost and g.cost.hourly, 2 * inst, "the group's running cost")
  near(r and r.cost and r.cost.hourly, 2 * inst, "the cluster's total")
  near(r and r.cost and r.cost.monthly, math.floor(2 * inst * 730 * 100 + 0.5) / 100, "a month of 730 hours")
  local p = dispatch.call("hyperpod_scale_instance_group", { instance_group = g.name, instance_count = 3,
    plan = true }, WHO)
  near(p and p.cost and p.cost.hourly, 3 * inst, "the scale plan costs the group at its new count: " ..
    json.encode(p and (p.cost or p.cost_error)))
end)

t.test("a teardown that keeps a file system that may hold data says what it keeps costs", function()
  require("hypd.core").virtual(true)
  t.cleanup(function() require("hypd.core").virtual(false) end)
  local op = require "hypd.tool.operations"
  local function run(name, params) return op.wait(assert(dispatch.call(name, params, WHO)).operation_id) end
  t.eq(run("cluster_configure_dependencies", {}).status, "succeeded")
  local s = run("storage_create_fsx", {})
  t.eq(s.status, "succeeded", json.encode(s.error))
  local per_gb = price("AmazonFSx", { deploymentOption = "Persistent_2", throughputCapacity = "125" })
  t.ok(per_gb, "the sandbox prices PERSISTENT_2 at 125 MB/s/TiB")
  local v = run("cluster_delete", { cluster_tag = "cst" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  local r = v.result or {}
  local fs
  for _, k in ipairs(r.kept or {}) do if k.type == "fsx:file-system" then fs = k end end
  t.ok(fs, "the file system is kept: " .. json.encode(r.kept))
  local c = r.kept_cost
  t.ok(c, "the kept cost: " .. json.encode(r.kept_cost_error))
  local item = c and c.items[1]
  t.eq(item and item.type, "fsx")
  near(c and c.hourly, (item and item.quantity or 0) * per_gb / 730, "capacity x price per GB-month / 730", 5e-5)
end)
