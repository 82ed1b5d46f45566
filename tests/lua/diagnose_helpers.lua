-- tests/lua/diagnose_helpers.lua: what the diagnostic tests share: running
-- a diagnostic while counting the writes the sandbox sees (none may
-- happen), checking every call it suggests (its args through the
-- registry's validation, and its text read back as a person would type it),
-- and reading findings.
local t = require "hypd.tap"
local json = require "hypd.json"
local store = require "hypd.store"
local registry = require "hypd.tool.registry"
local FH = dofile("tests/lua/features_helpers.lua")

local D = {}

-- writes(m) -> AWS mutations, Kubernetes writes (the sandbox's own audits) since m
function D.writes(m)
  local _, aws = FH.since(m)
  local k8s = 0
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "sandbox.k8s.audit" then k8s = k8s + 1 end
  end
  return aws, k8s
end

-- words(text) -> the shell words of a call's text (single quotes as sh reads them)
local function words(text)
  local out, cur, i, inword = {}, {}, 1, false
  while i <= #text do
    local c = text:sub(i, i)
    if c == "'" then
      local j = text:find("'", i + 1, true)
      cur[#cur + 1] = text:sub(i + 1, j - 1)
      i, inword = j + 1, true
    elseif c == " " then
      if inword then out[#out + 1] = table.concat(cur); cur, inword = {}, false end
      i = i + 1
    else
      cur[#cur + 1] = c
      i, inword = i + 1, true
    end
  end
  if inword then out[#out + 1] = table.concat(cur) end
  return out
end

-- parse(text) -> tool, args: the call text (TOOL k=v k:=json) as a person runs it
function D.parse(text)
  local w = words(text)
  local args = {}
  for i = 2, #w do
    local k, v = w[i]:match("^([%w_]+):=(.*)$")
    if k then args[k] = json.decode(v)
    else
      k, v = w[i]:match("^([%w_]+)=(.*)$")
      args[k] = v
    end
  end
  return w[1], args
end

-- run(tool, args, who) -> the answer, err; asserts no write while it ran and
-- that every suggested call validates and its text says the same call
function D.run(tool, args, who)
  local m = FH.mark()
  local r, err = require("hypd.tool.dispatch").call(tool, args, who)
  local aws, k8s = D.writes(m)
  t.eq({ aws, k8s }, { 0, 0 }, tool .. ": no AWS mutation, no Kubernetes write while it ran")
  for _, f in ipairs(r and r.findings or {}) do
    for _, s in ipairs(f.next) do
      local def = registry.get(s.tool)
      local verr
      if def then verr = select(2, registry.validate(def, s.args)) end
      t.ok(def and not verr, f.code .. " suggests " .. s.call .. (verr and (": " .. verr.message) or ""))
      local name, parsed = D.parse(s.call)
      t.eq({ name, parsed }, { s.tool, s.args }, f.code .. ": the call's text is the call")
    end
  end
  return r, err
end

function D.find(r, code)
  for _, f in ipairs(r and r.findings or {}) do if f.code == code then return f end end
end

-- quotes(f) -> "source | quote" of every evidence of f, one a line
function D.quotes(f)
  local out = {}
  for _, e in ipairs(f and f.evidence or {}) do out[#out + 1] = e.source .. " | " .. e.quote end
  return table.concat(out, "\n")
end

function D.codes(r)
  local out = {}
  for _, f in ipairs(r and r.findings or {}) do out[#out + 1] = f.code end
  table.sort(out)
  return out
end

-- esc(s) -> s as a Lua pattern matching itself
function D.esc(s) return (tostring(s):gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

return D
