// What the cluster scenarios (scenarios/5*-9*.mjs) share: a cluster made
// through the REST API for a scenario's setup (cluster_create, waited for),
// and the wizard's decisions filled in.
import { TOKEN, URL, signIn } from "./lib.mjs";

export async function call(tool, params) {
  const r = await fetch(`${URL}/api/v1/tools/${tool}`, { method: "POST", body: JSON.stringify(params),
    headers: { authorization: "Bearer " + TOKEN, "content-type": "application/json" } });
  const body = await r.json();
  if (!r.ok) throw new Error(`${tool}: ${JSON.stringify(body.error || body)}`);
  return body;
}

export async function waitOperation(id, seconds = 120) {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    const r = await fetch(`${URL}/api/v1/operations/${id}?wait_seconds=5`, { headers: { authorization: "Bearer " + TOKEN } });
    const v = await r.json();
    if (v.status !== "running") return v;
    if (Date.now() > end) throw new Error(`operation ${id} still running after ${seconds} s`);
  }
}

// cluster(tag, extra) -> "hypd-<tag>" once cluster_create has finished (it fails the scenario otherwise)
export async function cluster(tag, extra = {}) {
  const r = await call("cluster_create", { cluster_tag: tag, availability_zone: "us-west-2a", instance_type: "ml.g5.2xlarge", instance_count: 1, ...extra });
  const v = await waitOperation(r.operation_id);
  if (v.status !== "succeeded") throw new Error(`cluster_create ${tag}: ${v.status} (${v.phase})`);
  return "hypd-" + tag;
}

// choose(page, select, value): once the select's choices (from a read tool) hold value, pick it
export async function choose(page, select, value) {
  await page.waitForSelector(`${select} option[value="${value}"]`, { state: "attached" });
  await page.selectOption(select, value);
}

// decide(page, {tag, zone, type, count}): the wizard's decisions
export async function decide(page, opts) {
  await openAt(page, "/create");
  await decisions(page, opts);
}

// decisions(page, {tag, zone, type, count}): the same, on the wizard already open
export async function decisions(page, { tag, zone = "us-west-2a", type = "ml.g5.2xlarge", count = 1 }) {
  await page.waitForSelector("#create-form-cluster_tag");
  await page.fill("#create-form-cluster_tag", tag);
  await choose(page, "#create-form-availability_zone", zone);
  await choose(page, "#create-form-instance_type", type);
  await page.fill("#create-form-instance_count", String(count));
}

// openAt(page, hash): signed in, the shell ready (its first redirect to
// #/clusters done), then the page at hash ("/cluster/x?tab=nodes")
export async function openAt(page, hash) {
  await signIn(page);
  await page.waitForFunction(() => location.hash.startsWith("#/clusters") && document.querySelector("#nav a"));
  await page.goto(URL + "/#" + hash);
}
