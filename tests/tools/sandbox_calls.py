#!/usr/bin/env python3
"""Makes boto3 calls given as a JSON list in argv[1] ([{"case", "service",
"method", "params"}, ...]) and prints one JSON line per case: {"case",
"ok": true, "result": ...} for an answer, or {"case", "status", "code",
"message"} as botocore parsed the error.

Env: AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
(as `hypd sandbox` prints them).
"""
import json
import os
import sys

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

CFG = Config(region_name=os.environ.get("AWS_REGION", "us-west-2"), retries={"max_attempts": 1},
             s3={"addressing_style": "path"}, connect_timeout=5, read_timeout=10)


def main():
    cases = json.loads(sys.argv[1])
    for c in cases:
        client = boto3.client(c["service"], endpoint_url=os.environ["AWS_ENDPOINT_URL"], config=CFG)
        try:
            r = getattr(client, c["method"])(**c.get("params", {}))
            r.pop("ResponseMetadata", None)
            print(json.dumps({"case": c["case"], "ok": True, "result": r}, default=str), flush=True)
        except ClientError as e:
            err = e.response.get("Error", {})
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            print(json.dumps({"case": c["case"], "status": status, "code": err.get("Code"),
                              "message": err.get("Message")}), flush=True)


if __name__ == "__main__":
    main()
