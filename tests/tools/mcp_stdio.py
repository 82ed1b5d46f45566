#!/usr/bin/env python3
"""Drives `hypd mcp` over stdio for tests/lua/parity_test.lua (standard
library only).

    mcp_stdio.py CALLS_JSON OUT_JSON -- COMMAND [ARGS...]

CALLS_JSON is [[tool, arguments], ...]. Initializes, calls each tool with
tools/call, and writes [{"result": structuredContent} | {"error": {...}} |
{"protocol": {code, message}}, ...] to OUT_JSON."""
import json
import subprocess
import sys


def main():
    calls = json.load(open(sys.argv[1]))
    out_path = sys.argv[2]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    ident = 0

    def request(method, params):
        nonlocal ident
        ident += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}) + "\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("hypd mcp closed its output")
            msg = json.loads(line)
            if msg.get("id") == ident:
                return msg

    request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "parity", "version": "1"}})
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    results = []
    for name, args in calls:
        msg = request("tools/call", {"name": name, "arguments": args})
        if "error" in msg:
            results.append({"protocol": {"code": msg["error"]["code"], "message": msg["error"]["message"]}})
        elif msg["result"].get("isError"):
            results.append({"error": msg["result"]["structuredContent"]["error"]})
        else:
            results.append({"result": msg["result"].get("structuredContent")})
    p.stdin.close()
    p.wait(timeout=20)
    json.dump(results, open(out_path, "w"))


if __name__ == "__main__":
    main()
