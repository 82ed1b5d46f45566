#!/usr/bin/env python3
"""Generates lua/hypd/aws/models/<service>.lua from the machine's botocore.

    python3 mk/aws_models.py [--out lua/hypd/aws/models] [service...]

Each model keeps only what serialization, parsing, retries, pagination
and input validation need (no documentation or errors). A model file is
`return { metadata, operations, shapes, limits }`:

  metadata   = { protocol, apiVersion, endpointPrefix, signingName, ... }
  operations = { Name = { method, uri, input, output, result_wrapper,
                 class, idempotency_token, paginator, checksum_required,
                 host_prefix, auth, input_name, input_xmlns, status } }
  shapes     = { Name = { "structure", { member... }, required = {...},
                          payload = "Body", union = true }
               | { "list", member, min =, max = } | { "map", key, value, min =, max = } }
  limits     = { ShapeName = { enum = {...}, min =, max =, pattern = "...", sensitive = true } }

A member (or a list member, map key or value) is a reference: a string, or
a table { ref, <traits> } when it has traits. A reference names a shape of
`shapes`, or is a scalar type: string, integer, long, boolean, timestamp,
blob, double, float, document (scalar shapes are inlined). In a structure,
members are { "Name", ref, <traits> } in model order. Traits, merged from
the target shape and the member as botocore does:
  loc       uri | querystring | header | headers | statusCode
  name      locationName       qname     queryName
  flat      flattened          xmlns     xmlNamespace uri
  attr      xmlAttribute       ts        timestampFormat
  jsonvalue true               idem      idempotencyToken
  host      hostLabel
  c         the name of the scalar shape in `limits` whose constraints the
            value must meet (only on references reachable from an
            operation's input)

Constraints, as botocore states them: `enum` (the values a string takes),
`min`/`max` (a string's or blob's length, a list's or map's number of
entries, a number's value), `pattern` (a Java regular expression the whole
string matches). Lists and maps carry their min/max themselves; scalars are
inlined, so a reference names their constraints in `limits` (one entry per
set of constraints, named by the first scalar shape that has it, shared by
every member that uses it).

`sensitive = true` (botocore's "sensitive": passwords, secrets, tokens)
marks a scalar's entry in `limits` (an entry of its own, constraints or
not) and a list, map or structure shape of an input: a service never
echoes such a value in an error, and neither do hypd's checks.

Every operation has a class, "read" | "mutating" | "deleting", by the
rules written beside CLASS_VERBS below; the operations no rule covers
are printed for a person to review.
"""
import argparse
import os
import re
import sys

import botocore
import botocore.session

SERVICES = ["sagemaker", "eks", "ec2", "iam", "sts", "s3", "fsx",
            "cloudformation", "ssm", "logs", "service-quotas",
            "sagemaker-runtime",  # for the sandbox (InvokeEndpoint); hypd does not call it
            "elbv2",  # for the sandbox (the NLBs its Load Balancer Controller makes); hypd does not call it
            "pricing"]  # the Price List API: the on-demand prices of what plans create (hypd.cost)
# hypd names a service by its IAM action prefix (the guardrail, hypd
# iam-policy and the sandbox's policy read "service:Operation" that way):
# botocore's name when the two differ
HYPD_NAMES = {"service-quotas": "servicequotas", "elbv2": "elasticloadbalancing"}
SCALARS = {"string", "integer", "long", "boolean", "timestamp", "blob",
           "double", "float", "document"}
META_KEYS = ["protocol", "apiVersion", "endpointPrefix", "signingName",
             "targetPrefix", "jsonVersion", "globalEndpoint", "xmlNamespace",
             "serviceId", "signatureVersion", "checksumFormat"]
# (model key, Lua key): traits a shape or member reference can carry
TRAITS = [("location", "loc"), ("locationName", "name"),
          ("queryName", "qname"), ("flattened", "flat"),
          ("xmlNamespace", "xmlns"), ("xmlAttribute", "attr"),
          ("timestampFormat", "ts"), ("jsonvalue", "jsonvalue"),
          ("idempotencyToken", "idem"), ("hostLabel", "host")]
LIMIT_KEYS = ("enum", "min", "max", "pattern")
SHAPE_TRAITS = {"locationName", "queryName", "flattened", "xmlNamespace",
                "timestampFormat", "xmlAttribute"}


# --- Operation classes -------------------------------------------------------
# Every operation is classified once, here, as "read", "mutating" or
# "deleting": the guardrail the bindings enforce (DESIGN.md section 4: a read
# tool calls only read operations, and only a destructive tool may delete).
# "deleting" means the call removes something, or takes away an
# association, access or reservation, that the same tool cannot put back
# by running again; "mutating" creates or changes things that stay; "read"
# changes nothing in the account. The rules, first match wins:
#
#  1. CLASS_OVERRIDES[service][operation]: the operations the verb rules
#     get wrong, each with its reason.
#  2. "Batch" + Verb is classified by Verb (BatchGetX and BatchDescribeX
#     read, BatchDeleteX deleting, BatchRebootX mutating).
#  3. The operation's leading verb (its first capitalised word) in
#     CLASS_VERBS.
#  4. Anything else is "deleting", the safe default: the generator prints
#     those operations so a person reviews them and adds a verb or an
#     override.
#
# The HTTP method is a cross-check, not a rule: the generator prints REST
# operations whose method disagrees with their class (a GET or HEAD that is
# not read, a read that is a PUT or DELETE) unless an override settles them.
# iam:PassRole and other permission-only actions are not API operations, so
# they have no class (require("hypd.aws").class answers "deleting" for them,
# as for any unknown operation).
CLASS_VERBS = {
    # read: they only return what exists, or compute an answer from the input
    # (Estimate*, Simulate*, Test* of metric filters, Render*, Decode*).
    # Select (s3 SelectObjectContent) and Query/Filter/Search read data.
    "read": """Describe List Get Head Search Lookup Select Query Filter Check Validate
        Estimate Simulate Test Render Decode""",
    # mutating: they create or change resources that stay, or start work
    # whose result stays. Stop and Reboot are here: the resource remains and
    # can be started again (EC2 instances, notebooks, tracking servers) or,
    # for jobs, keeps its record and outputs. Disable/Deactivate/Unlock/
    # Unmonitor/Withdraw undo an Enable/Activate/Lock/Monitor/Advertise and
    # can be redone. Untag and Unlabel only change metadata on a resource
    # that stays, and a mutating tool must be able to correct the tags it
    # owns (ensure changes only what differs). Assume mints credentials for
    # a role: not read-only (sts:AssumeRole is a write in IAM's own terms).
    # Purchase spends money but deletes nothing.
    "mutating": """Create Put Update Modify Attach Associate Authorize Allocate Tag Untag
        Start Stop Reboot Run Enable Disable Activate Deactivate Register Add Set Replace
        Import Export Copy Send Request Accept Reset Restore Upload Complete Initiate
        Assume Apply Assign Advertise Withdraw Bundle Change Confirm Continue Detect
        Execute Extend Generate Label Unlabel Lock Unlock Monitor Unmonitor Move
        Provision Publish Purchase Record Rename Report Resume Resync Retry Rollback
        Signal Write""",
    # deleting: Delete/Terminate/Purge remove resources; Deregister removes
    # a registration (an AMI, an EKS connected cluster); Disassociate, Detach,
    # Unassign, Remove and Revoke take away an association, an attachment,
    # an address or access that other resources depend on; Release and
    # Deprovision give up addresses and hosts that may not come back; Abort
    # and Cancel throw away work or reservations that cannot be resumed (a
    # cancelled capacity reservation or spot request is gone, an aborted
    # multipart upload loses its parts); Reject refuses a pending request,
    # which cannot then be accepted.
    "deleting": """Delete Terminate Purge Deregister Disassociate Detach Unassign Remove
        Revoke Release Deprovision Abort Cancel Reject""",
}
CLASS_OVERRIDES = {
    "sts": {
        # they issue credentials: not read-only, though named Get
        "GetSessionToken": "mutating", "GetFederationToken": "mutating",
        "GetDelegatedAccessToken": "mutating", "GetWebIdentityToken": "mutating",
    },
    "ssm": {
        "GetAccessToken": "mutating",  # credentials for just-in-time node access
        "RemoveTagsFromResource": "mutating",  # SSM's Untag
    },
    "s3": {
        "CreateSession": "mutating",  # a GET, but it issues S3 Express credentials
        "DeleteBucketTagging": "mutating",  # S3's Untag (bucket and object tags)
        "DeleteObjectTagging": "mutating",
    },
    "ec2": {
        "DeleteTags": "mutating",  # EC2's Untag
        # downloads of a configuration, nothing is written
        "ExportClientVpnClientConfiguration": "read",
        "ExportClientVpnClientCertificateRevocationList": "read",
        "ExportVerifiedAccessInstanceClientConfiguration": "read",
        # replaces a running instance's root volume (and may delete the old one)
        "CreateReplaceRootVolumeTask": "deleting",
    },
    "sagemaker": {
        "DeleteTags": "mutating",  # SageMaker's Untag
        # "terminates the specified instances and provisions new ones": the
        # nodes' local data is lost
        "BatchReplaceClusterNodes": "deleting",
    },
    "fsx": {
        "ReleaseFileSystemNfsV3Locks": "mutating",  # releases locks, not the file system
    },
    "cloudformation": {
        "TestType": "mutating",  # runs an extension's contract tests and records the result
    },
    "sagemaker-runtime": {  # a request to a deployed model: it runs the model, it removes nothing
        "InvokeEndpoint": "mutating",
        "InvokeEndpointAsync": "mutating",
        "InvokeEndpointWithResponseStream": "mutating",
    },
}
CLASSES = ("read", "mutating", "deleting")
_VERB_CLASS = {v: c for c, words in CLASS_VERBS.items() for v in words.split()}


def classify(service, name):
    """(class, rule) of an operation: rule is "override", "verb" or "default"."""
    cls = CLASS_OVERRIDES.get(service, {}).get(name)
    if cls:
        return cls, "override"
    m = re.match(r"^(Batch)?([A-Z][a-z]*)", name)
    verb = m.group(2) if m else ""
    if verb in _VERB_CLASS:
        return _VERB_CLASS[verb], "verb"
    return "deleting", "default"


for _svc, _ops in CLASS_OVERRIDES.items():
    for _op, _cls in _ops.items():
        assert _cls in CLASSES, (_svc, _op, _cls)


LUA_KEYWORDS = set("""and break do else elseif end false for function goto if
in local nil not or repeat return then true until while""".split())
MAX_LINE = 120


def lua_str(s):
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif o < 32 or o == 127:
            out.append("\\%d" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out).encode("utf-8").decode("utf-8")


def lua_key(k):
    if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) and k not in LUA_KEYWORDS:
        return k
    return "[" + lua_str(k) + "]"


class Raw:
    """A Lua expression written as is."""

    def __init__(self, text):
        self.text = text


def render(v, indent=0, col=None):
    """Lua source for v at column col (indent by default): inline when it
    fits, else one item per line indented by indent + 2."""
    one = render_inline(v)
    if len(one) + (indent if col is None else col) <= MAX_LINE or not isinstance(v, (list, dict)):
        return one
    pad = " " * (indent + 2)
    items = []
    if isinstance(v, list):
        for x in v:
            items.append(pad + render(x, indent + 2))
    else:
        for k, x in v.items():
            if isinstance(k, int):
                items.append(pad + render(x, indent + 2))
            else:
                head = pad + lua_key(k) + " = "
                items.append(head + render(x, indent + 2, len(head)))
    return "{\n" + ",\n".join(items) + ",\n" + " " * indent + "}"


def render_inline(v):
    if isinstance(v, Raw):
        return v.text
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return lua_str(v)
    if isinstance(v, list):
        return "{ " + ", ".join(render_inline(x) for x in v) + " }" if v else "{}"
    if isinstance(v, dict):
        parts = []
        for k, x in v.items():
            if isinstance(k, int):
                parts.append(render_inline(x))
            else:
                parts.append(lua_key(k) + " = " + render_inline(x))
        return "{ " + ", ".join(parts) + " }" if parts else "{}"
    raise TypeError(repr(v))


class Builder:
    def __init__(self, service, model, paginators):
        self.service = service
        self.model = model
        self.defaulted = []  # operations no rule classifies (deleting by default)
        self.disagree = []  # REST operations whose HTTP method disagrees with their class
        self.shapes = model["shapes"]
        self.paginators = paginators
        self.out_shapes = {}
        self.limits = {}  # scalar shape name -> its constraints
        self.limit_names = {}  # constraints (as text) -> the shape name that names them
        self.owner = None  # the shape whose members are being visited
        self.inputs = set()  # shapes reachable from an operation's input
        for op in model["operations"].values():
            if op.get("input"):
                self.reach(op["input"]["shape"])
        for name in self.shapes:
            if name in SCALARS:
                sys.exit("shape %s collides with a scalar type name" % name)

    def reach(self, name):
        if name in self.inputs:
            return
        self.inputs.add(name)
        shape = self.shapes[name]
        refs = list(shape.get("members", {}).values())
        refs += [shape[k] for k in ("member", "key", "value") if k in shape]
        for r in refs:
            self.reach(r["shape"])

    def limit(self, name):
        """The constraints of a scalar shape, or None."""
        shape = self.shapes[name]
        out = {}
        for k in LIMIT_KEYS:
            if k in shape:
                v = shape[k]
                if isinstance(v, float) and v.is_integer() and k != "pattern":
                    v = int(v)
                out[k] = v
        if shape.get("sensitive"):
            out["sensitive"] = True
        return out or None

    def traits_of(self, ref):
        """Effective traits of a reference: the shape's, then the ref's."""
        target = self.shapes[ref["shape"]]
        t = {}
        for k in SHAPE_TRAITS:
            if k in target:
                t[k] = target[k]
        for k, _ in TRAITS:
            if k in ref:
                t[k] = ref[k]
        out = {}
        for k, lk in TRAITS:
            if k not in t:
                continue
            v = t[k]
            if k == "xmlNamespace":
                v = v.get("uri", "") if isinstance(v, dict) else v
                prefix = t[k].get("prefix") if isinstance(t[k], dict) else None
                if prefix:
                    out["xmlns_prefix"] = prefix
            if k == "timestampFormat":
                v = v.lower()
            out[lk] = v
        return out

    def ref(self, ref):
        """A reference: the scalar type or shape name, with traits."""
        name = ref["shape"]
        target = self.shapes[name]
        typ = target["type"]
        if typ in SCALARS:
            head = typ
        else:
            head = name
            self.visit(name)
        traits = self.traits_of(ref)
        if typ in SCALARS and self.owner in self.inputs:
            lim = self.limit(name)
            if lim:
                # shapes with the same constraints share one entry (the
                # first name that carries them)
                key = repr(sorted(lim.items()))
                canon = self.limit_names.setdefault(key, name)
                self.limits[canon] = lim
                traits["c"] = canon
        if not traits:
            return head
        d = {1: head}
        d.update(traits)
        return d

    def visit(self, name):
        if name in self.out_shapes:
            return
        shape = self.shapes[name]
        self.out_shapes[name] = None  # cycles
        typ = shape["type"]
        owner, self.owner = self.owner, name
        if typ == "structure":
            members = []
            for mname, mref in shape.get("members", {}).items():
                r = self.ref(mref)
                if isinstance(r, dict):
                    m = {1: mname}
                    m[2] = r.pop(1)
                    m.update(r)
                else:
                    m = [mname, r]
                members.append(m)
            out = {1: "structure", 2: members}
            if shape.get("required"):
                out["required"] = list(shape["required"])
            if shape.get("payload"):
                out["payload"] = shape["payload"]
            if shape.get("union"):
                out["union"] = True
        elif typ == "list":
            out = {1: "list", 2: self.ref(shape["member"])}
        elif typ == "map":
            out = {1: "map", 2: self.ref(shape["key"]), 3: self.ref(shape["value"])}
        else:
            sys.exit("unexpected shape type %s for %s" % (typ, name))
        if typ in ("list", "map") and name in self.inputs:
            for k in ("min", "max"):
                if k in shape:
                    out[k] = int(shape[k])
        if shape.get("sensitive") and name in self.inputs:
            out["sensitive"] = True
        self.owner = owner
        self.out_shapes[name] = out

    def op_class(self, name, method):
        cls, rule = classify(self.service, name)
        if rule == "default":
            self.defaulted.append(name)
        rest = self.model["metadata"]["protocol"].startswith("rest")
        if rest and rule != "override" and (
                (method in ("GET", "HEAD")) != (cls == "read") and method != "POST"):
            self.disagree.append("%s (%s, %s)" % (name, method, cls))
        return cls

    def operation(self, name, op):
        http = op.get("http", {})
        out = {"method": http.get("method", "POST"), "uri": http.get("requestUri", "/")}
        if http.get("responseCode"):
            out["status"] = http["responseCode"]
        inp = op.get("input")
        if inp:
            out["input"] = inp["shape"]
            self.visit(inp["shape"])
            if inp.get("locationName"):
                out["input_name"] = inp["locationName"]
            if inp.get("xmlNamespace"):
                out["input_xmlns"] = inp["xmlNamespace"].get("uri")
            for mname, mref in self.shapes[inp["shape"]].get("members", {}).items():
                if mref.get("idempotencyToken"):
                    out["idempotency_token"] = mname
        outp = op.get("output")
        if outp:
            out["output"] = outp["shape"]
            self.visit(outp["shape"])
            if outp.get("resultWrapper"):
                out["result_wrapper"] = outp["resultWrapper"]
        out["class"] = self.op_class(name, out["method"])
        checksum = op.get("httpChecksum", {})
        if op.get("httpChecksumRequired") or checksum.get("requestChecksumRequired"):
            out["checksum_required"] = True
        if op.get("endpoint", {}).get("hostPrefix"):
            out["host_prefix"] = op["endpoint"]["hostPrefix"]
        if op.get("authtype") == "none" or "smithy.api#noAuth" in op.get("auth", []):
            out["auth"] = "none"
        elif op.get("authtype") == "v4-unsigned-body" or op.get("unsignedPayload"):
            out["auth"] = "v4-unsigned-body"
        pag = self.paginators.get(name)
        if pag:
            p = {}
            for k in ("input_token", "output_token", "result_key", "limit_key", "more_results"):
                if k in pag:
                    p[k] = pag[k]
            out["paginator"] = p
        return out


def generate(session, service, version):
    loader = session.get_component("data_loader")
    model = loader.load_service_model(service, "service-2")
    try:
        paginators = loader.load_service_model(service, "paginators-1")["pagination"]
    except Exception:  # noqa: BLE001 (a service may have none)
        paginators = {}
    b = Builder(service, model, paginators)
    meta = {k: model["metadata"][k] for k in META_KEYS if k in model["metadata"]}
    ops = {name: b.operation(name, op) for name, op in sorted(model["operations"].items())}
    lines = [
        "-- Generated by mk/aws_models.py from botocore %s (%s %s). Do not edit."
        % (version, service, model["metadata"]["apiVersion"]),
        "-- luacheck: ignore",
        "return {",
        "metadata = " + render(meta) + ",",
        "operations = {",
    ]
    for name, op in ops.items():
        head = lua_key(name) + " = "
        lines.append(head + render(op, 0, len(head)) + ",")
    lines.append("},")
    lines.append("shapes = {")
    for name in sorted(b.out_shapes):
        head = lua_key(name) + " = "
        lines.append(head + render(b.out_shapes[name], 0, len(head)) + ",")
    lines.append("},")
    lines.append("limits = {")
    for name in sorted(b.limits):
        head = lua_key(name) + " = "
        lines.append(head + render(b.limits[name], 0, len(head)) + ",")
    lines.append("},")
    lines.append("}")
    return "\n".join(lines) + "\n", len(ops), len(b.out_shapes), b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="lua/hypd/aws/models")
    ap.add_argument("services", nargs="*", default=SERVICES)
    args = ap.parse_args()
    session = botocore.session.get_session()
    os.makedirs(args.out, exist_ok=True)
    total = 0
    defaulted, disagree, counts = [], [], {c: 0 for c in CLASSES}
    for svc in args.services:
        text, nops, nshapes, b = generate(session, svc, botocore.__version__)
        defaulted += ["%s:%s" % (svc, n) for n in b.defaulted]
        disagree += ["%s:%s" % (svc, n) for n in b.disagree]
        for op in b.model["operations"]:
            counts[classify(svc, op)[0]] += 1
        path = os.path.join(args.out, HYPD_NAMES.get(svc, svc) + ".lua")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        total += len(text.encode())
        print("%-16s %4d operations %5d shapes %8d bytes" % (HYPD_NAMES.get(svc, svc), nops, nshapes, len(text.encode())))
    print("total %d bytes" % total)
    print("classes: " + ", ".join("%d %s" % (counts[c], c) for c in CLASSES))
    # for a person to review: add a verb to CLASS_VERBS or an override
    print("%d operations fell to the default class (deleting)%s" % (
        len(defaulted), ":" if defaulted else ""))
    for name in defaulted:
        print("  " + name)
    if disagree:
        print("%d REST operations whose HTTP method disagrees with their class:" % len(disagree))
        for name in disagree:
            print("  " + name)


if __name__ == "__main__":
    main()
