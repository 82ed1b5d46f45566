#!/usr/bin/env python3
"""Generates lua/sandbox/k8s/proto/*.lua from the upstream Kubernetes
`generated.proto` files (k8s.io/api and k8s.io/apimachinery) and the Go
types beside them, as mk/aws_models.py generates the AWS models.

    python3 mk/k8s_proto.py --api DIR --apimachinery DIR [--out lua/sandbox/k8s/proto]

DIR is a checkout (or a bare git directory: the files are read with
`git show HEAD:path`) of github.com/kubernetes/api and of
github.com/kubernetes/apimachinery.

For every package in PACKAGES it writes `<name>.lua`:

  return { package = "k8s.io.api.apps.v1", messages = {
    Deployment = { [1] = { "metadata", "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", "" }, ... },
    ... } }

A field is { json name, type, flags [, map value type] } keyed by its
field number. The type is a proto scalar (string, int32, int64, bool,
bytes, double, float, uint32, uint64, fixed32, fixed64, sfixed32,
sfixed64, sint32, sint64), "map" (then the key's type is string and the
fourth entry is the value's type) or a message's full name. Flags, from
the Go struct tags of the package's types (the protobuf tag names the
field number): "r" repeated, "p" a pointer in Go (kept when zero), "e"
omitempty (a zero scalar is left out, as Go's JSON encoder leaves it),
"i" inline (the message's fields are the parent's, as `json:",inline"`).
The messages whose JSON is not their proto shape are marked with
`special`: Time, MicroTime, Duration, Quantity, IntOrString,
RawExtension, FieldsV1, and the `+protobuf.nullable=true` wrappers of a
list ("items"), whose JSON is the list.

Beside it `docs/<name>.lua` keeps the doc comments (for OpenAPI and
kubectl explain): { Kind = "text", ["Kind.field"] = "text", ... }.
"""
import argparse
import os
import re
import subprocess

# (module name, repository, directory)
PACKAGES = [
    ("meta_v1", "apimachinery", "pkg/apis/meta/v1"),
    ("runtime", "apimachinery", "pkg/runtime"),
    ("resource", "apimachinery", "pkg/api/resource"),
    ("intstr", "apimachinery", "pkg/util/intstr"),
    ("core_v1", "api", "core/v1"),
    ("apps_v1", "api", "apps/v1"),
    ("batch_v1", "api", "batch/v1"),
    ("networking_v1", "api", "networking/v1"),
    ("rbac_v1", "api", "rbac/v1"),
    ("policy_v1", "api", "policy/v1"),
    ("scheduling_v1", "api", "scheduling/v1"),
    ("authorization_v1", "api", "authorization/v1"),
    ("authentication_v1", "api", "authentication/v1"),
    ("autoscaling_v1", "api", "autoscaling/v1"),
    ("autoscaling_v2", "api", "autoscaling/v2"),
    ("discovery_v1", "api", "discovery/v1"),
    ("events_v1", "api", "events/v1"),
    ("storage_v1", "api", "storage/v1"),
    ("coordination_v1", "api", "coordination/v1"),
    ("node_v1", "api", "node/v1"),
    ("certificates_v1", "api", "certificates/v1"),
]

META = "k8s.io.apimachinery.pkg.apis.meta.v1."
SPECIAL = {
    META + "Time": "time",
    META + "MicroTime": "microtime",
    META + "Duration": "duration",
    META + "FieldsV1": "fieldsv1",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "intorstring",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "raw",
}
SCALARS = {"string", "int32", "int64", "bool", "bytes", "double", "float",
           "uint32", "uint64", "fixed32", "fixed64", "sfixed32", "sfixed64",
           "sint32", "sint64"}


class Source:
    """Files of one repository: a work tree or a bare git directory."""

    def __init__(self, root):
        self.root = root
        self.git = not os.path.isdir(os.path.join(root, "core")) and \
            not os.path.isdir(os.path.join(root, "pkg"))

    def commit(self):
        return subprocess.run(["git", "--git-dir" if self.git else "-C", self.root, "rev-parse", "HEAD"],
                              capture_output=True, text=True).stdout.strip()

    def files(self, d):
        if self.git:
            out = subprocess.run(["git", "--git-dir", self.root, "ls-tree", "--name-only", "HEAD", d + "/"],
                                 capture_output=True, text=True, check=True).stdout
            return [os.path.basename(p) for p in out.split()]
        return os.listdir(os.path.join(self.root, d))

    def read(self, path):
        if self.git:
            return subprocess.run(["git", "--git-dir", self.root, "show", "HEAD:" + path],
                                  capture_output=True, text=True, check=True).stdout
        with open(os.path.join(self.root, path)) as f:
            return f.read()


def doc_text(lines):
    """Comment lines -> the description, as the OpenAPI generator words it:
    marker lines (+...) dropped, lines joined by spaces, paragraphs by a
    blank line."""
    paras, cur = [], []
    for ln in lines:
        s = ln.strip()
        if s.startswith("+") or s.startswith("---"):
            continue
        if s == "":
            if cur:
                paras.append(" ".join(cur))
                cur = []
            continue
        cur.append(s)
    if cur:
        paras.append(" ".join(cur))
    return "\n\n".join(paras).strip()


FIELD_RE = re.compile(r"^\s*(optional|repeated)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
MAP_RE = re.compile(r"^\s*map<\s*(\S+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")


def parse_proto(text):
    """-> package, {message: {"fields": [...], "doc", "markers"}}"""
    pkg = re.search(r"^package\s+([\w.]+);", text, re.M).group(1)
    msgs, cur, comment = {}, None, []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("//"):
            comment.append(s[3:] if s[2:3] == " " else s[2:])
            continue
        m = re.match(r"^message\s+(\w+)\s*\{", s)
        if m and cur is None:
            cur = {"name": m.group(1), "fields": [], "doc": doc_text(comment),
                   "markers": [c.strip() for c in comment if c.strip().startswith("+")]}
            msgs[m.group(1)] = cur
            comment = []
            continue
        if cur is not None and s == "}":
            cur, comment = None, []
            continue
        if cur is not None:
            fm, mm = FIELD_RE.match(line), MAP_RE.match(line)
            if fm:
                cur["fields"].append({"label": fm.group(1), "type": fm.group(2), "name": fm.group(3),
                                      "num": int(fm.group(4)), "doc": doc_text(comment)})
            elif mm:
                cur["fields"].append({"label": "map", "type": "map", "key": mm.group(1), "value": mm.group(2),
                                      "name": mm.group(3), "num": int(mm.group(4)), "doc": doc_text(comment)})
            if s != "":
                comment = []
            continue
        if s == "":
            comment = []
    return pkg, msgs


GO_FIELD = re.compile(r"^\s*(?:(\w+)\s+)?(\S+)\s+`([^`]*)`")
TAG = re.compile(r'(\w+):"([^"]*)"')


def parse_go(texts):
    """-> {(struct, proto field number): {"ptr", "omitempty", "inline", "json"}}"""
    out = {}
    for text in texts:
        struct = None
        for line in text.splitlines():
            m = re.match(r"^type\s+(\w+)\s+struct\s*\{", line)
            if m:
                struct = m.group(1)
                continue
            if struct and line.startswith("}"):
                struct = None
                continue
            if not struct:
                continue
            fm = GO_FIELD.match(line)
            if not fm:
                continue
            tags = dict(TAG.findall(fm.group(3)))
            if "protobuf" not in tags:
                continue
            pb = tags["protobuf"].split(",")
            try:
                num = int(pb[1])
            except (IndexError, ValueError):
                continue
            js = tags.get("json", "").split(",")
            out[(struct, num)] = {"ptr": fm.group(2).startswith("*"), "omitempty": "omitempty" in js[1:],
                                  "inline": js[0] == "" and "json" in tags, "json": js[0]}
    return out


def qualify(t, pkg):
    if t in SCALARS:
        return t
    if t.startswith("."):
        return t[1:]
    return pkg + "." + t


def lua_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def generate(src, d, name, out, commit):
    files = src.files(d)
    text = src.read(d + "/generated.proto")
    pkg, msgs = parse_proto(text)
    go = parse_go([src.read(d + "/" + f) for f in files
                   if f.endswith(".go") and not f.endswith("_test.go") and not f.startswith("zz_generated")
                   and f != "generated.pb.go" and not f.startswith("types_swagger")])
    lines = ["-- generated by mk/k8s_proto.py from kubernetes/%s %s (%s/generated.proto); do not edit"
             % (src.name, commit[:12], d),
             "-- a field: [number] = { json name, type, flags [, map value type] } (see mk/k8s_proto.py)",
             "-- luacheck: no max line length",
             "return { package = %s, messages = {" % lua_str(pkg)]
    docs = ["-- generated by mk/k8s_proto.py from kubernetes/%s %s (%s/generated.proto); do not edit"
            % (src.name, commit[:12], d), "-- luacheck: no max line length", "return {"]
    for mname in sorted(msgs):
        msg = msgs[mname]
        full = pkg + "." + mname
        special = SPECIAL.get(full)
        if not special and "+protobuf.nullable=true" in msg["markers"] and len(msg["fields"]) == 1 \
                and msg["fields"][0]["name"] == "items":
            special = "list"
        parts = []
        for f in msg["fields"]:
            info = go.get((mname, f["num"]), {"ptr": False, "omitempty": True, "inline": False})
            flags = ("r" if f["label"] == "repeated" else "") + ("p" if info["ptr"] else "") + \
                ("e" if info["omitempty"] else "") + ("i" if info["inline"] else "")
            if f["label"] == "map":
                if f["key"] != "string":
                    raise SystemExit("%s.%s: a map with a %s key" % (full, f["name"], f["key"]))
                parts.append("[%d]={%s,\"map\",%s,%s}" % (f["num"], lua_str(f["name"]), lua_str(flags),
                                                          lua_str(qualify(f["value"], pkg))))
            else:
                parts.append("[%d]={%s,%s,%s}" % (f["num"], lua_str(f["name"]), lua_str(qualify(f["type"], pkg)),
                                                  lua_str(flags)))
            if f["doc"]:
                docs.append("[%s]=%s," % (lua_str(mname + "." + f["name"]), lua_str(f["doc"])))
        if special:
            parts.append("special=%s" % lua_str(special))
        lines.append("%s={%s}," % (mname, ",".join(parts)))
        if msg["doc"]:
            docs.append("[%s]=%s," % (lua_str(mname), lua_str(msg["doc"])))
    lines.append("} }")
    docs.append("}")
    os.makedirs(os.path.join(out, "docs"), exist_ok=True)
    with open(os.path.join(out, name + ".lua"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "docs", name + ".lua"), "w") as f:
        f.write("\n".join(docs) + "\n")
    return pkg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--apimachinery", required=True)
    ap.add_argument("--out", default="lua/sandbox/k8s/proto")
    a = ap.parse_args()
    srcs = {"api": Source(a.api), "apimachinery": Source(a.apimachinery)}
    for n, s in srcs.items():
        s.name = n
    index = []
    for name, repo, d in PACKAGES:
        src = srcs[repo]
        pkg = generate(src, d, name, a.out, src.commit())
        index.append((pkg, name))
    with open(os.path.join(a.out, "index.lua"), "w") as f:
        f.write("-- generated by mk/k8s_proto.py; do not edit: proto package -> module of sandbox.k8s.proto\n")
        f.write("return {\n")
        for pkg, name in index:
            f.write("  [%s] = %s,\n" % (lua_str(pkg), lua_str(name)))
        f.write("}\n")


if __name__ == "__main__":
    main()
