-- hypd.aws.tags: AWS tags as the APIs carry them, a list of {Key, Value}
-- (EC2, IAM, S3's TagSet, FSx, SageMaker), and as a map {key = value}.
-- Playbooks get it as hypd.aws.tags.
local json = require "hypd.json"

local M = {}

-- map(list) -> {key = value} of a list of {Key, Value} (nil: no tags)
function M.map(list)
  local m = {}
  for _, t in ipairs(list or {}) do m[t.Key] = t.Value end
  return m
end

-- list(map) -> a JSON array of {Key, Value}, sorted by key
function M.list(map)
  local keys = {}
  for k in pairs(map) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = json.array()
  for i, k in ipairs(keys) do out[i] = { Key = k, Value = map[k] } end
  return out
end

return M
