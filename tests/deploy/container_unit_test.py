"""deploy/Dockerfile and deploy/systemd/hypd.service without a container
engine or a booted systemd (TAP): every file and command the Dockerfile
names exists, its build stage runs mk/deps.sh and the Makefile's
`make build/hypd`, its runtime packages are real Debian 12 packages holding
every library build/hypd links, the health check's URL answers; the unit
has its hardening keys and passes `systemd-analyze verify` where the
machine has it."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("HYPD_BUILD", "build")
HYPD = os.path.join(ROOT, BUILD, "hypd")
UNIT = os.path.join(ROOT, "deploy", "systemd", "hypd.service")
t = tap.Tap()


def dockerfile(path):
    """The Dockerfile's instructions as (stage, INSTRUCTION, argument text), continuation lines joined."""
    out, stage, cur = [], -1, ""
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not cur and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            cur += line
            word, _, rest = cur.strip().partition(" ")
            if word.upper() == "FROM":
                stage += 1
            out.append((stage, word.upper(), rest.strip()))
            cur = ""
    return out


ins = dockerfile(os.path.join(ROOT, "deploy", "Dockerfile"))
froms = [a for _, w, a in ins if w == "FROM"]
t.ok(len(froms) == 2 and froms[0].split()[0] == "debian:12-slim" and froms[0].split()[-1] == "build" and
     froms[1] == "debian:12-slim", "the Dockerfile has a build stage and a runtime stage, both debian:12-slim",
     "\n".join(froms))
build = [(w, a) for s, w, a in ins if s == 0]
final = [(w, a) for s, w, a in ins if s == 1]

# COPY sources in the context (the repository root) exist
missing = []
for w, a in build + final:
    if w != "COPY" or "--from=" in a:
        continue
    for src in shlex.split(a)[:-1]:
        if not os.path.exists(os.path.join(ROOT, src)):
            missing.append(src)
t.ok(not missing, "every COPY source exists in the repository", " ".join(missing))
cf = [a for w, a in final if w == "COPY" and "--from=build" in a]
t.ok(cf == ["--from=build /src/build/hypd /usr/local/bin/hypd"] and ("WORKDIR", "/src") in build,
     "the runtime stage takes the build stage's build/hypd")

# the build stage's commands are mk/deps.sh and the Makefile's target
runs = [a for w, a in build if w == "RUN"]
deps = os.path.join(ROOT, "mk", "deps.sh")
dry = subprocess.run(["make", "-n", "build/hypd"], cwd=ROOT, capture_output=True, text=True)
t.ok(runs == ["mk/deps.sh && rm -rf /var/lib/apt/lists/*", "make build/hypd"] and os.access(deps, os.X_OK) and
     dry.returncode == 0, "the build stage runs mk/deps.sh and the Makefile's make build/hypd",
     "\n".join(runs) + "\n" + dry.stderr)


def make_plan(cwd, build):
    """The commands `make -n` would run to build BUILD/hypd from nothing, with BUILD spelled build/."""
    # --no-print-directory: under a parent make (make test) each run would name its own directory
    r = subprocess.run(["make", "-n", "--no-print-directory", "BUILD=" + build, build + "/hypd"], cwd=cwd,
                       capture_output=True, text=True)
    return r.returncode, r.stdout.replace(build, "build").splitlines()


# the COPY sources are enough: in a directory holding only them, make plans
# the same compiles and embeds the same files as in the whole repository
with tempfile.TemporaryDirectory() as d:
    ctx = os.path.join(d, "src")
    os.mkdir(ctx)
    for w, a in build:
        if w == "COPY":
            src = shlex.split(a)[0]
            dst = os.path.join(ctx, src)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(os.path.join(ROOT, src)):
                shutil.copytree(os.path.join(ROOT, src), dst, dirs_exist_ok=True)
            else:
                shutil.copy(os.path.join(ROOT, src), dst)
    rc_repo, plan_repo = make_plan(ROOT, os.path.join(d, "fresh"))
    rc_ctx, plan_ctx = make_plan(ctx, "build")
    t.ok(rc_repo == 0 and rc_ctx == 0 and plan_ctx == plan_repo and any("embedgen" in ln for ln in plan_ctx),
         "in the build stage's files alone, make build/hypd compiles and embeds what it does in the repository",
         "\n".join(sorted(set(plan_repo) ^ set(plan_ctx)))[:3000])
with open(os.path.join(ROOT, "Makefile")) as f:
    mk = f.read()
t.ok(re.search(r"^all: \$\(BUILD\)/hypd$", mk, re.M) and re.search(r"^BUILD\s+\?= build$", mk, re.M),
     "make build/hypd is the Makefile's default target (all: $(BUILD)/hypd, BUILD ?= build)")

# the runtime packages: real Debian 12 packages, holding every library the binary links
final_run = " ".join(a for w, a in final if w == "RUN")
m = re.search(r"apt-get install (.*?)&&", final_run)
pkgs = [p for p in (m.group(1).split() if m else []) if not p.startswith("-")]
if shutil.which("apt-cache"):
    bad = [p for p in pkgs if subprocess.run(["apt-cache", "show", p], capture_output=True).returncode != 0]
    t.ok(pkgs and not bad, "the runtime packages are Debian 12 packages (apt-cache show)", " ".join(bad))
else:
    t.skip("the runtime packages are Debian 12 packages (apt-cache show)", "no apt-cache on this machine")
if shutil.which("ldd") and shutil.which("dpkg") and os.path.exists(HYPD):
    ldd = subprocess.run(["ldd", HYPD], capture_output=True, text=True).stdout
    need = {}
    for so, path in re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M):
        real = os.path.realpath(path)
        owner = ""
        for cand in (path, real, re.sub(r"^/usr", "", real), "/usr" + real if not real.startswith("/usr") else real):
            r = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True)
            if r.returncode == 0:
                owner = r.stdout.split(":")[0]
                break
        need[so] = owner
    # libc6 (libc, libm) is in every Debian image; a library's own dependencies come with its package
    direct = set(re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", HYPD], capture_output=True,
                                                               text=True).stdout)) if shutil.which("objdump") else set()
    uncovered = sorted("%s (%s)" % (so, need.get(so) or "no package") for so in direct
                       if need.get(so) not in pkgs and need.get(so) != "libc6")
    t.ok(direct and not uncovered, "the runtime packages hold every library build/hypd links (objdump NEEDED)",
         " ".join(uncovered))
else:
    t.skip("the runtime packages hold every library build/hypd links", "no ldd, dpkg or " + HYPD)

# the runtime stage's user, state, port, health check and command
env = [a for w, a in final if w == "ENV"]
t.ok(("USER", "hypd") in final and re.search(r"useradd --system .*hypd", final_run),
     "the runtime stage runs as the system user hypd")
t.ok("HYPD_STATE=/var/lib/hypd" in env and ("VOLUME", "/var/lib/hypd") in final and
     "install -d -o hypd -g hypd -m 0700 /var/lib/hypd" in final_run, "the state is the volume /var/lib/hypd (HYPD_STATE)")
t.ok(("EXPOSE", "3099") in final and ("CMD", '["serve", "--listen", "0.0.0.0:3099"]') in final and
     ("ENTRYPOINT", '["/usr/local/bin/hypd"]') in final, "it exposes 3099 and runs hypd serve --listen 0.0.0.0:3099")
hc = [a for w, a in final if w == "HEALTHCHECK"]
t.ok(len(hc) == 1 and "curl -fsS -o /dev/null http://127.0.0.1:3099/api/v1/health" in hc[0] and "curl" in pkgs,
     "HEALTHCHECK curls /api/v1/health on 127.0.0.1:3099, and the image has curl")


def health_answers():
    """Starts build/hypd serve on a free loopback port and fetches /api/v1/health without a token."""
    state = tempfile.mkdtemp(prefix="hypd-deploy.")
    p = subprocess.Popen([HYPD, "--state", state, "serve", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        url = None
        for line in p.stdout:
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if m:
                url = m.group(1)
                break
        if not url:
            return False, "serve printed no address"
        r = subprocess.run(["curl", "-fsS", "-o", "/dev/null", "-w", "%{http_code}", url + "/api/v1/health"],
                           capture_output=True, text=True, timeout=20)
        return r.returncode == 0 and r.stdout == "200", r.stdout + r.stderr
    finally:
        p.terminate()
        p.wait(timeout=30)
        shutil.rmtree(state, ignore_errors=True)


if shutil.which("curl") and os.path.exists(HYPD):
    ok, why = health_answers()
    t.ok(ok, "the health check's URL answers 200 without a token (hypd serve)", why)
else:
    t.skip("the health check's URL answers 200 without a token", "no curl or " + HYPD)

# the systemd unit
with open(UNIT) as f:
    unit = f.read()
keys = {}
for line in unit.splitlines():
    m = re.match(r"^([A-Za-z]+)=(.*)$", line)
    if m:
        keys.setdefault(m.group(1), []).append(m.group(2))
want = {"User": "hypd", "Group": "hypd", "ProtectSystem": "strict", "StateDirectory": "hypd",
        "Environment": "HYPD_STATE=/var/lib/hypd", "NoNewPrivileges": "yes", "CapabilityBoundingSet": "",
        "AmbientCapabilities": "", "PrivateTmp": "yes", "ProtectHome": "yes", "PrivateDevices": "yes",
        "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "RestrictSUIDSGID": "yes",
        "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes",
        "MemoryDenyWriteExecute": "yes", "LockPersonality": "yes", "SystemCallArchitectures": "native",
        "ExecStart": "/usr/local/bin/hypd serve --listen 127.0.0.1:3099"}
wrong = ["%s=%s (has %s)" % (k, v, keys.get(k)) for k, v in want.items() if keys.get(k) != [v]]
t.ok(not wrong, "the unit runs as hypd with its hardening keys, ExecStart serve --listen 127.0.0.1:3099",
     "\n".join(wrong))
if shutil.which("systemd-analyze") and os.path.exists(HYPD):
    with tempfile.TemporaryDirectory() as d:
        # verify checks that ExecStart's binary exists: point it at the one just built
        copy = os.path.join(d, "hypd.service")
        with open(copy, "w") as f:
            f.write(unit.replace("/usr/local/bin/hypd", HYPD))
        v = subprocess.run(["systemd-analyze", "verify", copy], capture_output=True, text=True)
        t.ok(v.returncode == 0 and not v.stderr.strip(), "systemd-analyze verify accepts the unit", v.stdout + v.stderr)
        s = subprocess.run(["systemd-analyze", "security", "--offline=yes", copy], capture_output=True, text=True)
        m = re.search(r"Overall exposure level for hypd\.service: ([0-9.]+)", s.stdout)
        if m:
            t.ok(float(m.group(1)) <= 2.0, "systemd-analyze security rates the unit's exposure 2.0 or less",
                 "exposure " + m.group(1))
        else:
            t.skip("systemd-analyze security rates the unit's exposure 2.0 or less",
                   "this systemd-analyze has no offline security check")
else:
    t.skip("systemd-analyze verify accepts the unit", "no systemd-analyze on this machine")
t.finish()
