-- A TLS handshake that breaks (the server takes the connection and closes
-- it before the handshake ends) sent no byte of the request: the client
-- answers CONNECT, as for a connection never made, so callers send it
-- again as safely (hypd.k8s writes, the AWS retry's "unsent"); a
-- certificate the client refuses stays TLS. The closing server is a few
-- lines of python3 in the background.
local t = require "hypd.tap"
local http = require "hypd.http"
local retry = require "hypd.aws.retry"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local port_file = dir .. "/port"
local pid = io.popen(string.format([[python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept(); c.recv(1); c.close()
' %s >/dev/null 2>&1 & echo $!]], H.quote(port_file))):read("l")
t.cleanup(function()
  os.execute("kill " .. pid .. " 2>/dev/null")
  os.execute("rm -rf " .. H.quote(dir))
end)
local port
for _ = 1, 500 do
  port = tonumber(H.read(port_file) or "")
  if port then break end
  task.sleep(0.01)
end
assert(port, "the closing server started")

t.test("a handshake the server breaks is CONNECT (nothing sent), and the AWS retry calls it unsent", function()
  local resp, err = http.request { method = "POST", url = "https://127.0.0.1:" .. port .. "/x", body = "{}" }
  t.eq(resp, nil)
  t.eq(err and err.code, "CONNECT")
  t.like(err and err.message or "", "^TLS handshake: ")
  t.eq(retry.classify(err), "unsent")
  t.ok(retry.safe_to_retry(retry.classify(err), false), "safe to send again even for a call that is not idempotent")
end)

t.test("a certificate the client refuses stays TLS, never retried as unsent", function()
  local cert, key = H.self_signed(dir)
  local url, stop = H.echo_server(cert, key)
  local resp, err = http.request { url = url .. "/echo/x", ca_file = "/etc/ssl/certs/ca-certificates.crt" }
  stop()
  t.eq(resp, nil)
  t.eq(err and err.code, "TLS")
  t.eq(retry.classify(err), nil)
end)
