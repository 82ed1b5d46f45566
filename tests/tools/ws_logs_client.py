#!/usr/bin/env python3
"""Live log followers on hypd's /ws for tests/lua/ws_logs_test.lua
(standard library only; the frames are ws_client.py's).

    ws_logs_client.py PORT OUTFILE READYFILE SPEC

SPEC (JSON): {"token": "hypd_...", "connections": [{"follows": [<logs.follow message>, ...],
              "stop": {"<id>": <after this many lines>}, "close_after": <lines>}, ...], "seconds": 60}

Every connection authenticates with its first message, sends its
logs.follow messages and a ping; once every connection has its pong,
READYFILE is written. Each then collects messages until every follow it
opened got logs.end (or an error), sending logs.stop for an id in "stop"
after that many of its lines (or closing the connection after close_after
lines in all, without logs.stop); OUTFILE gets {"connections": [{"messages":
[...]}]} (atomically).
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ws_client  # noqa: E402
from ws_client import CLOSE, PING, PONG, TEXT, Conn  # noqa: E402


def run(port, spec, conn_spec, out, barrier):
    msgs = out["messages"]
    try:
        c = Conn(port)
        c.sock.settimeout(spec.get("seconds", 60))
        c.send_frame(TEXT, json.dumps({"type": "auth", "token": spec["token"]}))
        open_ids = set()
        for f in conn_spec.get("follows", []):
            c.send_frame(TEXT, json.dumps(f))
            open_ids.add(f.get("id"))
        c.send_frame(TEXT, json.dumps({"type": "ping"}))
        stop = dict(conn_spec.get("stop", {}))
        counts = {}
        ready = False
        deadline = time.time() + spec.get("seconds", 60)
        while time.time() < deadline and (open_ids or not ready):
            _, op, data = c.recv_frame()
            if op == PING:
                c.send_frame(PONG, data)
                continue
            if op == CLOSE:
                msgs.append({"close": True})
                break
            m = json.loads(data)
            m["_at"] = time.time()  # when it arrived (for latency measurements)
            msgs.append(m)
            t = m.get("type")
            if t == "pong" and not ready:
                ready = True
                barrier.wait(30)
            elif t == "logs.line":
                i = m.get("id")
                counts[i] = counts.get(i, 0) + 1
                if conn_spec.get("close_after") and sum(counts.values()) >= conn_spec["close_after"]:
                    break
                if i in stop and counts[i] >= stop[i]:
                    del stop[i]
                    c.send_frame(TEXT, json.dumps({"type": "logs.stop", "id": i}))
            elif t == "logs.end" or (t == "error" and m.get("id") in open_ids):
                open_ids.discard(m.get("id"))
        c.close(1000)
    except Exception as e:  # noqa: BLE001 (reported to the test)
        out["error"] = "%s: %s" % (type(e).__name__, e)
        try:
            barrier.abort()
        except threading.BrokenBarrierError:
            pass


def main():
    port, outfile, readyfile, spec = int(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    conns = spec["connections"]
    barrier = threading.Barrier(len(conns) + 1)
    outs = [{"messages": []} for _ in conns]
    threads = [threading.Thread(target=run, args=(port, spec, cs, outs[i], barrier), daemon=True)
               for i, cs in enumerate(conns)]
    for th in threads:
        th.start()
    try:
        barrier.wait(30)
        with open(readyfile, "w") as f:
            f.write("ready")
    except threading.BrokenBarrierError:
        pass
    for th in threads:
        th.join(spec.get("seconds", 60) + 5)
    tmp = outfile + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"connections": outs}, f)
    os.rename(tmp, outfile)


if __name__ == "__main__":
    ws_client.CA_PEM = None
    main()
