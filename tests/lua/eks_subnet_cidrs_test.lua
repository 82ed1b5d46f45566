-- cluster_create_eks with explicit subnet CIDRs (public_subnet_cidrs and
-- private_subnet_cidrs, two each, all four or none): bad blocks are refused
-- by the call itself, before any operation or AWS mutation, naming the field
-- and the rule; a plan shows the named blocks; the stage makes the subnets
-- with exactly those blocks; a re-run that names another block for a subnet
-- that exists is a CONFLICT naming the field, sent before anything changes.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local srv = H.sandbox_here()
require("hypd.tool.loader").load()
local E = dofile("tests/lua/eks_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local json, op = require "hypd.json", require "hypd.tool.operations"
local call, mark, since = E.call, E.mark, E.since

-- refused(params) -> the fields of the VALIDATION error a call with them
-- answers; checks that no operation started and no AWS mutation was sent
local function refused(params)
  local m = mark()
  local ops = #op.list {}
  local p = { cluster_tag = "cidr" }
  for k, v in pairs(params) do p[k] = v end
  local out, err = dispatch.call("cluster_create_eks", p, E.WHO)
  t.eq(out, nil, "the call is refused")
  t.eq(err and err.code, "VALIDATION", json.encode(err))
  t.eq(#op.list {}, ops, "no operation was started")
  local _, n = since(m)
  t.eq(n, 0, "no AWS mutation was sent")
  local got = {}
  for _, f in ipairs(err and err.fields or {}) do got[#got + 1] = f.field .. " " .. f.rule end
  table.sort(got)
  return got, err
end

t.test("subnet CIDRs outside vpc_cidr are refused by the call, naming each field and the rule within_vpc", function()
  local got, err = refused { vpc_cidr = "10.50.0.0/16", public_subnet_cidrs = { "10.51.0.0/24", "10.50.1.0/24" },
    private_subnet_cidrs = { "10.50.2.0/24", "192.168.0.0/24" } }
  t.eq(got, { "private_subnet_cidrs[1] within_vpc", "public_subnet_cidrs[0] within_vpc" })
  E.has(err.message, "10.51.0.0/24 is not inside vpc_cidr 10.50.0.0/16", "the message")
end)

t.test("overlapping subnet CIDRs are refused, naming the later field and the one it overlaps", function()
  local got, err = refused { vpc_cidr = "10.50.0.0/16", public_subnet_cidrs = { "10.50.0.0/20", "10.50.16.0/20" },
    private_subnet_cidrs = { "10.50.8.0/24", "10.50.32.0/20" } }
  t.eq(got, { "private_subnet_cidrs[0] overlap" })
  E.has(err.message, "10.50.8.0/24 overlaps public_subnet_cidrs[0] (10.50.0.0/20)", "the message")
end)

t.test("public CIDRs without private ones are refused: all four or none (all_or_none)", function()
  local got, err = refused { vpc_cidr = "10.50.0.0/16", public_subnet_cidrs = { "10.50.0.0/24", "10.50.1.0/24" } }
  t.eq(got, { "private_subnet_cidrs all_or_none" })
  E.has(err.message, "give the CIDRs of all four subnets", "the message")
  got = refused { private_subnet_cidrs = { "10.192.0.0/24", "10.192.1.0/24" } }
  t.eq(got, { "public_subnet_cidrs all_or_none" })
end)

t.test("three or one CIDR for a pair of subnets is refused (count)", function()
  local got = refused { vpc_cidr = "10.50.0.0/16", public_subnet_cidrs = { "10.50.0.0/24", "10.50.1.0/24",
    "10.50.2.0/24" }, private_subnet_cidrs = { "10.50.3.0/24" } }
  t.eq(got, { "private_subnet_cidrs count", "public_subnet_cidrs count" })
end)

t.test("host bits, a /29 and text that is no CIDR are refused (cidr, prefix, pattern)", function()
  local got, err = refused { vpc_cidr = "10.50.0.0/16", public_subnet_cidrs = { "10.50.0.1/24", "10.50.1.0/29" },
    private_subnet_cidrs = { "10.50.2.0/24", "10.50.3.0/24" } }
  t.eq(got, { "public_subnet_cidrs[0] cidr", "public_subnet_cidrs[1] prefix" })
  E.has(err.message, "host bits are set (the network is 10.50.0.0/24)", "the message")
  got = refused { public_subnet_cidrs = { "ten", "10.192.1.0/24" }, private_subnet_cidrs = { "10.192.2.0/24",
    "10.192.3.0/24" } }
  t.eq(got, { "public_subnet_cidrs[0] pattern" })
end)

t.test("a plan with bad CIDRs is refused the same way, and sends nothing", function()
  local got = refused { plan = true, vpc_cidr = "10.50.0.0/16", public_subnet_cidrs = { "10.60.0.0/24",
    "10.50.1.0/24" }, private_subnet_cidrs = { "10.50.2.0/24", "10.50.3.0/24" } }
  t.eq(got, { "public_subnet_cidrs[0] within_vpc" })
end)

local BLOCKS = { public = { "10.77.200.0/24", "10.77.201.0/24" }, private = { "10.77.0.0/18", "10.77.64.0/18" } }
local P = { cluster_tag = "cidrs", vpc_cidr = "10.77.0.0/16", public_subnet_cidrs = BLOCKS.public,
  private_subnet_cidrs = BLOCKS.private }

t.test("a plan lists the four subnets with the named blocks", function()
  local p = { plan = true }
  for k, v in pairs(P) do p[k] = v end
  local out, err = dispatch.call("cluster_create_eks", p, E.WHO)
  t.ok(out, json.encode(err))
  local blocks = {}
  for _, e in ipairs(out and out.plan or {}) do
    if e.type == "ec2:subnet" then blocks[e.name] = e.fields.CidrBlock end
  end
  t.eq(blocks, { ["hypd-cidrs-public-us-west-2a"] = "10.77.200.0/24", ["hypd-cidrs-public-us-west-2b"] = "10.77.201.0/24",
    ["hypd-cidrs-private-us-west-2a"] = "10.77.0.0/18", ["hypd-cidrs-private-us-west-2b"] = "10.77.64.0/18" })
end)

t.test("the stage makes the subnets with exactly the named blocks (DescribeSubnets)", function()
  local id = E.start(P)
  local v = op.wait(id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local got = {}
  for _, s in ipairs(call("ec2", "DescribeSubnets", { Filters = E.by_tag("cidrs") }).Subnets) do
    got[E.tags_of(s.Tags)["hypd:subnet"]] = s.CidrBlock .. " " .. s.AvailabilityZone
  end
  t.eq(got, { ["public-1"] = "10.77.200.0/24 us-west-2a", ["public-2"] = "10.77.201.0/24 us-west-2b",
    ["private-1"] = "10.77.0.0/18 us-west-2a", ["private-2"] = "10.77.64.0/18 us-west-2b" })
end)

t.test("calling again with the same blocks changes nothing (no AWS mutation)", function()
  local m = mark()
  local acc = assert(dispatch.call("cluster_create_eks", P, E.WHO))
  t.eq(op.wait(acc.operation_id).status, "succeeded")
  local counts, n = since(m)
  t.eq(n, 0, json.encode(counts))
end)

t.test("a re-run naming another block for an existing subnet fails with a CONFLICT naming the field, mutating nothing",
  function()
    local m = mark()
    local p = {}
    for k, v in pairs(P) do p[k] = v end
    p.private_subnet_cidrs = { "10.77.0.0/18", "10.77.128.0/18" }
    local acc = assert(dispatch.call("cluster_create_eks", p, E.WHO))
    local v = op.wait(acc.operation_id)
    t.eq(v.status, "failed")
    t.eq(v.error and v.error.code, "CONFLICT")
    E.has(v.error and v.error.message, "private_subnet_cidrs[1]: subnet ", "the error")
    E.has(v.error and v.error.message, "exists with the block 10.77.64.0/18, not 10.77.128.0/18", "the error")
    local counts, n = since(m)
    t.eq(n, 0, json.encode(counts))
  end)

t.cleanup(function() srv:stop() end)
