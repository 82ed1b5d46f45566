-- greet: typed arguments. key=value gives a string, key:=json any JSON value.
--   hypd run examples/playbooks/greet.lua count:=3 tags:='["a"]'
--   hypd --playbooks examples/playbooks run greet count:=2
local function main(args)
  local count = args.count or 1
  if math.type(count) ~= "integer" or count < 1 or count > 100 then
    hypd.errors.refuse("count", "range", "count: an integer from 1 to 100 (pass it as count:=3)")
  end
  local lines = {}
  for i = 1, count do lines[i] = "hello " .. i end
  return { lines = lines, tags = args.tags or hypd.json.array() }
end

return { main = main }
