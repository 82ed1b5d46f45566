#!/usr/bin/env python3
"""Invalid requests for tests/lua/sandbox_constraints_test.lua, sent through
boto3 to a running sandbox.

    python3 tests/sdk/constraints_boto3.py OPERATIONS.json > RESULTS.json

OPERATIONS.json: [["sagemaker", "CreateCluster"], ...] (hypd's service
names). For each operation, every member of its input with a constraint
(enum, min, max, pattern, as botocore's model states it), at top level or
one level down (a member of a structure member, of the first item of a list
of structures, or an item of a list of scalars), gets one invalid value in
an otherwise valid request (the required members filled with values that
meet their constraints): enum, a value outside the set; length, one too
many characters or items; range, one below the minimum (or above the
maximum); pattern, a value of a valid length the pattern does not match
(by Python's re, which reads the models' Java patterns alike for what they
use). boto3's own parameter validation is off, so every request reaches
the sandbox.

Output: one JSON list of cases { service, operation, protocol, member (as
boto3 names it), coral (AWS's lowerCamel path), wire (the EC2 query name
path), kind, shape, pattern, value, code, message, status } (code null when
the sandbox accepted the request), and skipped: [{ service, operation,
member, kind, why }] for the cases no value could be built for.
Env: AWS_ENDPOINT_URL, AWS_REGION and the sandbox's keys.
"""
import datetime
import json
import os
import re
import sys

try:
    import re._parser as sre_parse  # Python 3.11+
    from re import _constants as sre_c
except ImportError:  # pragma: no cover
    import sre_parse
    import sre_constants as sre_c

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

BOTO_NAMES = {"servicequotas": "service-quotas", "elasticloadbalancing": "elbv2"}
CONFIG = Config(region_name=os.environ.get("AWS_REGION", "us-west-2"), parameter_validation=False,
                retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=20)
REPEAT_CAP = 40  # the most repetitions a generated value uses for an open repeat


def lcfirst(s):
    return s[:1].lower() + s[1:]


# --- values that match a pattern --------------------------------------------

def _gen(parsed, extra):
    """The shortest text the parsed pattern matches, each open repeat taking
    `extra` more rounds than its minimum; None when it cannot say."""
    out = []
    for op, av in parsed:
        if op == sre_c.LITERAL:
            out.append(chr(av))
        elif op == sre_c.ANY:
            out.append("a")
        elif op == sre_c.IN:
            ch = _class_char(av)
            if ch is None:
                return None
            out.append(ch)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
            lo, hi, sub = av
            n = lo + extra
            if hi != sre_c.MAXREPEAT:
                n = min(n, hi)
            n = min(n, max(lo, REPEAT_CAP))
            piece = _gen(sub, extra)
            if piece is None:
                return None
            out.append(piece * n)
        elif op == sre_c.SUBPATTERN:
            piece = _gen(av[-1], extra)
            if piece is None:
                return None
            out.append(piece)
        elif op == sre_c.BRANCH:
            piece = _gen(av[1][0], extra)
            if piece is None:
                return None
            out.append(piece)
        elif op == sre_c.AT:
            pass
        else:
            return None
    return "".join(out)


def _class_char(items):
    negate = False
    for op, av in items:
        if op == sre_c.NEGATE:
            negate = True
    if negate:
        bad = set()
        for op, av in items:
            if op == sre_c.LITERAL:
                bad.add(chr(av))
        for ch in "aZ09_-":
            if ch not in bad and all(not (op == sre_c.RANGE and av[0] <= ord(ch) <= av[1]) for op, av in items):
                return ch
        return None
    for op, av in items:
        if op == sre_c.LITERAL:
            return chr(av)
        if op == sre_c.RANGE:
            return chr(av[0]) if av[0] >= 32 else None
        if op == sre_c.CATEGORY:
            return {"CATEGORY_DIGIT": "0", "CATEGORY_WORD": "a", "CATEGORY_SPACE": " ",
                    "CATEGORY_NOT_SPACE": "a", "CATEGORY_NOT_DIGIT": "a", "CATEGORY_NOT_WORD": "-"}.get(str(av))
    return None


def compile_pattern(p):
    try:
        return re.compile(p)
    except re.error:
        return None


# values of the kinds AWS identifiers take, for patterns the generator
# cannot walk (lookaround)
SAMPLES = ["a", "arn:aws:fsx:us-west-2:123456789012:file-system/fs-0123456789abcdef0",
           "arn:aws:iam::123456789012:role/r", "arn:aws:eks:us-west-2:123456789012:cluster/c",
           "fs-0123456789abcdef0", "sg-0123456789abcdef0", "subnet-0123456789abcdef0", "10.0.0.0/16",
           "s3://bucket/prefix/", "i-0123456789abcdef0"]


def matching(pattern, lo, hi):
    """A text of length lo..hi the whole pattern matches, or None; a pattern
    Python cannot read (\\p{L}: no more can hypd.regex, which skips it) gets
    plain letters."""
    rx = compile_pattern(pattern)
    if rx is None:
        return "a" * max(lo, 1) if hi is None or hi >= max(lo, 1) else None
    for s in SAMPLES:
        if len(s) >= lo and (hi is None or len(s) <= hi) and rx.fullmatch(s):
            return s
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # noqa: BLE001
        return None
    for extra in range(0, 70):
        s = _gen(parsed, extra)
        if s is None:
            return None
        if len(s) >= lo and (hi is None or len(s) <= hi) and rx.fullmatch(s):
            return s
        if hi is not None and len(s) > hi:
            break
    return None


def not_matching(pattern, lo, hi, enum):
    rx = compile_pattern(pattern)
    if rx is None:
        return None
    for base in ["!", " ", "#", "a b", "@", "-", "_", "0", "A", "a", ".", "/", ":", "~", "\t"]:
        s = base
        while len(s) < lo:
            s += base
        if hi is not None and len(s) > hi:
            continue
        if not rx.fullmatch(s) and (not enum or s not in enum):
            return s
    return None


# --- valid values -------------------------------------------------------------

class NoValue(Exception):
    pass


def valid(shape, depth=0):
    t = shape.type_name
    m = shape.metadata
    if depth > 6:
        raise NoValue("too deep")
    if t == "string":
        if shape.enum:
            return shape.enum[0]
        lo, hi = m.get("min", 0), m.get("max")
        if "pattern" in m:
            s = matching(m["pattern"], max(lo, 1), hi)
            if s is None:
                raise NoValue("no value matches " + m["pattern"])
            return s
        return "a" * max(lo, 1)
    if t in ("integer", "long"):
        lo, hi = m.get("min"), m.get("max")
        if lo is not None:
            return int(lo)
        return 1 if hi is None or hi >= 1 else int(hi)
    if t in ("double", "float"):
        lo = m.get("min")
        return float(lo) if lo is not None else 1.0
    if t == "boolean":
        return True
    if t == "timestamp":
        return datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
    if t == "blob":
        return b"a" * max(m.get("min", 0), 1)
    if t == "list":
        n = max(m.get("min", 0), 1)
        if m.get("max") is not None:
            n = min(n, m["max"])
        return [valid(shape.member, depth + 1) for _ in range(n)]
    if t == "map":
        n = max(m.get("min", 0), 1)
        k = valid(shape.key, depth + 1)
        return {k: valid(shape.value, depth + 1)} if n >= 1 else {}
    if t == "structure":
        out = {}
        for name in shape.required_members:
            out[name] = valid(shape.members[name], depth + 1)
        if getattr(shape, "is_tagged_union", False):
            if not out and shape.members:
                name = next(iter(shape.members))
                out[name] = valid(shape.members[name], depth + 1)
        return out
    raise NoValue("type " + t)


# --- invalid values -------------------------------------------------------------

class Unreadable:
    """A pattern Python's re cannot read (\\p{L}, ...): hypd.regex cannot
    either, so the sandbox skips it."""


def invalid_values(shape):
    """[(kind, value)] for a constrained member shape."""
    t = shape.type_name
    m = shape.metadata
    out = []
    if t == "string":
        if shape.enum:
            out.append(("enum", "hypd-not-in-the-set"))
        if m.get("max") is not None and m["max"] < 5000:
            out.append(("length", "a" * (m["max"] + 1)))
        if "pattern" in m:
            if compile_pattern(m["pattern"]) is None:
                out.append(("pattern", Unreadable()))
            else:
                out.append(("pattern", not_matching(m["pattern"], m.get("min", 0), m.get("max"), shape.enum)))
    elif t in ("integer", "long", "double", "float"):
        if m.get("min") is not None:
            v = m["min"] - 1
            out.append(("range", int(v) if t in ("integer", "long") else float(v)))
        elif m.get("max") is not None:
            v = m["max"] + 1
            out.append(("range", int(v) if t in ("integer", "long") else float(v)))
    elif t == "list":
        if m.get("max") is not None and m["max"] < 300:
            try:
                item = valid(shape.member, 1)
            except NoValue:
                item = None
            out.append(("length", None if item is None else [item] * (m["max"] + 1)))
    return out


def item_constrained(shape):
    return shape.type_name != "list" and constrained(shape)


def constrained(shape):
    """Whether invalid_values has something for the member."""
    t, m = shape.type_name, shape.metadata
    if t == "string":
        return bool(shape.enum) or "max" in m or "pattern" in m
    if t in ("integer", "long", "double", "float"):
        return "min" in m or "max" in m
    return t == "list" and "max" in m


def wire_name(ref_name, shape, proto):
    """The member's name in the EC2 query (queryName, or locationName capitalised)."""
    s = shape.serialization
    if proto == "ec2":
        if s.get("queryName"):
            return s["queryName"]
        if s.get("name"):
            return s["name"][:1].upper() + s["name"][1:]
    return ref_name


def targets(inp, proto):
    """[(path, coral, wire, shape, container)]: constrained members at top
    level or one level down. path: [(name, index or None)]."""
    out = []
    for name, sh in inp.members.items():
        top_coral, top_wire = lcfirst(name), wire_name(name, sh, proto)
        if constrained(sh):
            out.append(([name], top_coral, top_wire, sh, None))
        if sh.type_name == "structure":
            for n2, s2 in sh.members.items():
                if constrained(s2):
                    out.append(([name, n2], top_coral + "." + lcfirst(n2),
                                top_wire + "." + wire_name(n2, s2, proto), s2, "structure"))
        elif sh.type_name == "list" and sh.member.type_name == "structure":
            for n2, s2 in sh.member.members.items():
                if constrained(s2):
                    out.append(([name, 0, n2], top_coral + ".1.member." + lcfirst(n2),
                                top_wire + ".1." + wire_name(n2, s2, proto), s2, "list"))
        elif sh.type_name == "list" and item_constrained(sh.member):
            out.append(([name, 0], top_coral, top_wire, sh.member, "items"))
    return out


def request_with(inp, path, value):
    req = valid(inp)
    name = path[0]
    top = inp.members[name]
    if len(path) == 1:
        req[name] = value
    elif len(path) == 2 and isinstance(path[1], str):
        parent = req.get(name) or valid(top)
        parent[path[1]] = value
        req[name] = parent
    elif len(path) == 2:  # an item of a list of scalars
        req[name] = [value]
    else:
        item = valid(top.member)
        item[path[2]] = value
        req[name] = [item]
    return req


def python_method(client, op):
    for meth, api in client.meta.method_to_api_mapping.items():
        if api == op:
            return getattr(client, meth)
    return None


def main():
    ops = json.load(open(sys.argv[1]))
    cases, skipped = [], []
    session = boto3.session.Session()
    clients = {}
    for svc, op in ops:
        bname = BOTO_NAMES.get(svc, svc)
        if bname not in clients:
            clients[bname] = session.client(bname, endpoint_url=os.environ.get("AWS_ENDPOINT_URL"), config=CONFIG)
        client = clients[bname]
        model = client.meta.service_model
        proto = model.protocol
        opm = model.operation_model(op)
        inp = opm.input_shape
        if inp is None:
            continue
        fn = python_method(client, op)
        for path, coral, wire, sh, _container in targets(inp, proto):
            member = ".".join(str(p) for p in path)
            for kind, value in invalid_values(sh):
                base = {"service": svc, "operation": op, "member": member, "kind": kind}
                if isinstance(value, Unreadable):
                    skipped.append(dict(base, why="pattern Python's re cannot read: " + sh.metadata["pattern"]))
                    continue
                if value is None:
                    skipped.append(dict(base, why="every value of a valid length matches (or no item to repeat)"))
                    continue
                try:
                    params = request_with(inp, path, value)
                except NoValue as e:
                    skipped.append(dict(base, why="no valid request: " + str(e)))
                    continue
                case = dict(base, protocol=proto, coral=coral, wire=wire, shape=sh.name,
                            pattern=sh.metadata.get("pattern"), value=repr(value)[:80], code=None, message=None,
                            status=None)
                try:
                    fn(**params)
                except ClientError as e:
                    err = e.response.get("Error", {})
                    case["code"] = err.get("Code")
                    case["message"] = err.get("Message")
                    case["status"] = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                except Exception as e:  # noqa: BLE001 (boto3 could not send or read it)
                    case["code"] = "boto3:" + type(e).__name__
                    case["message"] = str(e)[:300]
                cases.append(case)
    json.dump({"cases": cases, "skipped": skipped}, sys.stdout)


if __name__ == "__main__":
    main()
