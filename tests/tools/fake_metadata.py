#!/usr/bin/env python3
"""fake_metadata: one loopback HTTP server that plays EC2 instance metadata
(IMDSv2), container credentials (ECS / EKS Pod Identity) and STS, for the
credential chain tests. Python 3 standard library only.

    python3 tests/tools/fake_metadata.py [LIFETIME_SECONDS]

prints "PORT <n>" on stdout once it listens on 127.0.0.1:<n>, and exits
after LIFETIME_SECONDS (default 300).

Routes:
  PUT  /latest/api/token                              imds_token
  GET  /latest/meta-data/iam/security-credentials/    imds_role
  GET  /latest/meta-data/iam/security-credentials/R   imds_creds
  GET  /latest/meta-data/placement/region             imds_region
  GET  /v1/..., /v2/... or /container/...             container
  POST / (form body with Action=...)                  sts_assume_role,
                                                      sts_web_identity
  GET  /_stats    {"counts": {kind: n}, "calls": [...]}
  POST /_config   JSON merged into the configuration below; {"reset": true}
                  also clears counts and calls

Configuration (all optional):
  expires_in          seconds from now to the Expiration handed out (3600)
  fail                {kind: n}: the next n calls of kind fail (metadata and
                      container: HTTP 500; STS: 403 AccessDenied)
  delay               {kind: seconds}: sleep before answering
  imds_v1             true: the token PUT answers 404 and GETs need no token
  role                the instance's role name ("hypd-test-role")
  region              the instance's region ("eu-west-3")
  container_token     the Authorization value container credentials require
  web_identity_token  the WebIdentityToken AssumeRoleWithWebIdentity requires
  sts_expect          {role_arn: access_key_id}: AssumeRole of that role must
                      be signed with that key (else 403 AccessDenied)
  secrets             {access_key_id: secret}: lets the server verify SigV4
                      signatures made with keys it did not issue itself
  sts_error_echo      true: STS error messages repeat the request headers and
                      body (a careless server), to prove the client redacts

Every set of credentials handed out is unique: AccessKeyId ASIAFAKE<12
digits>, SecretAccessKey "secret-<kind>-<n>-...", Token "token-<kind>-<n>-...".
AssumeRole requests always need a SigV4 Authorization header whose
signature verifies; AssumeRoleWithWebIdentity must come unsigned.
"""
import hashlib
import hmac
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
DEFAULTS = {
    "expires_in": 3600, "fail": {}, "delay": {}, "imds_v1": False,
    "role": "hypd-test-role", "region": "eu-west-3", "container_token": None,
    "web_identity_token": None, "sts_expect": {}, "secrets": {},
    "sts_error_echo": False,
}
CONFIG = json.loads(json.dumps(DEFAULTS))
COUNTS = {}
CALLS = []
ISSUED = {}        # access key id -> secret, for SigV4 checks
IMDS_TOKENS = set()
SERIAL = [0]


def issue(kind):
    with LOCK:
        SERIAL[0] += 1
        n = SERIAL[0]
        expires = time.time() + float(CONFIG["expires_in"])
    ak = "ASIAFAKE%012d" % n
    secret = "secret-%s-%d-wJalrXUtnFEMI" % (kind, n)
    token = "token-%s-%d-FwoGZXIvYXdzEJr" % (kind, n)
    with LOCK:
        ISSUED[ak] = secret
    return {"AccessKeyId": ak, "SecretAccessKey": secret, "Token": token,
            "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))}


def take_failure(kind):
    with LOCK:
        left = CONFIG["fail"].get(kind, 0)
        if left > 0:
            CONFIG["fail"][kind] = left - 1
            return True
    return False


def sigv4_check(method, path, headers, body, auth):
    """Returns None when the signature verifies, else the reason."""
    try:
        algo, rest = auth.split(" ", 1)
        parts = dict(p.strip().split("=", 1) for p in rest.split(","))
        cred = parts["Credential"].split("/")
        key_id, date, region, service = cred[0], cred[1], cred[2], cred[3]
        signed = parts["SignedHeaders"].split(";")
        sig = parts["Signature"]
    except (ValueError, KeyError, IndexError):
        return "malformed Authorization"
    if algo != "AWS4-HMAC-SHA256":
        return "unknown algorithm"
    with LOCK:
        secret = ISSUED.get(key_id) or CONFIG["secrets"].get(key_id)
    if secret is None:
        return "unknown access key " + key_id
    canon_headers = "".join(
        "%s:%s\n" % (h, " ".join((headers.get(h) or "").split())) for h in signed)
    creq = "\n".join([method, path or "/", "", canon_headers, ";".join(signed),
                      hashlib.sha256(body).hexdigest()])
    amz_date = headers.get("x-amz-date") or ""
    scope = "/".join(cred[1:])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(want, sig) else "signature mismatch"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def count(self, kind, **extra):
        with LOCK:
            COUNTS[kind] = COUNTS.get(kind, 0) + 1
            CALLS.append(dict(kind=kind, path=self.path, **extra))
            delay = CONFIG["delay"].get(kind, 0)
        if delay:
            time.sleep(delay)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def imds_ok(self):
        if CONFIG["imds_v1"]:
            return True
        with LOCK:
            return self.headers.get("X-aws-ec2-metadata-token") in IMDS_TOKENS

    def do_PUT(self):
        self.body()
        if self.path != "/latest/api/token":
            return self.send(404, "{}")
        self.count("imds_token", ttl=self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"))
        if CONFIG["imds_v1"]:
            return self.send(404, "not found", "text/plain")
        if take_failure("imds_token"):
            return self.send(500, "injected failure", "text/plain")
        if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self.send(400, "missing ttl", "text/plain")
        with LOCK:
            token = "imds-session-%d-AQAEAHRoaXMgaXM" % (len(IMDS_TOKENS) + 1)
            IMDS_TOKENS.add(token)
        self.send(200, token, "text/plain")

    def do_GET(self):
        p = self.path
        if p == "/_stats":
            with LOCK:
                return self.send(200, json.dumps({"counts": COUNTS, "calls": CALLS}))
        prefix = "/latest/meta-data/iam/security-credentials/"
        if p == "/latest/meta-data/placement/region":
            self.count("imds_region", token=bool(self.headers.get("X-aws-ec2-metadata-token")))
            if not self.imds_ok():
                return self.send(401, "", "text/plain")
            return self.send(200, CONFIG["region"], "text/plain")
        if p.startswith(prefix):
            role = p[len(prefix):]
            kind = "imds_creds" if role else "imds_role"
            self.count(kind, token=bool(self.headers.get("X-aws-ec2-metadata-token")))
            if not self.imds_ok():
                return self.send(401, "", "text/plain")
            if take_failure(kind):
                return self.send(500, "injected failure", "text/plain")
            if not role:
                return self.send(200, CONFIG["role"] + "\n", "text/plain")
            if role != CONFIG["role"]:
                return self.send(404, "", "text/plain")
            creds = issue("imds")
            creds.update(Code="Success", Type="AWS-HMAC",
                         LastUpdated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            return self.send(200, json.dumps(creds))
        if p.startswith("/v1/") or p.startswith("/v2/") or p.startswith("/container"):
            auth = self.headers.get("Authorization")
            self.count("container", authorization=auth)
            if take_failure("container"):
                return self.send(500, json.dumps({"code": "InternalError", "message": "injected failure"}))
            want = CONFIG["container_token"]
            if want is not None and auth != want:
                return self.send(401, json.dumps({"code": "AccessDenied",
                                                  "message": "the authorization token is not valid"}))
            creds = issue("container")
            creds["AccountId"] = "123456789012"
            return self.send(200, json.dumps(creds))
        self.send(404, "{}")

    def do_POST(self):
        body = self.body()
        if self.path == "/_config":
            cfg = json.loads(body or b"{}")
            with LOCK:
                if cfg.pop("reset", False):
                    COUNTS.clear()
                    del CALLS[:]
                    CONFIG.clear()
                    CONFIG.update(json.loads(json.dumps(DEFAULTS)))
                CONFIG.update(cfg)
            return self.send(200, json.dumps(CONFIG))
        form = dict(urllib.parse.parse_qsl(body.decode()))
        action = form.get("Action")
        auth = self.headers.get("Authorization")
        if action == "AssumeRole":
            key = region = None
            if auth and "Credential=" in auth:
                scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")
                key, region = scope[0], scope[2] if len(scope) > 2 else None
            self.count("sts_assume_role", role_arn=form.get("RoleArn"), key=key, region=region,
                       session_name=form.get("RoleSessionName"), external_id=form.get("ExternalId"),
                       duration=form.get("DurationSeconds"),
                       security_token=bool(self.headers.get("X-Amz-Security-Token")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            why = "request is not signed" if not auth else \
                sigv4_check("POST", urllib.parse.urlsplit(self.path).path, headers, body, auth)
            expect = CONFIG["sts_expect"].get(form.get("RoleArn"))
            if why is None and expect and key != expect:
                why = "signed with %s, expected %s" % (key, expect)
            if why is None and take_failure("sts_assume_role"):
                why = "injected failure"
            if why:
                return self.sts_error(403, "AccessDenied", why, headers, body)
            return self.sts_ok("AssumeRole", issue("sts"))
        if action == "AssumeRoleWithWebIdentity":
            self.count("sts_web_identity", role_arn=form.get("RoleArn"),
                       session_name=form.get("RoleSessionName"),
                       token_ok=form.get("WebIdentityToken") == CONFIG["web_identity_token"],
                       signed=bool(auth))
            headers = {k.lower(): v for k, v in self.headers.items()}
            if auth:
                return self.sts_error(400, "InvalidParameterValue", "the call must be unsigned", headers, body)
            want = CONFIG["web_identity_token"]
            if not form.get("WebIdentityToken") or (want and form["WebIdentityToken"] != want):
                return self.sts_error(400, "InvalidIdentityToken", "the web identity token is not valid",
                                      headers, body)
            if take_failure("sts_web_identity"):
                return self.sts_error(403, "AccessDenied", "injected failure", headers, body)
            return self.sts_ok("AssumeRoleWithWebIdentity", issue("web"))
        self.send(400, "unknown action", "text/plain")

    def sts_ok(self, action, c):
        xml = ("<{a}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><{a}Result>"
               "<Credentials><AccessKeyId>{AccessKeyId}</AccessKeyId>"
               "<SecretAccessKey>{SecretAccessKey}</SecretAccessKey>"
               "<SessionToken>{Token}</SessionToken><Expiration>{Expiration}</Expiration>"
               "</Credentials><AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/r/s</Arn>"
               "</AssumedRoleUser></{a}Result><ResponseMetadata><RequestId>req-1</RequestId>"
               "</ResponseMetadata></{a}Response>").format(a=action, **c)
        self.send(200, xml, "text/xml")

    def sts_error(self, status, code, message, headers, body):
        if CONFIG["sts_error_echo"]:
            message += " | token: %s | body: %s | headers: %s" % (
                headers.get("x-amz-security-token"), body.decode(), json.dumps(headers))
        message = message.replace("&", "&amp;").replace("<", "&lt;")
        xml = ("<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>"
               "<Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error>"
               "<RequestId>req-err-1</RequestId></ErrorResponse>") % (code, message)
        self.send(status, xml, "text/xml")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that time out on purpose close early


def main():
    lifetime = float(sys.argv[1]) if len(sys.argv) > 1 else 300
    server = Server(("127.0.0.1", 0), Handler)
    print("PORT %d" % server.server_address[1], flush=True)
    threading.Timer(lifetime, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
