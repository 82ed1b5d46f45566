// Monitoring (issue 21): the page's counts are monitor_get_cluster's
// (read through REST beside it), the GPU bar of each instance group and
// the hour's allocation chart are drawn from them; a NotReady node made
// through the cluster's Kubernetes API arrives live through /ws (the topic
// monitor:<cluster>) with its message; with 2,000 nodes the node table
// keeps the DOM small while it scrolls and moves by keyboard; screenshots
// at 1280 and 420 px, light and dark, nothing wider than the window.
import { Skip, URL, needing } from "../lib.mjs";
import { openAt } from "../clusters.mjs";
import { contrastProblems, unlabelled, waitFor } from "../api.mjs";
import { bareCluster, createNodes, kube, monitor, monitored, node } from "../monitor.mjs";

const TOOLS = ["monitor_get_cluster", "training_submit"];
const SHOTS = process.env.HYPD_SHOTS || "/tmp";
const count = (page, sel) => page.$eval(sel, (e) => Number(e.getAttribute("data-count") ?? e.textContent));

await needing(TOOLS, "monitoring: the page's counts equal monitor_get_cluster's, the GPU bars and the hour's chart are drawn", async (page, check) => {
  const { name, job, waiting } = await monitored();
  // the second job's pod waits for a GPU, and the cache has a sample or two
  await waitFor(async () => (await monitor({ cluster: name })).pending.pods >= 1, 60000, `the pod of ${waiting} Pending`);
  await waitFor(async () => ((await monitor({ cluster: name })).history || []).length >= 1, 120000, "a GPU sample in the cache's history");
  await openAt(page, `/monitor?cluster=${name}`);
  await page.waitForSelector("#glance");
  await page.waitForSelector(`#wl-pytorch tr[data-name="default/${job}"]`);
  const a = await monitor({ cluster: name });
  check(await count(page, "#glance-nodes .glance-total") === a.nodes.total, `nodes: page ${await count(page, "#glance-nodes .glance-total")}, tool ${a.nodes.total}`);
  for (const h of ["healthy", "degraded", "failed", "unknown"]) {
    const n = await count(page, `.hcount[data-health="${h}"]`);
    check(n === a.nodes.by_health[h], `${h} nodes: page ${n}, tool ${a.nodes.by_health[h]}`);
  }
  for (const k of ["requested", "free", "pending"]) {
    const n = Number(await page.textContent(`dd[data-gpus="${k}"]`));
    check(n === a.gpus[k], `GPUs ${k}: page ${n}, tool ${a.gpus[k]}`);
  }
  check(a.gpus.pending >= 1, "the pending pod's GPU is pending demand: " + a.gpus.pending);
  for (const p of ["Running", "Pending", "Succeeded", "Failed"]) {
    const n = Number(await page.textContent(`#glance-pods dd[data-phase="${p}"]`));
    check(n === a.pods.by_phase[p], `${p} pods: page ${n}, tool ${a.pods.by_phase[p]}`);
  }
  check(Number(await page.getAttribute("#nodes-table", "data-rows")) === a.nodes.items.length, "one node row per node");
  check(await page.$(`#pending-table tr[data-pod^="default/${waiting}"]`) !== null, "the pending pod is listed with the scheduler's reason");
  check(/Insufficient nvidia.com\/gpu|GPU/i.test(await page.textContent("#pending-table")), "in the scheduler's words: " + (await page.textContent("#pending-table")).slice(0, 200));
  check((await page.getAttribute(`#wl-pytorch tr[data-name="default/${job}"] a`, "href")).startsWith(`#/training/${job}`), "the PyTorch job links to its page");
  for (const g of a.instance_groups) {
    const bar = await page.$(`.gbar[data-group="${g.name}"]`);
    check(bar !== null, "a GPU bar for group " + g.name);
    if (!bar) continue;
    const [used, alloc, pend] = await bar.evaluate((e) => ["data-used", "data-allocatable", "data-pending"].map((k) => Number(e.getAttribute(k))));
    check(used === g.gpu.requested && alloc === g.gpu.allocatable && pend === (g.gpu.pending || 0), `group ${g.name}: bar ${used}/${alloc} pending ${pend}, tool ${JSON.stringify(g.gpu)}`);
    const w = await bar.$eval(".gbar-used", (e) => e.getBoundingClientRect().width);
    check(g.gpu.requested === 0 || w > 0, "the used part of the bar is drawn");
  }
  const samples = Number(await page.getAttribute("#gpu-history", "data-samples"));
  check(samples >= 1 && samples <= a.history.length + 2, `the chart has the tool's samples: ${samples} of ${a.history.length}`);
  check((await page.$$("#gpu-history svg path.line-requested, #gpu-history svg path.line-allocatable")).length === 2, "both lines are drawn");
  check(/GPUs/.test(await page.textContent("#gpu-history svg")) && /now/.test(await page.textContent("#gpu-history svg")), "the axes are labelled");
  if (!a.utilisation) check(a.utilisation_absent && (await page.textContent("#utilisation-absent")).includes(a.utilisation_absent), "without a DCGM exporter the page says why there is no utilisation");
  await page.screenshot({ path: `${SHOTS}/monitor-counts.png`, fullPage: true });
});

await needing(TOOLS, "monitoring: a NotReady node made through the Kubernetes API arrives live through /ws, failed first, with its message", async (page, check) => {
  const { name } = await monitored();
  await openAt(page, `/monitor?cluster=${name}`);
  await page.waitForSelector("#monitor-live");
  // the server sends a snapshot at subscribe: the page is live, or it says it polls
  await page.waitForSelector('#monitor-live:not([data-live="connecting"])', { timeout: 15000 }).catch(() => {});
  const live = await page.getAttribute("#monitor-live", "data-live");
  const before = Number(await page.getAttribute("#monitor-live", "data-updates"));
  // the count the page started from is the tool's (the first snapshot is in)
  const failed = (await monitor({ cluster: name })).nodes.by_health.failed;
  await page.waitForFunction((n) => Number(document.querySelector('.hcount[data-health="failed"]')?.getAttribute("data-count") ??
    document.querySelector('.hcount[data-health="failed"]')?.textContent) === n, failed, { timeout: 15000 }).catch(() => {});
  const k = await kube(name);
  await createNodes(k, [node("ext-bad", { group: "ext", ready: "False", message: "PLEG is not healthy: pleg was last seen active 3m0s ago" })]);
  await page.waitForSelector('#attention li[data-node="ext-bad"]', { timeout: 20000 });
  check(/PLEG is not healthy/.test(await page.textContent('#attention li[data-node="ext-bad"]')), "its message is shown beside it");
  // another node of the cluster may change meanwhile: the page's count is the tool's, and it counts the new one
  const now = await monitor({ cluster: name });
  const bad = now.nodes.items.find((n) => n.name === "ext-bad");
  check(bad && bad.health === "failed", "the tool counts the new node failed: " + JSON.stringify(bad && bad.health));
  const shown = await page.waitForFunction((n) => {
    const e = document.querySelector('.hcount[data-health="failed"]');
    return e && Number(e.getAttribute("data-count") ?? e.textContent) === n;
  }, now.nodes.by_health.failed, { timeout: 15000 }).then(() => true, () => false);
  // (a node another scenario failed may be replaced meanwhile: the count is the failed nodes', ext-bad among them)
  const failedNow = now.nodes.items.filter((n) => n.health === "failed").map((n) => n.name);
  check(shown && failedNow.length === now.nodes.by_health.failed && failedNow.includes("ext-bad"),
    `the page's failed count is the tool's and counts it (${failed} before; now ${now.nodes.by_health.failed}: ${failedNow.join(", ")})`);
  check(await page.$eval('#nodes-table tr.vrow', (e) => e.getAttribute("data-node")) === "ext-bad", "failed nodes come first in the table");
  const color = await page.$eval('#attention li[data-node="ext-bad"]', (e) => getComputedStyle(e).borderLeftColor);
  const red = await page.evaluate(() => { const d = document.createElement("span"); d.className = "bad-text"; document.body.append(d); const c = getComputedStyle(d).color; d.remove(); return c; });
  check(color === red, `a failed node is drawn red (${color} vs ${red})`);
  await page.screenshot({ path: `${SHOTS}/monitor-live.png`, fullPage: true });
  if (live !== "live") throw new Skip(`the server does not offer the /ws topic monitor:${name} yet (the page polled: ${live})`);
  const after = Number(await page.getAttribute("#monitor-live", "data-updates"));
  check(after > before, `the change came as a monitor.snapshot over /ws (${before} -> ${after} snapshots)`);
});

for (const width of [1280, 420]) {
  for (const scheme of ["light", "dark"]) {
    await needing([...TOOLS, "diagnose_training_job"], `monitoring and diagnostics pages at ${width} px, ${scheme}: contrast, labels, nothing wider than the window`, async (page, check) => {
      const { name, waiting } = await monitored();
      await openAt(page, `/monitor?cluster=${name}`);
      await page.waitForSelector("#glance");
      await page.waitForSelector("#gpu-history");
      const over = async (what) => {
        const px = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        check(px <= 1, `${what}: nothing wider than the window (${px} px over)`);
      };
      await page.screenshot({ path: `${SHOTS}/pages-monitor-${width}-${scheme}.png`, fullPage: true });
      await over("monitoring");
      const a11y = async (what) => {
        const low = await contrastProblems(page);
        check(low.length === 0, `${what}: text contrast at least 4.5:1 (${low.slice(0, 4).join("; ")})`);
        const bare = await unlabelled(page);
        check(bare.length === 0, `${what}: every control labelled (${bare.join(", ")})`);
      };
      await a11y("monitoring");
      await page.goto(`${URL}/#/diagnostics?cluster=${name}`);
      await page.waitForSelector(".diag-pick");
      await page.click('[data-diagnostic="diagnose_training_job"] .diag-choose');
      await page.waitForSelector("#diag-form-job");
      await page.fill("#diag-form-job", waiting);
      await page.click("#diag-form-run-diagnostic");
      await page.waitForSelector("#verdict");
      await page.screenshot({ path: `${SHOTS}/pages-diagnostics-${width}-${scheme}.png`, fullPage: true });
      await over("diagnostics");
      await a11y("diagnostics");
    }, { viewport: { width, height: 900 }, colorScheme: scheme });
  }
}

await needing(["monitor_get_cluster"], "monitoring: 2,000 nodes; scrolling the node table and moving through it by keyboard keeps the DOM small", async (page, check) => {
  // an EKS cluster of its own, with no add-ons: no DaemonSet pods for the sandbox to make
  const name = bareCluster("ui-mon-2000");
  const k = await kube(name);
  const names = Array.from({ length: 2000 }, (_, i) => "bulk-" + String(i).padStart(4, "0"));
  const t0 = Date.now();
  await createNodes(k, names.map((n, i) => node(n, i % 97 === 0 ? { ready: "False", message: `node ${n} lost its kubelet` }
    : i % 41 === 0 ? { health: "UnschedulablePendingReboot" } : {})));
  console.log(`2,000 Node objects made through POST /api/v1/nodes in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  await waitFor(async () => (await monitor({ cluster: name })).nodes.total >= 2000, 60000, "the cache to see 2,000 nodes");
  await big(page, check, name);
});

async function big(page, check, name) {
  const a = await monitor({ cluster: name });
  const t1 = Date.now();
  await openAt(page, `/monitor?cluster=${name}`);
  await page.waitForFunction((n) => Number(document.querySelector("#nodes-table")?.getAttribute("data-rows")) >= n, a.nodes.total, { timeout: 30000 });
  console.log(`the Monitoring page drew ${a.nodes.total} nodes ${((Date.now() - t1) / 1000).toFixed(1)} s after it was opened (sign-in included)`);
  check(await count(page, "#glance-nodes .glance-total") === a.nodes.total, `the page counts ${a.nodes.total} nodes`);
  const rows = () => page.$$eval("#nodes-table tr.vrow", (l) => l.length);
  const first = () => page.$eval("#nodes-table tr.vrow", (e) => Number(e.getAttribute("aria-rowindex")));
  const r0 = await rows();
  check(r0 > 5 && r0 < 60, `only the rows in view are in the DOM: ${r0} of ${a.nodes.total}`);
  check(Number(await page.getAttribute("#nodes-table table", "aria-rowcount")) === a.nodes.total + 1, "the table tells its full size (aria-rowcount)");
  const t2 = Date.now();
  await page.$eval("#nodes-table", (e) => { e.scrollTop = 36 * 1200; });
  await page.waitForFunction(() => Number(document.querySelector("#nodes-table tr.vrow")?.getAttribute("aria-rowindex")) > 1000);
  console.log(`a scroll to row 1,200 drew in ${Date.now() - t2} ms`);
  check(await rows() < 60, "after a scroll to row 1,200, still few rows: " + await rows());
  check(await first() > 1000 && await first() < 1300, "the rows drawn are those in view: from " + await first());
  await page.focus("#nodes-table");
  await page.keyboard.press("End");
  await page.waitForFunction((n) => document.activeElement && document.activeElement.getAttribute("aria-rowindex") === String(n + 1), a.nodes.total);
  check(await rows() < 60, "End: the last row in focus, few rows drawn");
  const focused = () => page.evaluate(() => Number(document.activeElement && document.activeElement.getAttribute("aria-rowindex")));
  await page.keyboard.press("PageUp");
  await page.waitForFunction((n) => Number(document.activeElement?.getAttribute("aria-rowindex")) < n + 1, a.nodes.total);
  const up = await focused();
  await page.keyboard.press("ArrowUp");
  await page.waitForFunction((u) => Number(document.activeElement?.getAttribute("aria-rowindex")) === u - 1, up);
  check(up > a.nodes.total - 30 && await focused() === up - 1, `Page Up and the arrows move the focus: rows ${up}, ${await focused()}`);
  await page.keyboard.press("Home");
  await page.waitForFunction(() => document.activeElement && document.activeElement.getAttribute("aria-rowindex") === "2", null, { timeout: 10000 })
    .catch(async () => { throw new Error("Home: the focus is on " + await page.evaluate(() => document.activeElement.outerHTML.slice(0, 120))); });
  check(await page.evaluate(() => document.activeElement.getAttribute("data-health")) === "failed", "Home: the first row, a failed node");
  await page.click('.hcount[data-health="degraded"]');
  await page.waitForFunction(() => location.hash.includes("health=degraded"));
  const deg = a.nodes.by_health.degraded;
  await page.waitForFunction((n) => Number(document.querySelector("#nodes-table")?.getAttribute("data-rows")) === n, deg);
  check(deg > 0 && (await page.$$eval("#nodes-table tr.vrow", (l) => l.every((e) => e.getAttribute("data-health") === "degraded"))), `the degraded filter (in the URL) shows the ${deg} degraded nodes`);
  await page.click('.hcount[data-health="degraded"]');
  await page.waitForFunction((n) => Number(document.querySelector("#nodes-table")?.getAttribute("data-rows")) === n, a.nodes.total);
  await page.$eval("#mon-nodes", (e) => e.scrollIntoView());
  await page.$eval("#nodes-table", (e) => { e.scrollTop = 36 * 600; });
  await page.screenshot({ path: `${SHOTS}/monitor-2000-nodes.png`, fullPage: false });
}
