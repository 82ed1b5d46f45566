"""Inspects a hypd sandbox's HyperPod cluster on EKS as a new user would, with
the real clients on this machine: the aws CLI, boto3 and kubectl.

usage: python3 probe.py EKS_NAME HYPERPOD_NAME KUBECONFIG [--jobs N]
(AWS_ENDPOINT_URL, the keys and the region come from the environment; the
clusters are made first, e.g. by tests/tools/hyperpod_cluster.py).

Each command is one row of a table: the client, the command, and what it
must answer (success, with the texts its output must hold, or a given
error code). Names and ids come from a first look at what exists. Each row
prints `ok`, `FAIL` (the reason and the output's first lines) or `gap` (a
row marked as a known sandbox gap: it fails as expected and is counted
apart). The last line is `aws CLI N/M, boto3 N/M, kubectl N/M, gaps N`;
the exit status is 1 when a row failed."""
import concurrent.futures
import json
import os
import subprocess
import sys

import tempfile

import boto3
import botocore.exceptions
from awscli.clidriver import create_clidriver

import probe_aws
import probe_boto3
import probe_kubectl


def discover(eks_name, hp_name):
    """The names and ids a user reads from the first answers."""
    ec2, eks, sm, logs = (boto3.client(s) for s in ("ec2", "eks", "sagemaker", "logs"))
    c = eks.describe_cluster(name=eks_name)["cluster"]
    vpc = c["resourcesVpcConfig"]["vpcId"]
    hp = sm.describe_cluster(ClusterName=hp_name)
    nodes = sm.list_cluster_nodes(ClusterName=hp_name)["ClusterNodeSummaries"]
    group = "/aws/sagemaker/Clusters/%s/%s" % (hp_name, hp["ClusterArn"].rsplit("/", 1)[1])
    streams = logs.describe_log_streams(logGroupName=group)["logStreams"]
    return {
        "eks": eks_name, "eks_arn": c["arn"], "eks_version": c["version"], "role_arn": c["roleArn"],
        "role": c["roleArn"].rsplit("/", 1)[1], "vpc": vpc, "subnets": c["resourcesVpcConfig"]["subnetIds"],
        "sg": c["resourcesVpcConfig"]["securityGroupIds"][0],
        "cluster_sg": c["resourcesVpcConfig"]["clusterSecurityGroupId"],
        "enis": [e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces(
            Filters=[{"Name": "vpc-id", "Values": [vpc]}])["NetworkInterfaces"]],
        "route_tables": [r["RouteTableId"] for r in ec2.describe_route_tables(
            Filters=[{"Name": "vpc-id", "Values": [vpc]}])["RouteTables"]],
        "addons": eks.list_addons(clusterName=eks_name)["addons"],
        "principal": eks.list_access_entries(clusterName=eks_name)["accessEntries"][0],
        "hp": hp_name, "hp_arn": hp["ClusterArn"], "group_name": hp["InstanceGroups"][0]["InstanceGroupName"],
        "node": nodes[0]["InstanceId"], "nodes": [n["InstanceId"] for n in nodes],
        "log_group": group, "log_stream": streams[0]["logStreamName"], "bucket": eks_name + "-lcc",
    }


def first_lines(text, n=4):
    return " | ".join((text or "").strip().splitlines()[:n])


def judge_shell(row, rc, out, err):
    """None when the answer is the one expected, else why not."""
    if row.get("code") is None:
        if rc != 0:
            return "exit %d: %s" % (rc, first_lines(err or out))
        for text in row.get("has", ()):
            if text not in out:
                return "the output lacks %r: %s" % (text, first_lines(out))
        for text in row.get("err_has", ()):
            if text not in err:
                return "the error output lacks %r: %s" % (text, first_lines(err))
        return None
    if rc == 0:
        return "succeeded, %s expected: %s" % (row["code"], first_lines(out))
    if row["code"] not in err + out:
        return "%s expected: %s" % (row["code"], first_lines(err or out))
    return None


def run_aws(rows, jobs):
    """The aws CLI rows' verdicts. The CLI's own entry (awscli.clidriver, what
    the `aws` script calls) runs each row in a child forked from one driver
    whose service models are loaded: a fresh `aws` process spends most of
    its second parsing them. Called before any thread starts."""
    driver = create_clidriver()
    for service in ("ec2", "eks", "iam", "sagemaker", "s3", "sts", "logs", "fsx", "ssm"):
        driver.session.get_service_model(service)
    tmp = tempfile.mkdtemp(prefix="hypd-probe-")
    running, results = {}, [None] * len(rows)

    def reap():
        pid, status = os.wait()
        n = running.pop(pid)
        with open("%s/%d.out" % (tmp, n)) as o, open("%s/%d.err" % (tmp, n)) as e:
            results[n] = judge_shell(rows[n], os.waitstatus_to_exitcode(status), o.read(), e.read())

    for n, row in enumerate(rows):
        while len(running) >= jobs:
            reap()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            os.dup2(os.open("%s/%d.out" % (tmp, n), os.O_WRONLY | os.O_CREAT), 1)
            os.dup2(os.open("%s/%d.err" % (tmp, n), os.O_WRONLY | os.O_CREAT), 2)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            try:
                rc = driver.main(row["argv"][1:])
            except BaseException:  # what the CLI lets out is its failure, as in the aws process
                import traceback
                traceback.print_exc()
                rc = 255
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc if isinstance(rc, int) else 255)
        running[pid] = n
    while running:
        reap()
    for n in range(len(rows)):
        os.remove("%s/%d.out" % (tmp, n))
        os.remove("%s/%d.err" % (tmp, n))
    os.rmdir(tmp)
    return results


def run_shell(row, env):
    p = subprocess.run(row["argv"], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return judge_shell(row, p.returncode, p.stdout, p.stderr)


def run_boto3(row):
    try:
        got = row["call"]()
    except botocore.exceptions.ClientError as e:
        code = e.response["Error"]["Code"]
        if row.get("code") == code:
            return None
        return "%s: %s" % (code, e.response["Error"].get("Message"))
    except (botocore.exceptions.WaiterError, AssertionError, KeyError, IndexError) as e:
        return "%s: %s" % (type(e).__name__, e)
    if row.get("code"):
        return "succeeded, %s expected: %s" % (row["code"], first_lines(json.dumps(got, default=str)))
    check = row.get("check")
    if check and not check(got):
        return "the answer is not the one expected: %s" % first_lines(json.dumps(got, default=str)[:400])
    return None


def verdict(row, why):
    """(word, counts as passed) of a row that failed with why (None: it passed)."""
    if row.get("gap"):
        return ("gap", False) if why else ("FAIL", False)
    return ("ok", True) if why is None else ("FAIL", False)


def main():
    args = sys.argv[1:]
    jobs = 4
    if "--jobs" in args:
        i = args.index("--jobs")
        jobs = int(args[i + 1])
        del args[i:i + 2]
    eks_name, hp_name, kubeconfig = args
    ids = discover(eks_name, hp_name)
    env = dict(os.environ)
    env.setdefault("AWS_PAGER", "")
    families = [
        ("aws CLI", probe_aws.rows(ids)),
        ("boto3", probe_boto3.rows(ids)),
        ("kubectl", probe_kubectl.rows(ids, kubeconfig, os.path.dirname(os.path.abspath(kubeconfig)))),
    ]
    totals, gaps, failed = [], 0, False
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, rows in families:
            if name == "aws CLI":
                results = run_aws(rows, jobs)
            elif name == "boto3":  # one client each, called in this thread, in order (waiters and paginators)
                results = [run_boto3(r) for r in rows]
            else:
                results = list(pool.map(lambda r: run_shell(r, env), rows))
            passed = 0
            for row, why in zip(rows, results):
                word, good = verdict(row, why)
                passed += good
                if row.get("gap") and why is None:
                    why = "marked as a gap (%s) but passes: remove the mark" % row["gap"]
                elif row.get("gap"):
                    gaps += 1
                    why = "%s (%s)" % (row["gap"], why)
                failed = failed or word == "FAIL"
                print("%-4s %s: %s%s" % (word, name, row["label"], "" if why is None else " -- " + why), flush=True)
            totals.append("%s %d/%d" % (name, passed, len(rows)))
    print(", ".join(totals) + ", gaps %d" % gaps)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
