-- What `hypd call` says to the person at the terminal, checked on every
-- tool of the registry: a missing required parameter is named with what it
-- is and how to give it (not the agent's "a decision: ask the person");
-- a misspelt parameter or tool gets "did you mean"; a server that is not
-- there is named with what to start. The registry's own (agent) wording,
-- which MCP and REST answer, is unchanged.
local t = require "hypd.tap"
local tool = require "hypd.tool.registry"
local words = require "hypd.cli._words"
local H = dofile("tests/lua/helpers.lua")

require("hypd.tool.loader").load()
local dir = H.tmpdir()
local env = { HYPD_STATE = dir .. "/state" }
local defs = tool.list()
local names = {}
for i, d in ipairs(defs) do names[i] = d.name end

local function sorted(props)
  local out = {}
  for k in pairs(props or {}) do out[#out + 1] = k end
  table.sort(out)
  return out
end

t.test("every tool's missing required parameters are named for a person: what each is and how to give it", function()
  local n = 0
  for _, d in ipairs(defs) do
    local _, err = tool.validate(d, {})
    local required = {}
    for _, k in ipairs(sorted(d.params)) do
      if d.params[k].required then required[#required + 1] = k end
    end
    if #required > 0 then
      n = n + 1
      local msg = words.explain(err, d.params).message
      for _, k in ipairs(required) do
        t.like(msg, k:gsub("%p", "%%%0") .. " is required[^;]* %(give it as " .. k:gsub("%p", "%%%0") .. "=%.%.%.%)",
          d.name .. ": " .. msg)
      end
      t.eq(msg:find("a decision", 1, true), nil, d.name .. ": no agent wording on the CLI: " .. msg)
      t.eq(msg:find("ask the person", 1, true), nil, d.name .. ": " .. msg)
    end
  end
  t.ok(n >= 30, "tools with required parameters were checked (" .. n .. ")")
end)

t.test("the registry keeps its agent wording for MCP and REST", function()
  local _, err = tool.validate(tool.get("cluster_create_eks"), {})
  t.like(err.message, "cluster_tag: required %(a decision: ask the person who wants the cluster%)")
end)

t.test("hypd call without a required parameter says what it is", function()
  local rc, out, err = H.run_hypd(env, "call", "cluster_create_eks")
  t.eq(rc, 1, out)
  t.like(err, "^hypd: VALIDATION: cluster_create_eks: cluster_tag is required: short lowercase name of this cluster %(3 to 32 " ..
    "characters: a%-z, 0%-9, '%-'%) %(give it as cluster_tag=%.%.%.%)\n$")
end)

t.test("every parameter of every tool written with - for _ gets did you mean, with its value", function()
  local n = 0
  for _, d in ipairs(defs) do
    for _, k in ipairs(sorted(d.params)) do
      if k:find("_", 1, true) then
        n = n + 1
        local typed = k:gsub("_", "-")
        t.eq(words.argument(typed .. "=x", d.params),
          "argument '" .. typed .. "=x' is not key=value or key:=json: did you mean " .. k .. "=x?", d.name)
        t.like(words.argument(typed .. ":=3", d.params), "did you mean " .. k:gsub("%p", "%%%0") .. ":=3%?", d.name)
      end
    end
  end
  t.ok(n >= 50, "parameters checked: " .. n)
  local rc, _, err = H.run_hypd(env, "call", "cluster_create_eks", "cluster-tag=demo")
  t.eq(rc, 2, "a usage error")
  t.eq(err, "hypd: argument 'cluster-tag=demo' is not key=value or key:=json: did you mean cluster_tag=demo?\n")
end)

t.test("a misspelt parameter name gets did you mean, for every tool", function()
  for _, d in ipairs(defs) do
    local ks = sorted(d.params)
    local k = ks[1]
    if k and #k >= 4 then
      local typo = k:sub(1, -2) .. k:sub(-1) .. k:sub(-1) -- its last letter twice
      local _, err = tool.validate(d, { [typo] = "x" })
      local msg = words.explain(err, d.params).message
      t.like(msg, typo:gsub("%p", "%%%0") .. " is not a parameter of this tool: did you mean " ..
        k:gsub("%p", "%%%0") .. "%?", d.name .. ": " .. msg)
    end
  end
  local rc, _, err = H.run_hypd(env, "call", "cluster_create_eks", "cluster_tagg=demo")
  t.eq(rc, 1)
  t.like(err, "cluster_tagg is not a parameter of this tool: did you mean cluster_tag%?")
end)

t.test("a misspelt tool name gets did you mean, for every tool", function()
  for _, name in ipairs(names) do
    local dropped = name:sub(1, 3) .. name:sub(5) -- one letter left out
    t.eq(words.suggest(dropped, names), name, dropped)
    t.eq(words.suggest(name:gsub("_", "-"), names), name, "with - for _")
  end
  t.eq(words.suggest("frobnicate", names), nil, "nothing near: no guess")
  local rc, _, err = H.run_hypd(env, "call", "cluster_creat_eks", "cluster_tag=demo")
  t.eq(rc, 1)
  t.eq(err, "hypd: NOT_FOUND: there is no tool named 'cluster_creat_eks': did you mean cluster_create_eks? " ..
    "(`hypd tools` lists them)\n")
end)

t.test("a server that is not there: the message says what to start", function()
  local _, port = H.sh("python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); " ..
    "print(s.getsockname()[1])'")
  port = port:match("%d+")
  local rc, _, err = H.run_hypd({ HYPD_STATE = env.HYPD_STATE, HYPD_TOKEN = "hypd_x" }, "call", "--api",
    "http://127.0.0.1:" .. port, "cluster_list")
  t.eq(rc, 1)
  t.like(err, "nothing listens on 127%.0%.0%.1:" .. port .. " ")
  t.like(err, "is hypd serve running%? `make run` prints its URL")
end)

t.cleanup(function() os.execute("rm -rf " .. H.quote(dir)) end)
