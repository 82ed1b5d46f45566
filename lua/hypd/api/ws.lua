-- hypd.api.ws: the /ws WebSocket. One connection carries operation events,
-- state changes and log lines to a browser or a script, as JSON messages:
--
--   client -> {"type": "auth", "token": "hypd_..."}       (unless the upgrade
--             request had an Authorization header; never a URL parameter)
--   client -> {"type": "subscribe", "topics": ["operations", "operation:op-...", "logs"]}
--   client -> {"type": "unsubscribe", "topics": [...]}
--   client -> {"type": "ping"}                             -> {"type": "pong"}
--   server -> {"type": "ready", "user": name, "scope": s}
--   server -> {"type": "event", "topic": "operations", "event": {kind, operation_id, phase, status, ...}}
--   server -> {"type": "event", "topic": "state", "event": {kind = "resource.changed", resource, ...}}
--   server -> {"type": "log", "level", "component", "message"}   (topic "logs"; scope operate or admin)
--   server -> {"type": "event", "topic": "monitor:<cluster>", "event": {kind = "monitor.snapshot", snapshot}}
--             (monitor_get_cluster's answer: at subscribe, then at a change, at most every 2 s; hypd.api.ws_monitor)
--   server -> {"type": "error", "message": "..."}
--   client -> {"type": "logs.follow", "id", "kind", "name", ...} / {"type": "logs.stop", "id"}
--   server -> {"type": "logs.line", ...} / {"type": "logs.end", ...}   (live pod logs: hypd.api.ws_logs)
--
-- Protocol pings are answered by the transport. A connection that sends
-- nothing for IDLE seconds is closed (1000 "idle") unless it follows logs;
-- one that does not authenticate within AUTH_WAIT seconds is closed
-- (4401). Under the virtual clock (HYPD_CLOCK=virtual) neither deadline
-- applies.
local auth = require "hypd.api.auth"
local core = require "hypd.core"
local json = require "hypd.json"
local log = require "hypd.log"
local op = require "hypd.tool.operations"
local ws_logs = require "hypd.api.ws_logs"
local ws_monitor = require "hypd.api.ws_monitor"

local M = {}
M.IDLE = 300
M.AUTH_WAIT = 10
local TOPICS = { operations = true, state = true, logs = true }

local function send(ws, msg) return ws:send(json.encode(msg)) end

-- wait(seconds) -> the deadline of a read: none under the virtual clock,
-- where it would pass at once (as mcp_http's keepalive)
local function wait(seconds)
  if not core.virtual() then return seconds end
end

local function authenticate(ws, req)
  if req.headers.authorization then
    return auth.check(req.headers.authorization, req.peer)
  end
  local text, err = ws:recv(wait(M.AUTH_WAIT))
  if not text then return nil, err end
  local msg = json.decode(text)
  if type(msg) ~= "table" or msg.type ~= "auth" or type(msg.token) ~= "string" then
    return nil, { code = "UNAUTHORIZED", message = "the first message must be {\"type\": \"auth\", \"token\": ...}" }
  end
  return auth.check("Bearer " .. msg.token, req.peer)
end

-- session(ws, user): subscriptions, and the loop reading client messages
local function session(ws, user)
  local topics = {}
  local function wants(ev)
    if ev.kind == "resource.changed" then return topics.state end
    return topics.operations or topics["operation:" .. tostring(ev.operation_id)]
  end
  local unsub_op = op.subscribe(function(ev)
    if wants(ev) then
      send(ws, { type = "event", topic = ev.kind == "resource.changed" and "state" or "operations", event = ev })
    end
  end)
  local unsub_log
  local monitors = {} -- topic -> stop()
  local logs = ws_logs.session(ws, user)
  local ok, err = pcall(function()
    send(ws, { type = "ready", user = user.name, scope = user.scope })
    while true do
      local text, rerr = ws:recv(wait(M.IDLE))
      if not text and not (rerr and rerr.code == "TIMEOUT" and logs:active() > 0) then
        if rerr and rerr.code == "TIMEOUT" then ws:close(1000, "idle") end
        return
      end
      -- no text: idle, but it follows logs (it only listens); logs.*: hypd.api.ws_logs
      local msg = text and json.decode(text) or { type = "logs.idle" }
      if type(msg) ~= "table" or type(msg.type) ~= "string" then
        send(ws, { type = "error", message = "messages are JSON objects with a type" })
      elseif msg.type == "ping" then
        send(ws, { type = "pong" })
      elseif msg.type == "subscribe" or msg.type == "unsubscribe" then
        local on = msg.type == "subscribe"
        for _, topic in ipairs(type(msg.topics) == "table" and msg.topics or {}) do
          topic = tostring(topic)
          if ws_monitor.cluster(topic) then
            if on and not monitors[topic] then
              local stop, why = ws_monitor.follow(topic, { name = user.name, scope = user.scope, front = "ws" },
                function(m) send(ws, m) end)
              if stop then monitors[topic], topics[topic] = stop, true
              else send(ws, { type = "error", message = topic .. ": " .. tostring(why) }) end
            elseif not on and monitors[topic] then
              monitors[topic]()
              monitors[topic], topics[topic] = nil, nil
            end
          elseif not TOPICS[topic] and not topic:match("^operation:op%-%x+$") then
            send(ws, { type = "error", message = "unknown topic " .. topic ..
              " (operations, operation:<id>, state, logs, monitor:<cluster>)" })
          elseif topic == "logs" and on and not auth.allows(user.scope, "operate") then
            send(ws, { type = "error", message = "the logs topic needs a token with scope operate" })
          else
            topics[topic] = on or nil
            if topic == "logs" then
              if on and not unsub_log then
                unsub_log = log.subscribe(function(level, component, message)
                  send(ws, { type = "log", level = level, component = component, message = message })
                end)
              elseif not on and unsub_log then
                unsub_log()
                unsub_log = nil
              end
            end
          end
        end
        local list = {}
        for k in pairs(topics) do list[#list + 1] = k end
        table.sort(list)
        send(ws, { type = "subscribed", topics = list })
      elseif not logs:handle(msg) then
        send(ws, { type = "error", message = "unknown message type " .. msg.type })
      end
    end
  end)
  logs:close()
  for _, stop in pairs(monitors) do stop() end
  unsub_op()
  if unsub_log then unsub_log() end
  if not ok then error(err, 0) end
end

-- handler(req) -> the server's answer for GET /ws
function M.handler(req)
  return { websocket = function(ws)
    local user, err = authenticate(ws, req)
    if not user then
      send(ws, { type = "error", code = err and err.code or "UNAUTHORIZED",
        message = err and err.message or "unauthorized", reason = err and err.reason or nil })
      ws:close(4401, "unauthorized")
      return
    end
    session(ws, user)
  end }
end

return M
