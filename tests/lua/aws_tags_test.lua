-- hypd.aws.tags: AWS tags as [{Key, Value}] and as {key = value}, the one
-- conversion the sandbox's tagging operations and the built-in tools use;
-- playbooks get it as hypd.aws.tags.
local t = require "hypd.tap"
local json = require "hypd.json"
local playbook_api = require "hypd.playbook_api"

local function tags() return require "hypd.aws.tags" end

t.test("a tag list becomes a map, and none an empty one", function()
  local T = tags()
  t.eq(T.map { { Key = "Name", Value = "a" }, { Key = "hypd:cluster-tag", Value = "demo" } },
    { Name = "a", ["hypd:cluster-tag"] = "demo" })
  t.eq(T.map(nil), {})
  t.eq(T.map {}, {})
end)

t.test("a map becomes a tag list sorted by key, an empty one the JSON array []", function()
  local T = tags()
  t.eq(T.list { z = "1", a = "2", m = "3" },
    { { Key = "a", Value = "2" }, { Key = "m", Value = "3" }, { Key = "z", Value = "1" } })
  t.eq(json.encode(T.list {}), "[]")
  t.eq(T.map(T.list { k = "v", j = "w" }), { k = "v", j = "w" })
end)

t.test("playbooks get the same functions as hypd.aws.tags", function()
  local api = playbook_api.build("x")
  t.eq(type(api.aws.tags), "table", "hypd.aws.tags")
  t.eq(api.aws.tags.list { b = "2", a = "1" }, tags().list { b = "2", a = "1" })
  t.eq(api.aws.tags.map { { Key = "a", Value = "1" } }, { a = "1" })
end)
