-- sandbox.k8s.portforward: pods/portforward as kubectl 1.31 and later
-- speak it: a WebSocket whose subprotocol is SPDY/3.1+portforward.k8s.io
-- carries a SPDY/3.1 session (sandbox.k8s.spdy) in binary messages, and
-- the kubelet's port-forward protocol runs in that session
-- (k8s.io/kubelet/pkg/cri/streaming/portforward/httpstream.go):
--
--   * every forwarded connection is a pair of streams the client opens,
--     first streamType "error" then "data", with the same requestID and
--     port headers; each SYN_STREAM is answered with a SYN_REPLY;
--   * the data stream carries the connection's bytes both ways; the
--     client's FIN is its end of the connection, answered with a FIN on
--     the data stream and on the error stream;
--   * a port nothing listens on gets the kubelet's message on the error
--     stream, then both streams end.
--
-- The simulated containers are programs (sandbox.k8s.programs) answering
-- HTTP requests, so the bytes of a data stream are read as HTTP/1.1
-- requests, each answered by the program listening on that port (what the
-- service proxy reaches: sandbox.k8s.proxy.listener), from 127.0.0.1 as a
-- connection from inside the pod's network namespace is.
--
-- A WebSocket offering only the older channel protocols, and a SPDY/3.1
-- upgrade, get 400 (kubectl falls back to SPDY only when the WebSocket
-- upgrade itself fails, which it does not here).
local http_text = require "sandbox.k8s.http_text"
local json = require "hypd.json"
local log = require "hypd.log"
local objects = require "sandbox.k8s.objects"
local proxy = require "sandbox.k8s.proxy"
local spdy = require "sandbox.k8s.spdy"
local sys = require "hypd.sys"

local M = {}

M.PROTOCOL = "SPDY/3.1+portforward.k8s.io"
local LOOPBACK = "127.0.0.1"

local function fail(code, reason, message)
  return { status = code, headers = { ["content-type"] = "application/json" },
    body = json.encode(objects.status(code, reason, message)) }
end

local function offered(req)
  for p in ((req.headers or {})["sec-websocket-protocol"] or ""):gmatch("[^,%s]+") do
    if p == M.PROTOCOL then return true end
  end
  return false
end

-- the kubelet's (containerd's) words for a port nothing listens on
local function refused(pod, port)
  local sandbox_id = sys.digest("sha256", pod.metadata.uid or pod.metadata.name, "hex")
  return string.format('error forwarding port %d to pod %s, uid : failed to execute portforward in network ' ..
    'namespace "/var/run/netns/cni-%s": failed to connect to localhost:%d inside namespace "%s", IPv4: dial ' ..
    'tcp4 127.0.0.1:%d: connect: connection refused IPv6 dial tcp6 [::1]:%d: connect: connection refused ',
    port, sandbox_id, pod.metadata.uid or "", port, sandbox_id, port, port)
end

-- one forwarded connection: its two streams, the port, the bytes not yet
-- read as a request
local function connection(s, send, pod, cl, pair)
  local c = { data = pair.data, err = pair.error, port = pair.port, pending = "", done = false }
  local answer = proxy.listener(cl, pod, c.port)
  local function finish(message)
    if c.done then return end
    c.done = true
    if message then send(s:data(c.err, message)) end
    send(s:data(c.data, "", true) .. s:data(c.err, "", true))
  end
  if not answer then finish(refused(pod, c.port)) end
  function c.receive(bytes, fin)
    if c.done then return end
    c.pending = c.pending .. bytes
    while true do
      local req, rest, why = http_text.request(c.pending)
      if why then
        send(s:data(c.data, http_text.response({ status = 400, headers = { ["content-type"] = "text/plain" },
          body = "400 Bad Request" }, true)))
        return finish()
      end
      if not req then break end
      c.pending = rest
      req.port, req.peer = c.port, LOOPBACK
      local out = answer(req)
      if not out then return finish(refused(pod, c.port)) end -- started, not yet listening
      send(s:data(c.data, http_text.response(out, req.close)))
      if req.close then return finish() end
    end
    if fin then finish() end
  end
  return c
end

-- serve(cl, pod, req) -> the response: the WebSocket session, or 400
function M.serve(cl, pod, req)
  local upgrade = ((req.headers or {}).upgrade or ""):lower()
  if upgrade ~= "websocket" or not offered(req) then
    return fail(400, "BadRequest", "Upgrade request required")
  end
  if (pod.status or {}).phase ~= "Running" then
    return fail(400, "BadRequest", string.format("pod %s is not running (phase %s)", pod.metadata.name,
      tostring((pod.status or {}).phase)))
  end
  return { status = 101, headers = { ["sec-websocket-protocol"] = M.PROTOCOL }, websocket = function(ws)
    local s = spdy.session()
    local function send(bytes) return ws:send_binary(bytes) end
    local pairs_by_id, conns = {}, {}
    while true do
      local msg = ws:recv()
      if not msg then return end
      s:push(msg)
      while true do
        local f, why = s:next()
        if f == nil then break end
        if f == false then
          log.debug("sandbox", "port-forward %s: %s", pod.metadata.name, why)
          send(s:goaway(0))
          return ws:close(1002, "malformed SPDY frame")
        end
        if f.control and f.type == "SYN_STREAM" then
          send(s:syn_reply(f.stream))
          local h = f.headers
          local id, kind, port = h.requestid or "", h.streamtype, tonumber(h.port)
          local p = pairs_by_id[id] or {}
          pairs_by_id[id] = p
          p[kind or "?"], p.port = f.stream, port or p.port
          if p.error and p.data and not p.open then
            p.open = true
            local c = connection(s, send, pod, cl, p)
            conns[p.data], conns[p.error] = c, c
          end
        elseif f.control and f.type == "PING" then
          send(s:ping(f.id))
        elseif f.control and f.type == "GOAWAY" then
          return
        elseif f.control and f.type == "RST_STREAM" then
          local c = conns[f.stream]
          if c then c.done = true end
        elseif not f.control then
          local c = conns[f.stream]
          if c and f.stream == c.data then c.receive(f.data, f.flags & spdy.FIN ~= 0) end
        end
      end
    end
  end }
end

return M
