#!/usr/bin/env python3
"""A scripted fake AWS endpoint for hypd's retry and transport tests.

    fake_aws.py [SECONDS]   serves on 127.0.0.1, prints "PORT <n> PID <pid>",
                            exits after SECONDS (default 120)

Control (JSON):
  POST /_script    body: a list of answers, used in order, one per request;
                   each {"status": 200, "headers": {...}, "body": "..."} or
                   {"action": "reset"} (close the connection, answer nothing)
                   or {"action": "delay", "seconds": 2, ...answer}. When the
                   script is used up every request gets the last answer.
  GET /_requests   every request so far: [{method, path, headers, body}]
  POST /_reset     forget requests and script
Python stdlib only.
"""
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
script = []
requests = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, status, body, headers=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _control(self, body):
        global script, requests
        with lock:
            if self.path == "/_script":
                script = json.loads(body)
                return self._send(200, "ok")
            if self.path == "/_requests":
                return self._send(200, json.dumps(requests), {"content-type": "application/json"})
            if self.path == "/_reset":
                script, requests = [], []
                return self._send(200, "ok")
        return self._send(404, "unknown control path")

    def _handle(self):
        body = self._body()
        if self.path.startswith("/_"):
            return self._control(body)
        with lock:
            requests.append({
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            })
            answer = script.pop(0) if len(script) > 1 else (script[0] if script else
                                                            {"status": 200, "body": "{}"})
        if answer.get("action") == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.close_connection = True
            self.connection.close()
            return
        if answer.get("action") == "delay":
            time.sleep(answer.get("seconds", 1))
        headers = {"x-amzn-requestid": "req-%d" % len(requests)}
        headers.update(answer.get("headers", {}))
        self._send(answer.get("status", 200), answer.get("body", ""), headers)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle


def main():
    life = float(sys.argv[1]) if len(sys.argv) > 1 else 120
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT %d PID %d" % (server.server_address[1], os.getpid()), flush=True)
    threading.Timer(life, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
