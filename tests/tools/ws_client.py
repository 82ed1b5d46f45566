#!/usr/bin/env python3
"""A WebSocket client for tests/lua/websocket_test.lua (standard library only).

    ws_client.py PORT SCENARIO OUTFILE [CA_PEM]

Runs one scenario against ws://127.0.0.1:PORT/ws (wss:// trusting CA_PEM
when it is given) and writes what it saw as
JSON to OUTFILE (atomically: the test polls for the file). Frames it sends
are masked unless the scenario says otherwise.
"""
import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import sys
import threading
import time

RFC_KEY = "dGhlIHNhbXBsZSBub25jZQ=="
CA_PEM = None  # set from the command line: speak TLS
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE, PING, PONG = 1, 2, 8, 9, 10


class Closed(Exception):
    pass


class Conn:
    def __init__(self, port, key=RFC_KEY, path="/ws", extra=""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        if CA_PEM:
            ctx = ssl.create_default_context(cafile=CA_PEM)
            self.sock = ctx.wrap_socket(self.sock, server_hostname="127.0.0.1")
        req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
               "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n%s\r\n") % (path, port, key, extra)
        self.sock.sendall(req.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            more = self.sock.recv(4096)
            if not more:
                raise Closed("EOF during the handshake")
            self.buf += more
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            self.headers[k.strip().lower()] = v.strip()

    def send_frame(self, opcode, payload=b"", fin=True, mask=True):
        if isinstance(payload, str):
            payload = payload.encode()
        b0 = (0x80 if fin else 0) | opcode
        n = len(payload)
        mbit = 0x80 if mask else 0
        if n < 126:
            head = struct.pack("!BB", b0, mbit | n)
        elif n < 65536:
            head = struct.pack("!BBH", b0, mbit | 126, n)
        else:
            head = struct.pack("!BBQ", b0, mbit | 127, n)
        if mask:
            key = os.urandom(4)
            payload = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
            head += key
        self.sock.sendall(head + payload)

    def _need(self, n):
        while len(self.buf) < n:
            more = self.sock.recv(65536)
            if not more:
                raise Closed("EOF")
            self.buf += more
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_frame(self):
        b0, b1 = self._need(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._need(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._need(8))[0]
        if b1 & 0x80:
            raise Closed("the server masked a frame")
        return b0 >> 7, b0 & 0x0F, self._need(n)

    def recv_close(self):
        """Reads frames until a close; returns (code, reason)."""
        while True:
            _, op, data = self.recv_frame()
            if op == CLOSE:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
                return code, data[2:].decode()

    def close(self, code=1000, reason=""):
        self.send_frame(CLOSE, struct.pack("!H", code) + reason.encode())
        try:
            return self.recv_close()
        except (Closed, OSError):
            return None, None

    def eof(self):
        """True when the server closed the TCP connection."""
        try:
            return self.sock.recv(1) == b""
        except OSError:
            return True


def handshake(port):
    c = Conn(port, extra="Sec-WebSocket-Protocol: superchat, chat\r\n")
    r = {"status": c.status, "accept": c.headers.get("sec-websocket-accept"),
         "protocol": c.headers.get("sec-websocket-protocol"),
         "upgrade": c.headers.get("upgrade"), "expected": base64.b64encode(
             hashlib.sha1((RFC_KEY + GUID).encode()).digest()).decode()}
    r["close"] = list(c.close(1000, "bye"))
    r["eof"] = c.eof()
    return r


def echo(port):
    c = Conn(port, key=base64.b64encode(os.urandom(16)).decode())
    out = {}
    c.send_frame(TEXT, "hello \u2603")
    _, op, data = c.recv_frame()
    out["text"] = [op, data.decode()]
    c.send_frame(BINARY, bytes(range(256)))
    _, op, data = c.recv_frame()
    out["binary"] = [op, data == bytes(range(256)), len(data)]
    big = "x" * 70000  # a 64-bit length
    c.send_frame(TEXT, big)
    _, op, data = c.recv_frame()
    out["big"] = [op, len(data), data.decode() == big]
    c.send_frame(TEXT, "")
    _, op, data = c.recv_frame()
    out["empty"] = [op, data.decode()]
    out["close"] = list(c.close(1000))
    return out


def fragment(port):
    c = Conn(port)
    c.send_frame(TEXT, "frag", fin=False)
    c.send_frame(0, "men", fin=False)
    c.send_frame(PING, "mid")  # control frames may come between fragments
    c.send_frame(0, "ted \u00e9", fin=True)
    frames = [c.recv_frame()[1:], c.recv_frame()[1:]]
    out = {"frames": [[op, data.decode()] for op, data in frames]}
    # a UTF-8 character split across two fragments
    snow = "\u2603".encode()
    c.send_frame(TEXT, b"a" + snow[:1], fin=False)
    c.send_frame(0, snow[1:], fin=True)
    _, op, data = c.recv_frame()
    out["split"] = [op, data.decode()]
    out["close"] = list(c.close(1000))
    return out


def ping(port):
    c = Conn(port)
    c.send_frame(PING, "abc")
    _, op, data = c.recv_frame()
    out = {"pong": [op, data.decode()]}
    c.send_frame(TEXT, "ping me")  # the handler calls ws:ping("srv")
    _, op, data = c.recv_frame()
    out["server_ping"] = [op, data.decode()]
    c.send_frame(PONG, data)
    c.send_frame(PONG, "unsolicited")  # ignored
    c.send_frame(TEXT, "after")
    _, op, data = c.recv_frame()
    out["after"] = [op, data.decode()]
    out["close"] = list(c.close(1000))
    return out


def client_close(port):
    c = Conn(port)
    c.send_frame(TEXT, "one")
    c.recv_frame()
    return {"close": list(c.close(4001, "bye now")), "eof": c.eof()}


def server_close(port):
    c = Conn(port)
    c.send_frame(TEXT, "close me")  # the handler calls ws:close(4002, "go away")
    code, reason = c.recv_close()
    c.send_frame(CLOSE, struct.pack("!H", code))
    return {"close": [code, reason], "eof": c.eof()}


def expect_close(port, send):
    c = Conn(port)
    send(c)
    try:
        code, reason = c.recv_close()
    except (Closed, OSError) as e:
        return {"error": str(e)}
    return {"close": [code, reason], "eof": c.eof()}


def unmasked(port):
    return expect_close(port, lambda c: c.send_frame(TEXT, "plain", mask=False))


def oversized(port):
    def send(c):
        # announces 1 MiB + 1 bytes: refused from the header alone
        c.sock.sendall(struct.pack("!BBQ", 0x81, 0xFF, (1 << 20) + 1) + os.urandom(4) + b"abc")
    out = expect_close(port, send)

    def fragments(c):
        # fragments that add up past the limit
        c.send_frame(BINARY, b"y" * 600000, fin=False)
        c.send_frame(0, b"y" * 600000, fin=True)
    out["fragments"] = expect_close(port, fragments)
    return out


UTF8 = [  # (hex, valid)
    ("48656c6c6f", True), ("c3a9", True), ("e282ac", True), ("f09f9880", True),
    ("f48fbfbf", True), ("ed9fbf", True), ("efbbbf", True),
    ("ff", False), ("c0af", False), ("c1bf", False), ("e080af", False),
    ("eda080", False), ("edbfbf", False), ("f4908080", False), ("f8888080af", False),
    ("80", False), ("c3", False), ("e282", False), ("f09f98", False), ("c328", False),
]


def utf8(port):
    out = {}
    for hexed, _ in UTF8:
        c = Conn(port)
        c.send_frame(TEXT, bytes.fromhex(hexed))
        _, op, data = c.recv_frame()
        if op == CLOSE:
            out[hexed] = struct.unpack("!H", data[:2])[0]
        else:
            out[hexed] = "echo" if data == bytes.fromhex(hexed) else "wrong"
            c.close(1000)
    c = Conn(port)
    c.send_frame(CLOSE, struct.pack("!H", 1000) + b"\xff")
    out["close_reason"] = c.recv_close()[0]
    c = Conn(port)
    c.send_frame(CLOSE, struct.pack("!H", 1005))
    out["close_1005"] = c.recv_close()[0]
    c = Conn(port)
    c.send_frame(0, "no start")
    out["orphan_continuation"] = c.recv_close()[0]
    c = Conn(port)
    c.send_frame(PING, "x" * 126)
    out["long_ping"] = c.recv_close()[0]
    return out


def hold(port):
    """Says hello, then waits for the server to close (hserver_stop)."""
    c = Conn(port)
    c.send_frame(TEXT, "hold")
    frames = []
    while True:
        try:
            _, op, data = c.recv_frame()
        except (Closed, OSError) as e:
            return {"frames": frames, "error": str(e)}
        if op == CLOSE:
            code = struct.unpack("!H", data[:2])[0]
            c.send_frame(CLOSE, data[:2])
            return {"frames": frames, "close": [code, data[2:].decode()], "eof": c.eof()}
        frames.append([op, data.decode(errors="replace")])


def silent(port):
    """Reads and never answers: the server pings, then drops it."""
    c = Conn(port)
    pings, t0 = 0, time.time()
    while True:
        try:
            _, op, _ = c.recv_frame()
        except (Closed, OSError):
            break
        if op == PING:
            pings += 1
    return {"pings": pings, "seconds": round(time.time() - t0, 2)}


def many(port, clients=50, messages=20):
    results = [None] * clients

    def one(i):
        try:
            c = Conn(port, key=base64.b64encode(os.urandom(16)).decode())
            good = 0
            for m in range(messages):
                text = "client %d message %d" % (i, m)
                c.send_frame(TEXT, text)
                _, op, data = c.recv_frame()
                good += op == TEXT and data.decode() == text
            code, _ = c.close(1000)
            results[i] = good if code == 1000 else -1
        except Exception as e:  # noqa: BLE001 (reported to the test)
            results[i] = str(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"results": results}


def hypd_events(port):
    """hypd's /ws: authenticate with the first message ($WS_TOKEN), subscribe
    to operations, collect messages until an operation finishes or fails."""
    c = Conn(port, key=base64.b64encode(os.urandom(16)).decode())
    msgs = []
    c.send_frame(TEXT, json.dumps({"type": "auth", "token": os.environ.get("WS_TOKEN", "")}))
    _, op, data = c.recv_frame()
    msgs.append(json.loads(data))
    if msgs[-1].get("type") != "ready":
        msgs.append({"close": list(c.recv_close())})
        return {"status": c.status, "messages": msgs}
    c.send_frame(TEXT, json.dumps({"type": "subscribe", "topics": ["operations", "nonsense"]}))
    c.send_frame(TEXT, json.dumps({"type": "ping"}))
    with open(os.environ["WS_READY"], "w") as f:
        f.write("ready")
    deadline = time.time() + 20
    while time.time() < deadline:
        _, op, data = c.recv_frame()
        m = json.loads(data)
        msgs.append(m)
        ev = m.get("event") or {}
        if ev.get("kind") in ("operation.finished", "operation.failed"):
            break
    c.close(1000)
    return {"status": c.status, "messages": msgs}


def hypd_monitor(port):
    """hypd's /ws topic $WS_TOPIC (monitor:<cluster>): authenticate, subscribe,
    write $WS_READY at the first snapshot, collect messages until $WS_SNAPSHOTS
    snapshots (default 2) or an error came, or 60 s passed."""
    c = Conn(port, key=base64.b64encode(os.urandom(16)).decode())
    msgs = []
    c.send_frame(TEXT, json.dumps({"type": "auth", "token": os.environ.get("WS_TOKEN", "")}))
    _, op, data = c.recv_frame()
    msgs.append(json.loads(data))
    c.send_frame(TEXT, json.dumps({"type": "subscribe", "topics": [os.environ["WS_TOPIC"]]}))
    want, got = int(os.environ.get("WS_SNAPSHOTS", "2")), 0
    deadline = time.time() + 60
    while time.time() < deadline and got < want:
        _, op, data = c.recv_frame()
        m = json.loads(data)
        m["at"] = time.time()
        msgs.append(m)
        if m.get("type") == "error":
            break
        if (m.get("event") or {}).get("kind") == "monitor.snapshot":
            got += 1
            if got == 1:
                with open(os.environ["WS_READY"], "w") as f:
                    f.write("ready")
    c.close(1000)
    return {"status": c.status, "messages": msgs}


SCENARIOS = {
    "hypd_events": hypd_events, "hypd_monitor": hypd_monitor,
    "handshake": handshake, "echo": echo, "fragment": fragment, "ping": ping,
    "client_close": client_close, "server_close": server_close, "unmasked": unmasked,
    "oversized": oversized, "utf8": utf8, "hold": hold, "silent": silent, "many": many,
}


def main():
    global CA_PEM
    port, scenario, outfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    CA_PEM = sys.argv[4] if len(sys.argv) > 4 else None
    try:
        result = SCENARIOS[scenario](port)
    except Exception as e:  # noqa: BLE001 (reported to the test)
        result = {"error": "%s: %s" % (type(e).__name__, e)}
    tmp = outfile + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.rename(tmp, outfile)


if __name__ == "__main__":
    main()
