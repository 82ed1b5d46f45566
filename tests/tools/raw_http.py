#!/usr/bin/env python3
"""Raw HTTP/1.1 bytes over one TCP connection, for tests/lua/http_framing_test.lua
(standard library only).

    raw_http.py PORT INFILE OUTFILE [CA_PEM]

INFILE is JSON: {"send": ["bytes", ...], "pause": seconds, "timeout": seconds}.
Each string is sent as Latin-1 bytes (JSON's \\u0000 is a NUL), the parts
`pause` apart (0.2 s), over TLS trusting CA_PEM when it is given. Then it
reads until the server closes or `timeout` (3 s) passes with the connection
still open, and writes what it saw as JSON to OUTFILE, atomically (the test
polls for the file):

    {"responses": [{"status": 400, "headers": {...}, "body": "..."}, ...],
     "closed": true,      # the server ended the connection (EOF or reset)
     "reset": false,      # ... with a reset
     "send_error": null,  # a send failed (the server had closed already)
     "trailing": "",      # bytes after the last whole response
     "seconds": 0.01}     # from the first byte sent to the end of reading

Every response found in the bytes is listed: a second one means the server
answered bytes it should have refused.
"""
import json
import os
import socket
import ssl
import sys
import time


def parse(data):
    """The whole responses in data, and the bytes left over."""
    out = []
    while data.startswith(b"HTTP/"):
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            break
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if 100 <= status < 200 or status in (204, 304):
            body = b""
        elif "content-length" in headers:
            n = int(headers["content-length"])
            if len(rest) < n:
                break
            body, rest = rest[:n], rest[n:]
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = b""
            while True:
                size, sep, rest = rest.partition(b"\r\n")
                if not sep:
                    return out, data
                n = int(size.split(b";")[0], 16)
                body, rest = body + rest[:n], rest[n + 2:]
                if n == 0:
                    break
        else:
            body, rest = rest, b""  # until the connection closed
        out.append({"status": status, "headers": headers, "body": body.decode("latin-1")})
        data = rest
    return out, data


def main():
    port, infile, outfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    ca = sys.argv[4] if len(sys.argv) > 4 else None
    with open(infile, encoding="latin-1") as f:
        spec = json.load(f)
    pause, timeout = spec.get("pause", 0.2), spec.get("timeout", 3)
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    if ca:
        ctx = ssl.create_default_context(cafile=ca)
        sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    start = time.monotonic()
    send_error = None
    for i, part in enumerate(spec["send"]):
        if i:
            time.sleep(pause)
        try:
            sock.sendall(part.encode("latin-1"))
        except OSError as e:
            send_error = str(e)
            break
    data, closed, reset = b"", False, False
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            more = sock.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, ssl.SSLError) as e:
            closed, reset = True, isinstance(e, ConnectionResetError)
            break
        if not more:
            closed = True
            break
        data += more
    seconds = time.monotonic() - start
    sock.close()
    responses, trailing = parse(data)
    result = {"responses": responses, "closed": closed, "reset": reset, "send_error": send_error,
              "trailing": trailing.decode("latin-1"), "seconds": round(seconds, 3)}
    with open(outfile + ".tmp", "w") as f:
        json.dump(result, f)
    os.rename(outfile + ".tmp", outfile)


if __name__ == "__main__":
    main()
