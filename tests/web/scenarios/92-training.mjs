// Training: a recipe's generated form (a bad field refused beside it),
// Review (the objects as YAML), Submit (followed live), the job page (its
// recovery budget, pods, events, logs); and a long job's log lines arriving
// live over /ws, through a dropped socket without duplicates.
import { BAD_REQUEST, URL, needing, scenario } from "../lib.mjs";
import { call, openAt, waitOperation } from "../clusters.mjs";
import { fill, lines, slowRecipe, trainingCluster } from "../workloads.mjs";

await scenario("training: a recipe's form refuses a bad name, reviews its objects as YAML, submits; the job page shows its budget", async (page, check) => {
  const name = await trainingCluster("ui-train");
  await openAt(page, `/training?cluster=${name}`);
  await page.click('[data-recipe="pytorch-torchrun"] .recipe-pick');
  await page.waitForSelector("#recipe-form-job_name");
  check((await page.$$("#recipe-form .field.decision")).length >= 3, "the recipe's decisions are marked");
  await fill(page, "recipe-form", { job_name: "Bad_Name", instance_type: "ml.g5.2xlarge", script: "scripts/train.py", max_retries: 3 });
  await page.click("#recipe-form-review");
  await page.waitForSelector('#recipe-form .field-error[data-field="job_name"]');
  check(/pattern|must|Kubernetes name/i.test(await page.textContent('#recipe-form .field-error[data-field="job_name"]')), "the bad name is refused beside its field");
  await fill(page, "recipe-form", { job_name: "ui-job" });
  await page.click("#recipe-form-review");
  await page.waitForSelector("#review-yaml");
  const yaml = await page.textContent("#review-yaml");
  check(yaml.includes("kind: HyperPodPyTorchJob"), "the review shows the HyperPodPyTorchJob");
  check(yaml.includes("jobMaxRetryCount: 3"), "with the recovery budget asked for");
  check(yaml.includes("app.kubernetes.io/managed-by: hypd"), "labelled as hypd's");
  await page.click("#review-submit");
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  check((await page.evaluate(() => location.hash)).includes("op=op-"), "the operation is in the URL");
  await page.click("#open-job");
  await page.waitForSelector("#budget");
  check((await page.getAttribute("#budget", "data-max")) === "3", "the job page shows the budget of 3");
  check(/0 of 3/.test(await page.textContent("#budget")), "restarts used of the budget, in words");
  await page.waitForSelector('.job-facts[data-phase="Completed"]', { timeout: 30000 });
  await page.waitForSelector("table.events");
  check((await page.textContent("table.events")).includes("JobSucceeded"), "the job's events are listed");
  await page.waitForSelector("#logs[data-mode]");
  const mode = await page.getAttribute("#logs", "data-mode");
  if (mode === "snapshot" || mode === "unavailable") check((await page.textContent("#logs .log-note")).includes("not available"), "without live logs the view says so");
  await page.goto(`${URL}/#/training?cluster=${name}`);
  await page.waitForSelector('tr[data-job="ui-job"]');
  check((await page.textContent('tr[data-job="ui-job"]')).includes("0 of 3"), "the job list shows it with its budget");
}, { allowConsole: BAD_REQUEST });

await needing(["job_get_logs"], "training: submit a recipe from its form and see its log lines arrive live, through a dropped socket without duplicates", async (page, check) => {
  const name = await trainingCluster("ui-live");
  await slowRecipe();
  await openAt(page, `/training?cluster=${name}&recipe=slow-torchrun`);
  await page.waitForSelector("#recipe-form-job_name");
  await fill(page, "recipe-form", { job_name: "live-job", instance_type: "ml.g5.2xlarge", script: "scripts/train.py", steps: 20000 });
  await page.click("#recipe-form-submit");
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.click("#open-job");
  await page.waitForSelector('#logs[data-mode="live"] li[data-via="live"]', { timeout: 30000 });
  const n1 = Number(await page.getAttribute("#logs .loglines", "data-lines"));
  await page.waitForFunction((n) => Number(document.querySelector("#logs .loglines").dataset.lines) > n, n1, { timeout: 30000 });
  check(true, "more lines arrive while the page is open");
  check(/step \d+\/20000 loss=/.test((await lines(page)).join("\n")), "the lines are the job's training steps");
  check((await page.$$eval("#logs li[data-pod] .log-pod", (xs) => xs.map((x) => x.textContent))).every((p) => p.startsWith("live-job-pod-")), "each line names its pod");
  // a second viewer of the job keeps its log follow (and so the server's
  // upstream streams) open while this page's socket is down: under the
  // virtual clock, simulated time races while no stream is open, and the
  // job would print more than a replay's tail in the gap, which a real
  // clock's second of reconnect never does
  const viewer = await page.context().newPage();
  await openAt(viewer, new globalThis.URL(page.url()).hash.slice(1));
  await viewer.waitForSelector('#logs[data-mode="live"] li[data-via="live"]', { timeout: 30000 });
  await page.evaluate(async () => (await import("/lib/ws.js")).reconnect());
  const n2 = Number(await page.getAttribute("#logs .loglines", "data-lines"));
  await page.waitForFunction((n) => Number(document.querySelector("#logs .loglines").dataset.lines) > n + 5, n2, { timeout: 30000 });
  await page.waitForSelector('#logs[data-mode="live"]');
  const all = await lines(page);
  const steps = all.map((l) => (/\[rank 0\] step (\d+)\//.exec(l) || [])[1]).filter(Boolean).map(Number);
  check(new Set(steps).size === steps.length, `no line twice across the reconnect (${steps.length - new Set(steps).size} repeated)`);
  const gap = steps.findIndex((s, i) => i > 0 && s !== steps[i - 1] + 1);
  check(gap < 0, "and none missing: the steps follow one another" + (gap < 0 ? "" : ` (${steps[gap - 1]} then ${steps[gap]})`));
  await viewer.close();
  check(await page.isVisible("#logs-pause"), "autoscroll can be paused");
  await page.click("#logs-pause");
  check((await page.getAttribute("#logs-pause", "aria-pressed")) === "true", "pause is shown pressed");
});

await scenario("training: a node rebooted mid-run restarts the job, and its page shows 1 of the budget's 5 restarts used", async (page, check) => {
  const name = await trainingCluster("ui-restart");
  await slowRecipe();
  const r = await call("training_submit", { cluster: name, recipe: "slow-torchrun",
    params: { job_name: "bumpy", instance_type: "ml.g5.2xlarge", script: "scripts/train.py", steps: 20000 } });
  const v = await waitOperation(r.operation_id);
  check(v.status === "succeeded", "the job is submitted: " + v.status);
  await openAt(page, `/training/bumpy?cluster=${name}`);
  await page.waitForSelector('.job-facts[data-phase="Running"] ~ #budget[data-used="0"], #budget[data-used="0"]');
  const node = await page.textContent("table.pods tr[data-pod] td:nth-child(3)");
  await call("hyperpod_node_reboot", { cluster: name, nodes: [node.trim()] });
  await page.waitForSelector('#budget[data-used="1"]', { timeout: 30000 });
  check(/1 of 5/.test(await page.textContent("#budget")) && /4 left/.test(await page.textContent("#budget")), "the budget reads 1 of 5 used, 4 left");
  check((await page.$$("#budget .budget-bar span.used")).length === 1, "and its bar marks one restart");
});
