-- examples/agents/: every configuration parses, runs `hypd mcp` with
-- toolsets that exist and whose tools/list is under the 25,000-token budget, names only tools that exist, auto-approves only read
-- tools, gives no shell, loads the toolsets the tools of its skills are in,
-- and in its remote form takes the token from HYPD_TOKEN, never a literal.
local t = require "hypd.tap"
local json = require "hypd.json"
local mcp = require "hypd.api.mcp"
local toolsets = require "hypd.tool.toolsets"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
local SK = dofile("tests/lua/skills_names.lua")
local sizes = dofile("tests/lua/toolsets_sizes.lua")
require("hypd.tool.loader").load()

local DIR = "examples/agents/"

local function load(path)
  local text = assert(H.read(DIR .. path), path .. " is there")
  local v, err = json.decode(text)
  t.ok(v, path .. " is JSON" .. (err and ": " .. tostring(err.message) or ""))
  return v or {}, text
end

-- sets_of(server) -> the toolsets a server entry loads (its --toolsets, else the default)
local function sets_of(path, srv)
  t.eq(srv.command, "hypd", path .. ": runs hypd")
  local args = srv.args or {}
  t.eq(args[1], "mcp", path .. ": hypd mcp")
  local named = "default"
  for i, a in ipairs(args) do if a == "--toolsets" then named = args[i + 1] end end
  local sets, err = toolsets.parse(named)
  t.ok(sets, path .. ": toolsets " .. tostring(named) .. (err and ": " .. err.message or ""))
  if sets then
    local size = sizes.measure_set(named)
    t.ok(size.tokens < sizes.TARGET, path .. ": its tools/list is under " .. sizes.TARGET .. " tokens: " .. size.tokens)
  end
  return sets or {}
end

local function remote_ok(path, srv)
  local args, api = srv.args or {}, nil
  for i, a in ipairs(args) do if a == "--api" then api = args[i + 1] end end
  t.like(api or "", "^http://127%.0%.0%.1:%d+$", path .. ": --api is the port forward's local end")
  t.eq(srv.env and srv.env.HYPD_TOKEN, "${HYPD_TOKEN}", path .. ": the token comes from HYPD_TOKEN")
end

-- a tool by name: it exists, and is in the sets loaded
local function usable(path, name, sets, why)
  local def = tool.get(name)
  t.ok(def, path .. ": " .. name .. " exists (" .. why .. ")")
  if def then t.ok(toolsets.has(def, sets), path .. ": " .. name .. " is in the toolsets it loads (" .. why .. ")") end
  return def
end

local function auto_approved(path, name, sets)
  local def = usable(path, name, sets, "auto-approved")
  if def then t.eq(def.kind, "read", path .. ": " .. name .. " is auto-approved, so it must be a read tool") end
end

-- the tools the skills use (call), each checked usable with sets
local function skills_covered(path, names, sets)
  t.ok(#names >= 3, path .. ": it loads skills")
  for _, s in ipairs(names) do
    local text = H.read("skills/" .. s .. "/SKILL.md")
    t.ok(text and mcp.parse_skill(text), path .. ": skill " .. s .. " exists")
    -- a tool it names exists; a tool it calls is loaded
    for _, n in ipairs(SK.named(text or "")) do t.ok(tool.get(n), path .. ": skill " .. s .. " names " .. n) end
    for _, c in ipairs(SK.calls(text or "")) do usable(path, c.tool, sets, "skill " .. s .. " calls it") end
  end
end

local function skills_named_in(text)
  local out, seen = {}, {}
  for s in text:gmatch("`([a-z][a-z-]+)`") do
    if not seen[s] and H.read("skills/" .. s .. "/SKILL.md") then seen[s] = true; out[#out + 1] = s end
  end
  return out
end

local PROMPT = assert(H.read(DIR .. "kiro/prompts/hypd-inst-agent.md"))

t.test("the Kiro agent hypd-inst-agent: hypd's tools only, read tools auto-approved, the skills as resources", function()
  for _, path in ipairs { "kiro/hypd-inst-agent.json", "kiro/hypd-inst-agent-remote.json" } do
    local a = load(path)
    t.like(a.name or "", "^hypd%-inst%-agent", path .. ": name")
    local srv = (a.mcpServers or {}).hypd or {}
    local sets = sets_of(path, srv)
    if path:find("remote") then remote_ok(path, srv) end
    t.eq(a.tools, { "@hypd" }, path .. ": only hypd's MCP tools (no shell, no file writes)")
    t.eq(a.includeMcpJson, false, path .. ": no other MCP servers")
    t.ok(#(a.allowedTools or {}) > 10, path .. ": read tools are auto-approved")
    for _, x in ipairs(a.allowedTools or {}) do
      local name = x:match("^@hypd/([a-z_]+)$")
      t.ok(name, path .. ": " .. x .. " names one hypd tool (no wildcard)")
      if name then auto_approved(path, name, sets) end
    end
    local skills = {}
    for _, r in ipairs(a.resources or {}) do
      local s = r:match("^skill://skills/([a-z-]+)/SKILL%.md$")
      t.ok(s, path .. ": resource " .. r .. " is a skill")
      skills[#skills + 1] = s
    end
    skills_covered(path, skills, sets)
    t.eq(a.prompt, "file://./prompts/hypd-inst-agent.md", path .. ": the prompt file")
    for _, n in ipairs(SK.named(PROMPT)) do usable(path, n, sets, "the prompt names it") end
  end
end)

t.test("Claude Code: .mcp.json, settings that allow only read tools and deny the shell, a subagent without one", function()
  local m = load("claude-code/.mcp.json")
  local sets = sets_of("claude-code/.mcp.json", m.mcpServers.hypd or {})
  local r = load("claude-code/remote/.mcp.json")
  local rsrv = r.mcpServers.hypd or {}
  remote_ok("claude-code/remote/.mcp.json", rsrv)
  t.eq(sets_of("claude-code/remote/.mcp.json", rsrv), sets, "the remote form loads the same sets")
  local st = load("claude-code/.claude/settings.json")
  local allow = st.permissions and st.permissions.allow or {}
  t.ok(#allow > 10, "read tools are allowed")
  for _, x in ipairs(allow) do
    local name = x:match("^mcp__hypd__([a-z_]+)$")
    t.ok(name, "settings: " .. x .. " is one hypd tool")
    if name then auto_approved("settings.json", name, sets) end
  end
  local deny = {}
  for _, x in ipairs(st.permissions and st.permissions.deny or {}) do deny[x] = true end
  t.ok(deny.Bash, "settings: the shell is denied")
  local text = assert(H.read(DIR .. "claude-code/.claude/agents/hypd.md"))
  local head, body = text:match("^%-%-%-(\n.-)\n%-%-%-\n\n?(.*)$")
  t.ok(head, "the subagent has front matter")
  t.like(head or "", "\nname: hypd\n", "its name")
  t.like(head or "", "\ndescription: %S", "its description")
  local tools = {}
  for x in ((head or ""):match("\ntools: ([^\n]*)") or ""):gmatch("[^,%s]+") do
    t.ok(x ~= "Bash", "the subagent has no shell")
    local name = x:match("^mcp__hypd__([a-z_]+)$")
    if name then tools[name] = true; usable("hypd.md", name, sets, "in its tools") end
  end
  t.eq(body, PROMPT, "the subagent's prompt is the Kiro agent's, word for word")
  local skills = skills_named_in(PROMPT)
  t.ok(#skills >= 3, "the prompt names the skills it follows")
  skills_covered("hypd.md", skills, sets)
  for _, s in ipairs(skills) do
    for _, c in ipairs(SK.calls(H.read("skills/" .. s .. "/SKILL.md"))) do
      t.ok(tools[c.tool], "hypd.md: its tools hold " .. c.tool .. ", which skill " .. s .. " calls")
    end
  end
end)

t.test("the generic MCP client configurations", function()
  local g = load("generic/mcp.json")
  sets_of("generic/mcp.json", g.mcpServers.hypd or {})
  local r = load("generic/mcp-remote.json")
  sets_of("generic/mcp-remote.json", r.mcpServers.hypd or {})
  remote_ok("generic/mcp-remote.json", r.mcpServers.hypd or {})
end)

t.test("no configuration holds a token or a credential", function()
  local _, out = H.sh("grep -rIlE 'Bearer|AKIA[0-9A-Z]{16}|aws_secret|HYPD_TOKEN\"? *[:=] *\"[^$]' " .. DIR)
  t.eq(out, "", "files with a literal credential")
end)
