#!/usr/bin/env python3
"""Slowloris client for tests/lua/slowloris_test.lua (standard library only,
loopback only).

    slowloris.py PORT SOURCE COUNT SECONDS READYFILE OUTFILE

Opens COUNT connections to 127.0.0.1:PORT from the address SOURCE (any
127.0.0.0/8 address on Linux, so the test's valid client, on 127.0.0.1, is
another client to the server), and sends each one the headers of a GET a
byte at a time, one byte every 0.5 s, never finishing them. When all are
open it writes READYFILE. For SECONDS it watches them and writes, as JSON to
OUTFILE (atomically: the test polls for the file):

    {"opened": 1000,        # connects that succeeded
     "closed": [0.01, 4.1, ...], # for each one the server closed: seconds
                            # from its connect to the close
     "open": 0,             # still open at the end
     "bytes_max": 12}       # the most header bytes any one connection sent
"""
import json
import os
import select
import socket
import sys
import time

HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000


def main():
    port, source, count, seconds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    ready, out = sys.argv[5], sys.argv[6]
    conns = []  # [socket, connected_at, bytes sent]
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.bind((source, 0))
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        conns.append([s, time.monotonic(), 0])
    opened = len(conns)
    with open(ready + ".tmp", "w") as f:
        f.write(str(opened))
    os.rename(ready + ".tmp", ready)
    closed, bytes_max = [], 0
    end = time.monotonic() + seconds
    next_byte = time.monotonic()
    while conns and time.monotonic() < end:
        now = time.monotonic()
        if now >= next_byte:
            next_byte = now + 0.5
            for c in conns:
                try:
                    if c[2] < len(HEAD):
                        c[0].send(HEAD[c[2]:c[2] + 1])
                        c[2] += 1
                        bytes_max = max(bytes_max, c[2])
                except OSError:
                    pass  # closed: the read below sees it
        readable, _, _ = select.select([c[0] for c in conns], [], [], 0.1)
        gone = []
        for s in readable:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                gone.append(s)
        for c in [c for c in conns if c[0] in gone]:
            closed.append(round(time.monotonic() - c[1], 2))
            c[0].close()
            conns.remove(c)
    for c in conns:
        c[0].close()
    with open(out + ".tmp", "w") as f:
        json.dump({"opened": opened, "closed": closed, "open": len(conns),
                   "bytes_max": bytes_max}, f)
    os.rename(out + ".tmp", out)


main()
