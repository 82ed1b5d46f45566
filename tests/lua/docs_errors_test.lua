-- docs/troubleshooting.md explains every error code hypd's code returns,
-- and no code the code no longer has. The codes are read from the source
-- by one rule, the same at every run:
--   Lua (lua/hypd, lua/workflows, lua/playbooks): the first argument of
--     errors.new, errors.fail and errors.raise, the code of a REST fail(STATUS,
--     "CODE", ...), and every code = "CODE" (a refusal's extra, an error
--     table) except in lua/workflows/diagnose/, where code = names a
--     diagnosis finding, not an error;
--   C (host/*.c): the code given to hx_fail, hx_raise, hx_newerror (any
--     hx_*(L, "CODE", ...)), to refuse(v, STATUS, "CODE", ...), and every
--     code = "CODE" (error_code too);
--   a CODE is upper case: letters, digits and underscores.
-- Each must have its "### CODE" heading under "## hypd's codes"; the
-- Kubernetes reasons hypd gives for a status (REASON_BY_STATUS in
-- lua/hypd/k8s/init.lua) must each be in its table.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")

local CODE = "([A-Z][A-Z0-9_]+)"
local LUA = { 'errors%.new%(%s*"' .. CODE .. '"', 'errors%.fail%(%s*"' .. CODE .. '"',
  'errors%.raise%(%s*"' .. CODE .. '"', '[^%w_]fail%(%d+,%s*"' .. CODE .. '"' }
local C = { 'hx_[%w_]+%(%s*L%s*,%s*"' .. CODE .. '"', 'refuse%([%w_]+,%s*%d+,%s*"' .. CODE .. '"' }
local ASSIGNED = 'code%s*=%s*"' .. CODE .. '"'

-- codes() -> {CODE = the first file that returns it}, and how many files were read
local function codes()
  local _, list = H.sh("((find lua/hypd lua/workflows lua/playbooks -name '*.lua'; find host -name '*.c') | LC_ALL=C sort)")
  local found, n = {}, 0
  for f in (list or ""):gmatch("[^\n]+") do
    local text = assert(H.read(f), f)
    n = n + 1
    local pats = {}
    for _, p in ipairs(f:match("%.c$") and C or LUA) do pats[#pats + 1] = p end
    if not f:match("^lua/workflows/diagnose/") then pats[#pats + 1] = ASSIGNED end
    for _, p in ipairs(pats) do
      for c in text:gmatch(p) do found[c] = found[c] or f end
    end
  end
  return found, n
end

local doc = H.read("docs/troubleshooting.md") or ""
local own = doc:match("\n## hypd's codes\n(.-)\n## ") or ""
local headings = {}
for c in ("\n" .. own):gmatch("\n### ([%w_]+)\n") do headings[c] = true end

local found, nfiles = codes()

t.test("the rule finds the source's files and its well-known codes", function()
  t.ok(nfiles > 100, "files read: " .. nfiles)
  for _, c in ipairs { "VALIDATION", "NOT_FOUND", "CONFLICT", "STATE", "LOCKED", "GUARDRAIL", "STORE", "TLS" } do
    t.ok(found[c], "the rule finds " .. c)
  end
  t.ok(not found.NCCL_TIMEOUT, "a diagnosis finding's code is not an error code")
end)

t.test("docs/troubleshooting.md has a section for every error code in the source", function()
  t.ok(doc ~= "", "docs/troubleshooting.md exists")
  t.ok(next(found) ~= nil, "codes found in the source")
  local names = {}
  for c in pairs(found) do names[#names + 1] = c end
  table.sort(names)
  local missing = {}
  for _, c in ipairs(names) do
    if not headings[c] then missing[#missing + 1] = c .. " (" .. found[c] .. ")" end
  end
  t.eq(missing, {}, "codes with no \"### CODE\" section under \"## hypd's codes\" in docs/troubleshooting.md")
end)

t.test("every code docs/troubleshooting.md explains is one the source returns", function()
  local stale = {}
  for c in pairs(headings) do if not found[c] then stale[#stale + 1] = c end end
  table.sort(stale)
  t.eq(stale, {}, "sections for codes the source no longer has")
end)

t.test("every Kubernetes reason hypd gives for a status is in the Kubernetes table", function()
  local src = assert(H.read("lua/hypd/k8s/init.lua"))
  local line = src:match("REASON_BY_STATUS = (%b{})")
  t.ok(line, "REASON_BY_STATUS in lua/hypd/k8s/init.lua")
  local k8s = doc:match("\n## Kubernetes reasons\n(.-)\n## ") or ""
  local n = 0
  for status, reason in (line or ""):gmatch('%[(%d+)%]%s*=%s*"(%a+)"') do
    n = n + 1
    t.ok(k8s:find("| `" .. reason .. "` | " .. status .. " |", 1, true), "the table has " .. reason .. " (" .. status .. ")")
  end
  t.ok(n >= 10, "reasons read: " .. n)
end)
