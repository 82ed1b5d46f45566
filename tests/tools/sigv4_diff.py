#!/usr/bin/env python3
"""Random requests signed by botocore, one JSON line each, for sigv4_diff.c.

    python3 tests/tools/sigv4_diff.py [--seed N] [--count N] [--out FILE]

Seeded and reproducible. Each line holds the request as hypd's signer takes
it (method, path as sent, raw query, headers, body as hex, flags) and what
botocore computed (canonical request, string to sign, signature).

How botocore's classes map to hypd's flags:
  SigV4Auth          sigv4_sign, normalize 1 (sign_body: an X-Amz-Content-SHA256
                     header, whose value botocore signs and uses as the hash)
  S3SigV4Auth        sigv4_sign, normalize 0, sign_body 1 (hash of the body,
                     or UNSIGNED-PAYLOAD with payload signing turned off)
  SigV4QueryAuth     sigv4_presign, normalize 1
  S3SigV4QueryAuth   sigv4_presign, normalize 0, payload hash UNSIGNED-PAYLOAD
  omit_session_token botocore has no such option: it signs without a token,
                     hypd signs with the token and omit_session_token = 1.

Query strings: hypd takes the raw string and decodes then re-encodes it;
botocore is given the decoded (key, value) pairs as request.params, which it
encodes itself. The raw string is written with random but equivalent
encodings (literal or %XX, upper- or lower-case hex, raw UTF-8, stray '%').

Classes left out, and why (botocore's handling differs from the SigV4
specification, or is undefined there):
- paths containing '?', '#', or ASCII control characters, and URLs whose
  path urlsplit() changes: botocore takes the path from urlsplit(url).
- S3 paths that are not already encoded: botocore uses the S3 path verbatim
  (a space stays a space), hypd escapes such bytes as the official suite's
  get-space-unnormalized case requires.
- header values with non-ASCII bytes or line breaks: Python's str.split()
  also splits on Unicode spaces, and email.message refuses line breaks.
- header names Date (botocore then signs Date instead of X-Amz-Date),
  X-Amz-Date, Authorization, X-Amz-Security-Token, X-Amz-Content-SHA256
  (each signer sets these itself).
- empty query keys and empty '&&' pieces: botocore's URL parsing keeps them,
  its params cannot express them, and the specification is silent.
- presigned requests with a body: SigV4QueryAuth moves a body into the query.
- repeated query keys in presigned requests are generated as list values,
  since SigV4QueryAuth keeps only the first value of a repeated URL key.
"""
import argparse
import binascii
import datetime
import hashlib
import json
import random
import sys
from unittest import mock
from urllib.parse import urlsplit, quote

import botocore.auth as A
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
PUNCT = " !\"$&'()*+,/:;<=>@[\\]^`{|}%="
UNICODE = ["é", "ß", "ሴ", "日本", "🙂", "Ω"]
REGIONS = ["us-east-1", "us-west-2", "eu-central-1", "ap-southeast-2", "cn-north-1"]
SERVICES = ["sagemaker", "eks", "sts", "service", "execute-api", "iam"]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
HEADER_NAMES = ["X-Amz-Meta-Color", "x-custom", "Content-Type", "My-Header1", "Accept",
                "X-Amz-Target", "x-amz-user-agent", "amz-sdk-request", "X-Forwarded-For",
                "Content-Length", "x-k8s-aws-id", "If-Match", "X_Underscore", "x.dot~tilde",
                "User-Agent", "Expect", "X-Amzn-Trace-Id"]  # the last three: never signed


def fixed_datetime(ts):
    t = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).replace(tzinfo=None)

    class Fixed(datetime.datetime):
        utcnow = classmethod(lambda cls: cls(*t.timetuple()[:6]))
        now = classmethod(lambda cls, tz=None: cls(*t.timetuple()[:6], tzinfo=tz))
    return Fixed


def rand_text(rng, n, alphabet=UNRESERVED + PUNCT, uni=0.15):
    out = []
    for _ in range(n):
        if rng.random() < uni:
            out.append(rng.choice(UNICODE))
        else:
            out.append(rng.choice(alphabet))
    return "".join(out)


def raw_encode(rng, text, is_key):
    """One of many equivalent raw forms of text for a query string."""
    out = []
    for i, ch in enumerate(text):
        nxt = text[i + 1] if i + 1 < len(text) else ""
        data = ch.encode()
        must = ch in "&#%" or (is_key and ch == "=")
        if ch == "%" and nxt not in "0123456789abcdefABCDEF" and rng.random() < 0.3:
            out.append("%")  # a stray '%' is literal
            continue
        if must or rng.random() < 0.4:
            hexd = "".join(f"%{b:02X}" for b in data)
            out.append(hexd.lower() if rng.random() < 0.3 else hexd)
        else:
            out.append(ch)  # literal: unreserved, punctuation, '+', raw UTF-8
    return "".join(out)


def gen_query(rng):
    pairs = []
    for _ in range(rng.choice([0, 0, 1, 2, 3, 5, 8])):
        if pairs and rng.random() < 0.25:
            key = rng.choice(pairs)[0]  # a repeated key
        else:
            key = rand_text(rng, rng.randint(1, 8))
        value = "" if rng.random() < 0.2 else rand_text(rng, rng.randint(1, 12))
        pairs.append((key, value))
    raw = []
    for k, v in pairs:
        rk = raw_encode(rng, k, True)
        if v == "" and rng.random() < 0.5:
            raw.append(rk)  # "key" alone means an empty value
        else:
            raw.append(rk + "=" + raw_encode(rng, v, False))
    return pairs, "&".join(raw)


def gen_path(rng, normalize):
    segs = []
    for _ in range(rng.randint(0, 6)):
        r = rng.random()
        if normalize and r < 0.12:
            segs.append(".")
        elif normalize and r < 0.24:
            segs.append("..")
        elif r < 0.32:
            segs.append("")
        else:
            segs.append(rand_text(rng, rng.randint(1, 10), UNRESERVED + PUNCT.replace("/", "")))
    if not normalize:
        enc = []
        for s in segs:
            e = quote(s, safe="~") if s not in (".", "..") else s
            enc.append(e.lower() if "%" in e and rng.random() < 0.2 else e)
        segs = enc
    path = "/" + "/".join(segs)
    if segs and rng.random() < 0.3:
        path += "/"
    return path


def gen_headers(rng, host):
    headers = [(rng.choice(["Host", "host", "HOST"]), host)]
    for _ in range(rng.randint(0, 6)):
        if len(headers) > 1 and rng.random() < 0.25:
            name = rng.choice(headers[1:])[0]
            name = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)
        else:
            name = rng.choice(HEADER_NAMES)
        words = [rand_text(rng, rng.randint(1, 8), UNRESERVED + "!\"$&'()*+,/:;<=>?@[]^`{|}%=#", 0)
                 for _ in range(rng.randint(0, 4))]
        value = "".join(w + rng.choice([" ", "  ", "\t", " \t ", "   "]) for w in words)
        value = rng.choice(["", " ", "\t", "  "]) + value.rstrip(" \t") + rng.choice(["", " ", "\t "])
        headers.append((name, value))
    return headers


def gen_body(rng):
    r = rng.random()
    if r < 0.3:
        return b""
    if r < 0.6:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
    return json.dumps({"Name": rand_text(rng, 20), "N": rng.randint(0, 9)}, ensure_ascii=False).encode()


def one(rng, n):
    mode = rng.choice(["header", "header", "header", "s3", "presign", "presign", "s3-presign"])
    presign = mode in ("presign", "s3-presign")
    normalize = mode in ("header", "presign")
    method = rng.choice(METHODS)
    host = rng.choice(["example.amazonaws.com", "api.sagemaker.us-west-2.amazonaws.com",
                       "bucket.s3.amazonaws.com", "localhost:8443"])
    ts = rng.randint(1262304000, 2051222400)  # 2010 .. 2035
    akid = "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    secret = "".join(rng.choice(UNRESERVED[:62] + "+/") for _ in range(40))
    token = None
    if rng.random() < 0.35:
        token = "".join(rng.choice(UNRESERVED[:62] + "+/=") for _ in range(rng.randint(20, 120)))
    omit = token is not None and rng.random() < 0.3
    region, service = rng.choice(REGIONS), rng.choice(SERVICES)
    if mode.startswith("s3"):
        service = "s3"
    expires = rng.randint(1, 604800) if presign else 0
    for _ in range(100):
        path = gen_path(rng, normalize)
        url = f"https://{host}{path}"
        if urlsplit(url).path == path:
            break
    else:
        raise RuntimeError("no usable path")
    pairs, raw_query = gen_query(rng)
    headers = gen_headers(rng, host)
    body = b"" if presign else gen_body(rng)
    sign_body = mode == "s3" or (mode == "header" and rng.random() < 0.3)
    unsigned = sign_body and rng.random() < 0.3
    payload_hash = "UNSIGNED-PAYLOAD" if unsigned or mode == "s3-presign" else None

    cls = {"header": A.SigV4Auth, "s3": A.S3SigV4Auth, "presign": A.SigV4QueryAuth,
           "s3-presign": A.S3SigV4QueryAuth}[mode]
    creds = Credentials(akid, secret, None if omit else token)
    auth = cls(creds, service, region, expires=expires) if presign else cls(creds, service, region)
    req = AWSRequest(method=method, url=url, data=body)
    for k, v in headers:
        req.headers[k] = v
    if presign:
        grouped = {}
        for k, v in pairs:
            grouped.setdefault(k, []).append(v)
        req.params = {k: (vs if len(vs) > 1 else vs[0]) for k, vs in grouped.items()}
    else:
        req.params = list(pairs)
    if mode == "header" and sign_body:
        req.headers["X-Amz-Content-SHA256"] = "UNSIGNED-PAYLOAD" if unsigned else hashlib.sha256(body).hexdigest()
    if mode == "s3" and unsigned:
        req.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    seen = {}
    cr, sts = auth.canonical_request, auth.string_to_sign
    auth.canonical_request = lambda r: seen.setdefault("canonical_request", cr(r))
    auth.string_to_sign = lambda r, c: seen.setdefault("string_to_sign", sts(r, c))
    with mock.patch.object(A.datetime, "datetime", fixed_datetime(ts)):
        auth.add_auth(req)
    if presign:
        sig = req.url.rsplit("X-Amz-Signature=", 1)[1]
    else:
        sig = req.headers["Authorization"].rsplit("Signature=", 1)[1]
    desc = (f"{method} {mode}{' normalize' if normalize else ''}"
            f"{' sign_body' if sign_body else ''}{' unsigned-payload' if payload_hash else ''}"
            f"{' token' if token else ''}{' omit_token' if omit else ''}, "
            f"{len(headers)} headers, {len(pairs)} params, {len(body)}-byte body")
    return {
        "id": n, "desc": desc, "presign": presign, "method": method, "path": path,
        "query": raw_query, "headers": [list(h) for h in headers],
        "body_hex": binascii.hexlify(body).decode(), "payload_hash": payload_hash,
        "access_key": akid, "secret_key": secret, "session_token": token,
        "omit_session_token": omit, "region": region, "service": service, "when": ts,
        "normalize": normalize, "sign_body": sign_body and not presign, "expires": expires,
        "expected": {"canonical_request": seen["canonical_request"],
                     "string_to_sign": seen["string_to_sign"], "signature": sig},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=20150830)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--out", default="-")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    for n in range(1, args.count + 1):
        out.write(json.dumps(one(rng, n), ensure_ascii=True) + "\n")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
