// @kubernetes/client-node (pinned at 1.4.0 in package-lock.json) against a
// sandbox EKS cluster through the kubeconfig `hypd kubeconfig` wrote: the
// cluster's CA from certificate-authority-data, a bearer token from the exec
// plugin `hypd eks-token`. The cluster is the one tests/tools/hyperpod_cluster.py
// builds (two ml.g5.12xlarge HyperPod nodes, the training operator's add-ons).
//
// usage: node client.mjs KUBECONFIG
// Prints one line per check, "ok - WHAT" or "not ok - WHAT # WHY" (run.sh
// numbers them); exits 0 unless the harness itself breaks.
import * as k8s from "@kubernetes/client-node";

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(k8s.CoreV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);

const NS = "default";
const HP_LABEL = "sagemaker.amazonaws.com/compute-type";

function why(e) {
  if (e instanceof k8s.ApiException) {
    const b = typeof e.body === "string" ? e.body : JSON.stringify(e.body);
    return `ApiException ${e.code}: ${(b || "").slice(0, 300)}`;
  }
  return String((e && e.stack) || e).split("\n").slice(0, 3).join(" | ");
}
function oneLine(s) { return String(s).replace(/\s+/g, " ").trim(); }

// check(WHAT, FN): FN throws (or rejects) with the reason on failure
async function check(what, fn) {
  try {
    await fn();
    console.log(`ok - ${what}`);
  } catch (e) {
    console.log(`not ok - ${what} # ${oneLine(why(e))}`);
  }
}
function expect(cond, msg) { if (!cond) throw new Error(msg); }
// canon(V): V as JSON with object keys sorted (a map's order is no contract)
function canon(v) {
  if (Array.isArray(v)) return `[${v.map(canon).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}
function eq(got, want, what) {
  const g = canon(got), w = canon(want);
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`);
}
// expect404(PROMISE, WHAT): the call fails with ApiException code 404
async function expect404(p, what) {
  try {
    await p;
  } catch (e) {
    if (e instanceof k8s.ApiException) {
      eq(e.code, 404, `${what}: ApiException code`);
      const body = typeof e.body === "string" ? JSON.parse(e.body) : e.body;
      eq([body && body.kind, body && body.reason], ["Status", "NotFound"], `${what}: body`);
      return;
    }
    throw e;
  }
  throw new Error(`${what} succeeded`);
}

await check("VersionApi.getCode: the cluster's Kubernetes version (v1.34 on EKS)", async () => {
  const v = await kc.makeApiClient(k8s.VersionApi).getCode();
  expect(/^v1\.34\.\d+-eks-/.test(v.gitVersion), `gitVersion ${v.gitVersion}`);
});

await check("CoreV1Api.listNode: 2 HyperPod nodes, 4 nvidia.com/gpu each", async () => {
  const l = await core.listNode();
  eq(l.items.length, 2, "nodes");
  for (const n of l.items) {
    eq(n.metadata.labels[HP_LABEL], "hyperpod", `${n.metadata.name} ${HP_LABEL}`);
    eq(n.metadata.labels["node.kubernetes.io/instance-type"], "ml.g5.12xlarge", `${n.metadata.name} instance type`);
    eq(n.status.capacity["nvidia.com/gpu"], "4", `${n.metadata.name} nvidia.com/gpu capacity`);
    const ready = (n.status.conditions || []).find((c) => c.type === "Ready");
    eq(ready && ready.status, "True", `${n.metadata.name} Ready`);
  }
});

await check("CoreV1Api.listNamespacedPod: cert-manager's pods are Running", async () => {
  const l = await core.listNamespacedPod({ namespace: "cert-manager" });
  expect(l.items.length > 0, "no pods in cert-manager");
  for (const p of l.items) eq(p.status.phase, "Running", `${p.metadata.name} phase`);
  expect(l.items.some((p) => p.metadata.name.startsWith("cert-manager-")), "no cert-manager-* pod");
});

await check("CoreV1Api.listNode with a labelSelector selects the HyperPod nodes", async () => {
  const l = await core.listNode({ labelSelector: `${HP_LABEL}=hyperpod` });
  eq(l.items.length, 2, "selected nodes");
  const none = await core.listNode({ labelSelector: `${HP_LABEL}=nothing` });
  eq(none.items.length, 0, "nodes matching nothing");
});

await check("CoreV1Api: create, read and delete a ConfigMap; a read after the delete is ApiException 404", async () => {
  const name = "kn-settings";
  const body = { metadata: { name, labels: { app: "kn" } }, data: { lr: "3e-4", epochs: "2" } };
  try {
    const made = await core.createNamespacedConfigMap({ namespace: NS, body });
    eq([made.metadata.name, made.metadata.namespace], [name, NS], "created");
    expect(made.metadata.uid && made.metadata.resourceVersion, "no uid or resourceVersion");
    const got = await core.readNamespacedConfigMap({ name, namespace: NS });
    eq(got.data, { lr: "3e-4", epochs: "2" }, "data read back");
    eq(got.metadata.uid, made.metadata.uid, "uid read back");
    await core.deleteNamespacedConfigMap({ name, namespace: NS });
    await expect404(core.readNamespacedConfigMap({ name, namespace: NS }), "read after delete");
  } finally {
    await core.deleteNamespacedConfigMap({ name, namespace: NS }).catch(() => {});
  }
});

const HPJ = {
  apiVersion: "sagemaker.amazonaws.com/v1",
  kind: "HyperPodPyTorchJob",
  metadata: { name: "kn-llama" },
  spec: {
    nprocPerNode: "4",
    replicaSpecs: [{
      name: "pods",
      replicas: 2,
      template: {
        spec: {
          containers: [{
            name: "pytorch",
            image: "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:latest",
            resources: { limits: { "nvidia.com/gpu": 4 } },
          }],
        },
      },
    }],
    runPolicy: { jobMaxRetryCount: 3, cleanPodPolicy: "None" },
  },
};
const HPJ_REF = { group: "sagemaker.amazonaws.com", version: "v1", namespace: NS, plural: "hyperpodpytorchjobs" };

await check("CustomObjectsApi: create a HyperPodPyTorchJob, get it, list it and delete it", async () => {
  const name = "kn-llama";
  try {
    const made = await custom.createNamespacedCustomObject({ ...HPJ_REF, body: HPJ });
    eq([made.kind, made.metadata.name, made.metadata.namespace], ["HyperPodPyTorchJob", name, NS], "created");
    const got = await custom.getNamespacedCustomObject({ ...HPJ_REF, name });
    eq(got.apiVersion, "sagemaker.amazonaws.com/v1", "apiVersion");
    eq(got.spec.replicaSpecs[0].replicas, 2, "spec.replicaSpecs[0].replicas");
    eq(got.spec.nprocPerNode, "4", "spec.nprocPerNode");
    const l = await custom.listNamespacedCustomObject(HPJ_REF);
    expect(l.items.some((j) => j.metadata.name === name), `${name} not in the list`);
    await custom.deleteNamespacedCustomObject({ ...HPJ_REF, name });
    await expect404(custom.getNamespacedCustomObject({ ...HPJ_REF, name }), "get after delete");
  } finally {
    await custom.deleteNamespacedCustomObject({ ...HPJ_REF, name }).catch(() => {});
  }
});

await check("CustomObjectsApi: a missing HyperPodPyTorchJob is ApiException 404", async () => {
  await expect404(custom.getNamespacedCustomObject({ ...HPJ_REF, name: "no-such-job" }), "get");
});

await check("Watch on configmaps: ADDED for a ConfigMap created after the watch starts", async () => {
  const name = "kn-watched";
  const list = await core.listNamespacedConfigMap({ namespace: NS });
  const rv = list.metadata.resourceVersion;
  expect(rv, "the list has no resourceVersion");
  let seen, fail, controller, bookmarks = 0;
  const added = new Promise((resolve, reject) => {
    seen = resolve;
    fail = reject;
  });
  added.catch(() => {}); // handled by the await below, even when it ends early
  const timer = setTimeout(() => fail(new Error("no ADDED event in 15 s")), 15000);
  try {
    controller = await new k8s.Watch(kc).watch(
      `/api/v1/namespaces/${NS}/configmaps`,
      { resourceVersion: rv, allowWatchBookmarks: true },
      (type, obj) => {
        if (type === "BOOKMARK") bookmarks++;
        if (type === "ADDED" && obj && obj.metadata && obj.metadata.name === name) seen(obj);
      },
      (err) => fail(new Error(`the watch ended before the event: ${err ? why(err) : "closed"}`)),
    );
    await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name }, data: { k: "v" } } });
    const obj = await added;
    eq(obj.data, { k: "v" }, "the event's object data");
    // a quiet watch gets a bookmark now and then (a minute apart), not a flood
    if (bookmarks > 2) throw new Error(`${bookmarks} BOOKMARK events in a few seconds`);
  } finally {
    clearTimeout(timer);
    if (controller) controller.abort();
    console.log(`watch: ${bookmarks} BOOKMARK events while it was open`);
    await core.deleteNamespacedConfigMap({ name, namespace: NS }).catch(() => {});
  }
});

await check("CoreV1Api.readNamespacedPod of a missing pod is ApiException 404", async () => {
  await expect404(core.readNamespacedPod({ name: "no-such-pod", namespace: NS }), "read");
});
