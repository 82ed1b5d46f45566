// What the Monitoring and Diagnostics scenarios (scenarios/97-*.mjs) share:
// one training cluster with two jobs of one GPU on its one GPU node (one
// runs, the other waits for a GPU: pending demand, a finding), made once;
// the cluster's sandbox Kubernetes API (its address, CA and token from
// hypd kubeconfig and eks-token with the sandbox's AWS environment, which
// `hypd serve --sandbox` prints); Node objects made in bulk; and
// monitor_get_cluster read through REST.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import https from "node:https";
import { dirname } from "node:path";
import { call, waitOperation } from "./clusters.mjs";
import { slowRecipe, trainingCluster } from "./workloads.mjs";
import { rest } from "./api.mjs";

let made = null;
// monitored() -> {name, job, waiting}: the cluster "hypd-ui-mon" (one
// ml.g5.2xlarge node, one GPU) with the jobs "mon-job" (running) and
// "mon-wait" (its pod Pending: no GPU left), both slow-torchrun of 1 GPU
export async function monitored() {
  if (made) return made;
  const name = await trainingCluster("ui-mon");
  await slowRecipe();
  for (const job of ["mon-job", "mon-wait"]) {
    const r = await call("training_submit", { cluster: name, recipe: "slow-torchrun",
      params: { job_name: job, instance_type: "ml.g5.2xlarge", script: "scripts/train.py", gpus_per_node: 1, steps: 100000 } });
    const v = await waitOperation(r.operation_id, 300);
    if (v.status !== "succeeded") throw new Error(`training_submit ${job}: ${v.status} (${v.phase})`);
  }
  made = { name, job: "mon-job", waiting: "mon-wait" };
  return made;
}

// monitor(params) -> monitor_get_cluster's answer (REST)
export async function monitor(params) {
  const r = await rest("/tools/monitor_get_cluster", { body: params });
  if (r.status !== 200) throw new Error("monitor_get_cluster: HTTP " + r.status + " " + JSON.stringify(r.body).slice(0, 300));
  return r.body;
}

// the sandbox's AWS environment, as hypd serve printed it
function awsEnv() {
  const out = readFileSync(process.env.HYPD_SERVE_OUT, "utf8");
  const env = {};
  for (const m of out.matchAll(/export (AWS_[A-Z_]+)=(\S+)/g)) env[m[1]] = m[2];
  if (!env.AWS_ENDPOINT_URL) throw new Error("hypd serve printed no sandbox environment");
  return env;
}

const kubes = new Map();
// kube(cluster) -> {call(method, path, body) -> {status, body}}: the
// cluster's EKS API with the token `hypd eks-token` makes (what its
// kubeconfig's exec plugin runs), trusting the cluster's CA
export async function kube(cluster) {
  if (kubes.has(cluster)) return kubes.get(cluster);
  const st = await call("cluster_get_status", { cluster });
  const eks = (st.eks && st.eks.name) || cluster;
  const dir = mkdtempSync(dirname(process.env.HYPD_STATE) + "/kube.");
  const env = { PATH: process.env.PATH, HOME: dir, HYPD_STATE: dir + "/state", ...awsEnv() };
  const run = (args) => execFileSync(process.env.HYPD, args, { env, stdio: ["ignore", "pipe", "pipe"] }).toString();
  const kc = run(["kubeconfig", "--cluster", eks]);
  const server = kc.match(/server: (\S+)/)[1];
  const ca = Buffer.from(kc.match(/certificate-authority-data: (\S+)/)[1], "base64");
  const token = JSON.parse(run(["eks-token", "--cluster", eks, "--region", env.AWS_REGION])).status.token;
  const agent = new https.Agent({ ca, keepAlive: true, maxSockets: 8 });
  const k = {
    call: (method, path, body) => new Promise((resolve, reject) => {
      const req = https.request(server + path, { method, agent, headers: { authorization: "Bearer " + token, accept: "application/json",
        ...(body ? { "content-type": "application/json" } : {}) } }, (res) => {
        let text = "";
        res.on("data", (c) => { text += c; });
        res.on("end", () => { let b = null; try { b = JSON.parse(text); } catch { b = text; } resolve({ status: res.statusCode, body: b }); });
      });
      req.on("error", reject);
      req.end(body ? JSON.stringify(body) : undefined);
    }),
  };
  kubes.set(cluster, k);
  return k;
}

// node(name, o) -> a Node object as a HyperPod node reads (its group's label,
// GPUs and EFA); o.ready "False" with o.message: a NotReady one
export function node(name, { group = "bulk", type = "ml.p5.48xlarge", gpus = 8, ready = "True", message, health = "Schedulable" } = {}) {
  const res = { "nvidia.com/gpu": String(gpus), "vpc.amazonaws.com/efa": "32", cpu: "192", memory: "2048Gi", pods: "110" };
  return { apiVersion: "v1", kind: "Node",
    metadata: { name, labels: { "sagemaker.amazonaws.com/instance-group-name": group, "node.kubernetes.io/instance-type": type,
      "sagemaker.amazonaws.com/node-health-status": health, "kubernetes.io/hostname": name } },
    spec: ready === "True" ? {} : { taints: [{ key: "node.kubernetes.io/not-ready", effect: "NoSchedule" }] },
    status: { capacity: res, allocatable: res, conditions: [{ type: "Ready", status: ready,
      reason: ready === "True" ? "KubeletReady" : "KubeletNotReady", message: message || (ready === "True" ? "kubelet is posting ready status" : "not ready") }] } };
}

// createNodes(k, nodes): POST /api/v1/nodes for each, 8 at a time; one
// that exists already is left as it is
export async function createNodes(k, nodes) {
  let i = 0;
  const one = async () => {
    while (i < nodes.length) {
      const n = nodes[i++];
      const r = await k.call("POST", "/api/v1/nodes", n);
      if (r.status !== 201 && r.status !== 409) throw new Error(`POST node ${n.metadata.name}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, one));
}

// settled(cluster, seconds) -> seconds it took until monitor_get_cluster's
// pod and node totals held still for 3 s (the DaemonSets' pods of new nodes made)
export async function settled(cluster, seconds = 240) {
  const t0 = Date.now();
  let last = null, same = 0;
  while (Date.now() - t0 < seconds * 1000) {
    const a = await monitor({ cluster });
    const now = `${a.nodes.total}/${a.pods.total}`;
    same = now === last ? same + 1 : 0;
    last = now;
    if (same >= 3) return (Date.now() - t0) / 1000;
    await new Promise((f) => setTimeout(f, 1000));
  }
  throw new Error(`the cluster's pods did not settle in ${seconds} s (${last})`);
}

// deleteNodes(k, names): DELETE each node, 8 at a time
export async function deleteNodes(k, names) {
  let i = 0;
  const one = async () => { while (i < names.length) await k.call("DELETE", "/api/v1/nodes/" + names[i++]); };
  await Promise.all(Array.from({ length: 8 }, one));
}

// bareCluster(name) -> name: an EKS cluster made straight through the
// sandbox's AWS API with boto3 (its role, VPC and two subnets first), with
// no add-on and no HyperPod: Node objects made on it have no DaemonSet
// pods, so 2,000 of them cost the shared sandbox little
const BARE = `
import boto3, json, sys
name = sys.argv[1]
iam, ec2, eks = (boto3.client(s) for s in ("iam", "ec2", "eks"))
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
role = iam.create_role(RoleName=name + "-eks", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
vpc = ec2.create_vpc(CidrBlock="10.211.0.0/16")["Vpc"]["VpcId"]
subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.211.%d.0/24" % i, AvailabilityZone=z)["Subnet"]["SubnetId"]
           for i, z in enumerate(["us-west-2a", "us-west-2b"])]
eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets}, accessConfig={"authenticationMode": "API"})
eks.get_waiter("cluster_active").wait(name=name, WaiterConfig={"Delay": 1, "MaxAttempts": 600})
`;
let bare = null;
export function bareCluster(name) {
  if (bare) return bare;
  execFileSync("python3", ["-c", BARE, name], { env: { PATH: process.env.PATH, HOME: dirname(process.env.HYPD_STATE), ...awsEnv() },
    stdio: ["ignore", "pipe", "pipe"], timeout: 600000 });
  bare = name;
  return name;
}
