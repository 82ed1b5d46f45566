"""deploy/cloudformation/hypd.yaml against what the management environment
must be (TAP): it parses, it embeds exactly `hypd iam-policy`'s policy, the
host is reachable only through Systems Manager (no inbound rule, IMDSv2 with
hop limit 1, an encrypted root volume), the shared bucket is encrypted,
versioned, private and TLS only, the outputs hold the port-forwarding command
and no secret, mk/cfn_policy.sh rewrites only the policy, and cfn-lint finds
no error where the machine's python3 has it."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEMPLATE = os.path.join(ROOT, "deploy", "cloudformation", "hypd.yaml")
HYPD = os.path.join(ROOT, os.environ.get("HYPD_BUILD", "build"), "hypd")
PORT_FORWARD = ("aws ssm start-session --target ${Host} --document-name AWS-StartPortForwardingSession "
                "--parameters '{\"portNumber\":[\"3099\"],\"localPortNumber\":[\"3099\"]}' --region ${AWS::Region}")

t = tap.Tap()
try:
    import cfn_yaml
except ImportError as e:
    t.skip("the template parses as YAML", "python3 has no PyYAML (%s)" % e)
    t.finish()

try:
    tpl = cfn_yaml.load(TEMPLATE)
    t.ok(isinstance(tpl, dict) and isinstance(tpl.get("Resources"), dict), "the template parses as YAML")
except Exception as e:  # a parse error is the failure this check reports
    t.ok(False, "the template parses as YAML", str(e))
    t.finish()
res = tpl["Resources"]


def of_type(kind):
    return {k: v for k, v in res.items() if v.get("Type") == kind}


def props(name):
    return res.get(name, {}).get("Properties", {})


# the policy
gen = subprocess.run([HYPD, "iam-policy"], capture_output=True, text=True)
role = props("HostRole")
embedded = [p["PolicyDocument"] for p in role.get("Policies", []) if p.get("PolicyName") == "hypd"]
if gen.returncode != 0:
    t.ok(False, "the embedded policy is hypd iam-policy's", "hypd iam-policy exited %d" % gen.returncode)
else:
    want = json.loads(gen.stdout)
    t.ok(len(embedded) == 1 and embedded[0] == want, "the embedded policy is hypd iam-policy's",
         "the template's policy is stale: run `make deploy-template` (mk/cfn_policy.sh) and commit the template")
# IAM counts a role's inline policies together, whitespace aside, against 10,240 characters
size = sum(len(json.dumps(d, separators=(",", ":"))) for d in embedded)
t.ok(0 < size <= 10240, "the role's inline policy fits IAM's 10,240-character quota (%d characters)" % size,
     "split the policy into AWS::IAM::ManagedPolicy resources (6,144 characters each)")
t.ok(not re.match(r"hypd-", str(role.get("RoleName", {}).get("Fn::Sub", ""))),
     "the host's role is named outside hypd-*, so the policy cannot change it")
t.ok(any("AmazonSSMManagedInstanceCore" in json.dumps(a) for a in role.get("ManagedPolicyArns", [])),
     "the host's role has AmazonSSMManagedInstanceCore")
t.ok(role.get("AssumeRolePolicyDocument", {}).get("Statement", [{}])[0].get("Principal") ==
     {"Service": "ec2.amazonaws.com"}, "only EC2 assumes the host's role")

# the host
sgs = of_type("AWS::EC2::SecurityGroup")
t.ok(len(sgs) == 1 and all("SecurityGroupIngress" not in v.get("Properties", {}) for v in sgs.values())
     and not of_type("AWS::EC2::SecurityGroupIngress"), "the security group has no inbound rule at all")
hosts = of_type("AWS::EC2::Instance")
host = props("Host")
t.ok(list(hosts) == ["Host"] and host.get("SecurityGroupIds") == [{"Fn::GetAtt": ["HostSecurityGroup", "GroupId"]}],
     "the one instance is in that security group only")
t.ok(host.get("IamInstanceProfile") == {"Ref": "HostInstanceProfile"} and
     props("HostInstanceProfile").get("Roles") == [{"Ref": "HostRole"}], "the instance's profile holds the host role")
md = host.get("MetadataOptions", {})
t.ok(md.get("HttpTokens") == "required" and md.get("HttpPutResponseHopLimit") == 1,
     "IMDSv2 is required with a hop limit of 1", json.dumps(md))
bdm = host.get("BlockDeviceMappings", [])
t.ok(len(bdm) >= 1 and bdm[0].get("DeviceName") == "/dev/xvda" and
     all(b.get("Ebs", {}).get("Encrypted") is True for b in bdm), "the root volume (/dev/xvda) is encrypted")
user_data = host.get("UserData", {}).get("Fn::Base64", {}).get("Fn::Sub", "")
t.ok("install -m 0644 deploy/systemd/hypd.service /etc/systemd/system/hypd.service" in user_data and
     "systemctl enable --now hypd" in user_data and "make build/hypd" in user_data and
     "amazon-ssm-agent" in user_data, "UserData builds hypd with the Makefile and installs deploy/systemd/hypd.service")
t.ok(re.search(r"token create[^\n]*\\\n[^\n]*>/root/hypd-admin-token", user_data) and "umask 077" in user_data,
     "UserData writes the first admin token to a file only root reads")

# the shared bucket
buckets = of_type("AWS::S3::Bucket")
b = props("SharedBucket")
sse = b.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [{}])
t.ok(list(buckets) == ["SharedBucket"] and
     sse[0].get("ServerSideEncryptionByDefault", {}).get("SSEAlgorithm") in ("AES256", "aws:kms"),
     "the shared bucket is encrypted")
t.ok(b.get("VersioningConfiguration") == {"Status": "Enabled"}, "the shared bucket is versioned")
pab = b.get("PublicAccessBlockConfiguration", {})
t.ok(sorted(pab) == ["BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"] and
     all(v is True for v in pab.values()), "the shared bucket blocks all public access")
t.ok(re.match(r"hypd-", b.get("BucketName", {}).get("Fn::Sub", "")), "the shared bucket's name starts hypd-")
bp = [v["Properties"] for v in of_type("AWS::S3::BucketPolicy").values()
      if v["Properties"].get("Bucket") == {"Ref": "SharedBucket"}]
denies = [s for p in bp for s in p["PolicyDocument"]["Statement"]
          if s.get("Effect") == "Deny" and s.get("Principal") == "*" and s.get("Action") == "s3:*" and
          s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}]
t.ok(len(denies) == 1 and {"Fn::GetAtt": ["SharedBucket", "Arn"]} in denies[0]["Resource"] and
     {"Fn::Sub": "${SharedBucket.Arn}/*"} in denies[0]["Resource"],
     "the bucket policy denies every request without TLS, on the bucket and its objects")

# the outputs
outs = tpl.get("Outputs", {})
t.ok(outs.get("PortForwardCommand", {}).get("Value") == {"Fn::Sub": PORT_FORWARD},
     "the outputs hold the SSM port-forwarding command to 3099", json.dumps(outs.get("PortForwardCommand")))
text = json.dumps(outs)
refs = set(re.findall(r"\$\{([^}]+)\}", text)) | set(re.findall(r'"Ref": "([^"]+)"', text))
refs |= {g[0] for g in re.findall(r'"Fn::GetAtt": \["([^"]+)", "([^"]+)"\]', text)}
params = tpl.get("Parameters", {})
t.ok(not re.search(r"hypd_[A-Za-z0-9_-]{20,}", text) and
     all(not params.get(r, {}).get("NoEcho") for r in refs) and "FirstAdminToken" in outs and
     "/root/hypd-admin-token" in outs["FirstAdminToken"]["Value"],
     "the outputs say where the first admin token is, and hold no token or secret parameter", ", ".join(sorted(refs)))

# the generator rewrites exactly the policy section, and a stale one is caught
with tempfile.TemporaryDirectory() as d:
    copy = os.path.join(d, "hypd.yaml")
    shutil.copy(TEMPLATE, copy)
    fake = os.path.join(d, "fake-hypd")
    with open(fake, "w") as f:
        f.write('#!/bin/sh\necho \'{"Version": "2012-10-17", "Statement": []}\'\n')
    os.chmod(fake, 0o755)
    gen_sh = os.path.join(ROOT, "mk", "cfn_policy.sh")
    r1 = subprocess.run([gen_sh, copy], env=dict(os.environ, HYPD=fake), capture_output=True, text=True)
    stale = cfn_yaml.load(copy)
    r2 = subprocess.run([gen_sh, copy], env=dict(os.environ, HYPD=HYPD), capture_output=True, text=True)
    with open(copy) as a, open(TEMPLATE) as b2:
        same = a.read() == b2.read()
    stale_doc = stale["Resources"]["HostRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    t.ok(r1.returncode == 0 and r2.returncode == 0 and stale_doc == {"Version": "2012-10-17", "Statement": []} and
         stale["Outputs"] == tpl["Outputs"] and same,
         "mk/cfn_policy.sh rewrites only the policy, and regenerating gives the committed template",
         r1.stderr + r2.stderr)

# cfn-lint, where this python3 has it
try:
    import cfnlint  # noqa: F401
    # the cfn-lint command's own entry point, with this python3
    run = "import sys; from cfnlint.runner import main; sys.argv[0] = 'cfn-lint'; main()"
    lint = subprocess.run([sys.executable, "-c", run, "--format", "parseable", TEMPLATE], capture_output=True, text=True)
    errors = [ln for ln in lint.stdout.splitlines() if re.search(r":E\d+:", ln)]
    # cfn-lint's exit status is bits: 2 errors, 4 warnings, 8 informational (1: it failed to run);
    # warnings and informational findings are shown, not failed
    t.ok(not errors and lint.returncode & ~12 == 0, "cfn-lint finds no error",
         "\n".join(errors) or lint.stderr)
    for ln in lint.stdout.splitlines():
        if not re.search(r":E\d+:", ln):
            t.comment("cfn-lint: " + ln[:200])
except ImportError:
    deb = subprocess.run(["sh", "-c", "apt-cache policy cfn-lint python3-cfn-lint 2>/dev/null"],
                         capture_output=True, text=True).stdout.strip()
    t.skip("cfn-lint finds no error", "python3 has no cfnlint module" +
           (" and Debian 12 packages no cfn-lint" if not deb else " (apt-get install python3-cfn-lint)"))
t.finish()
