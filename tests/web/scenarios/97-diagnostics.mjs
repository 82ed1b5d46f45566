// Diagnostics (issue 21): the page runs a diagnostic from its form and
// shows its findings with their evidence quoted; a suggested step opens its
// tool's form prefilled with the step's arguments, and Run asks for a
// confirmation that names the call before anything runs (Keep it runs
// nothing). The training job: a second job of one GPU on a one-GPU
// cluster, its pod Pending (POD_PENDING_GPU, a hyperpod_scale_instance_group
// step). A node whose deep health check failed (the sandbox fault
// node_health): diagnose_node_health's finding, whose replace step asks
// for the name typed in.
import { needing } from "../lib.mjs";
import { openAt } from "../clusters.mjs";
import { rest, waitFor } from "../api.mjs";
import { monitored } from "../monitor.mjs";

const SHOTS = process.env.HYPD_SHOTS || "/tmp";

async function faults(spec) {
  const r = await fetch(process.env.HYPD_SANDBOX + "/_sandbox/faults", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(spec) });
  if (!r.ok) throw new Error("sandbox faults: HTTP " + r.status + " " + await r.text());
}

// run(page): Run diagnostic, then its verdict drawn (answers the findings' codes)
async function run(page) {
  await page.click("#diag-form-run-diagnostic");
  await page.waitForSelector("#verdict");
  return page.$$eval("#findings .finding", (l) => l.map((e) => e.getAttribute("data-code")));
}

await needing(["diagnose_training_job", "training_submit", "hyperpod_scale_instance_group"], "diagnostics: a job's pending pod is a finding with its evidence; the scale step opens prefilled and asks before it runs", async (page, check) => {
  const { name, waiting: job } = await monitored();
  await openAt(page, `/diagnostics?cluster=${name}&tool=diagnose_training_job&job=${job}`);
  await page.waitForSelector("#diag-form-job");
  check(await page.inputValue("#diag-form-job") === job, "the job named in the URL is prefilled");
  // the scheduler may need a moment to say why the second pod waits
  let codes = [];
  await waitFor(async () => { codes = await run(page); return codes.includes("POD_PENDING_GPU"); }, 30000, "POD_PENDING_GPU");
  check(await page.getAttribute("#findings", "data-healthy") === "false", "the verdict is not healthy");
  const f = '#findings .finding[data-code="POD_PENDING_GPU"]';
  const sev = await page.getAttribute(f, "data-severity");
  const order = await page.$$eval("#findings .finding", (l) => l.map((e) => e.getAttribute("data-severity")));
  const rank = { critical: 0, warning: 1, info: 2 };
  check(order.every((s, i) => i === 0 || rank[order[i - 1]] <= rank[s]), "worst first: " + order.join(", "));
  check(["critical", "warning"].includes(sev), "POD_PENDING_GPU is " + sev);
  const quotes = await page.$$eval(`${f} pre.quote`, (l) => l.map((e) => e.textContent));
  check(quotes.some((q) => /Insufficient nvidia.com\/gpu|Unschedulable/.test(q)), "the scheduler's words are quoted: " + quotes.join(" | ").slice(0, 200));
  check(await page.$eval(`${f} pre.quote`, (e) => getComputedStyle(e).fontFamily).then((x) => /mono|Menlo|Consolas/i.test(x)), "evidence in monospace");
  const step = `${f} li[data-tool="hyperpod_scale_instance_group"]`;
  check(await page.$(step) !== null, "the scale step is offered");
  const callText = await page.textContent(`${step} code.call`);
  await page.click(`${step} .step-open`);
  await page.waitForSelector("#step-form #step-instance_count");
  const want = Number((callText.match(/instance_count:=(\d+)/) || [])[1]);
  check(want === 2 && Number(await page.inputValue("#step-form #step-instance_count")) === want, `prefilled with the step's count (${callText})`);
  check(/instance_group=(\S+)/.test(callText) && (await page.inputValue("#step-form #step-instance_group")) === callText.match(/instance_group=(\S+)/)[1], "and its group");
  // earlier scenarios scaled groups of their own: what counts is that none is added here
  const before = ((await rest("/operations?tool=hyperpod_scale_instance_group")).body.operations || []).length;
  await page.click("#step-form #step-run");
  await page.waitForSelector("dialog[open] .confirm-items");
  const items = await page.$$eval("dialog[open] .confirm-items li", (l) => l.map((x) => x.textContent));
  check(items.includes("instance_count = 2"), "the confirmation names the call: " + items.join(", "));
  await page.screenshot({ path: `${SHOTS}/diagnostics-confirm.png` });
  await page.click('dialog[open] button:has-text("Keep it")');
  await page.waitForSelector("dialog[open]", { state: "detached" }).catch(() => {});
  const ops = await rest("/operations?tool=hyperpod_scale_instance_group");
  check((ops.body.operations || []).length === before, "Keep it: nothing ran");
  await page.screenshot({ path: `${SHOTS}/diagnostics-training.png`, fullPage: true });
});

await needing(["diagnose_node_health", "training_submit", "hyperpod_node_replace"], "diagnostics: a node whose deep health check failed is a critical finding; its replace step asks for the name typed in", async (page, check) => {
  const { name } = await monitored();
  const st = await rest("/tools/cluster_get_status", { body: { cluster: name } });
  const hp = st.body.hyperpod.name;
  const nodes = await rest("/tools/hyperpod_list_nodes", { body: { cluster: name } });
  const bad = nodes.body.nodes[0].node_name;
  // the health agent's verdict, through the sandbox's faults (its admin endpoint)
  await faults({ node_health: [{ cluster: hp, node: bad, deep_health: "Failed" }] });
  try {
    await openAt(page, `/diagnostics?cluster=${name}&tool=diagnose_node_health&node=${bad}`);
    await page.waitForSelector("#diag-form-node");
    let codes = [];
    await waitFor(async () => { codes = await run(page); return codes.length > 0; }, 30000, "a finding");
    const f = "#findings .finding";
    check(await page.getAttribute(f, "data-severity") === "critical", "the first finding is critical: " + codes.join(", "));
    check((await page.textContent(f)).includes(bad), "about the node");
    check((await page.$$eval(`${f} pre.quote`, (l) => l.map((e) => e.textContent))).some((q) => q.includes("Failed")), "the deep-health label quoted");
    const steps = await page.$$eval(`${f} .next li`, (l) => l.map((e) => e.getAttribute("data-action")));
    check(steps.join(" ") === steps.slice().sort((a, b) => ["inspect", "fix", "reboot", "replace"].indexOf(a) - ["inspect", "fix", "reboot", "replace"].indexOf(b)).join(" "),
      "steps in the escalation order: " + steps.join(", "));
    await page.click(`${f} li[data-tool="hyperpod_node_replace"] .step-open`);
    await page.waitForSelector("#step-form #step-run");
    await page.click("#step-form #step-run");
    await page.waitForSelector("dialog[open] #confirm-type");
    check(await page.isDisabled('dialog[open] button[type="submit"]'), "Run waits for the name typed in");
    await page.screenshot({ path: `${SHOTS}/diagnostics-replace-confirm.png` });
    await page.click('dialog[open] button:has-text("Keep it")');
    check(((await rest("/operations?tool=hyperpod_node_replace")).body.operations || []).length === 0, "nothing ran");
  } finally {
    await faults({});
  }
});

await needing([], "diagnostics: without the tools the page says they are not available, never a made-up answer", async (page, check) => {
  const { body } = await rest("/tools");
  const have = new Set((body.tools || []).map((t) => t.name));
  await openAt(page, "/diagnostics");
  await page.waitForSelector(".diag-pick, .empty");
  for (const t of ["diagnose_node_health", "diagnose_training_job", "diagnose_cluster_creation", "diagnose_inference"]) {
    const el = await page.$(`[data-diagnostic="${t}"]`);
    if (!el) continue; // no active cluster: the page asks for one
    const marked = (await page.$(`[data-missing="${t}"]`)) !== null;
    check(marked === !have.has(t), `${t}: ${have.has(t) ? "offered" : "marked not available"}`);
  }
});
