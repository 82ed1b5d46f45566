// The investigator's walk: a training job that does not start (its pod
// waits for a GPU another job holds) is investigated from the Diagnostics
// page: the verdict, the finding with the scheduler's own words quoted, and
// the step it suggests, each step screenshotted and judged by axe.
import { needing } from "../lib.mjs";
import { call, openAt, waitOperation } from "../clusters.mjs";
import { waitFor } from "../api.mjs";
import { slowRecipe, trainingCluster } from "../workloads.mjs";
import { stop } from "../walks.mjs";

await needing(["diagnose_training_job", "training_submit", "training_delete_job"], "walk, investigator: a job that does not start is diagnosed, its cause quoted, a fix suggested", async (page, check) => {
  const name = await trainingCluster("ui-walk", { instance_count: 2 });
  await slowRecipe();
  const jobs = ["walk-hold-a", "walk-hold-b", "walk-wait"];
  for (const job of jobs) {
    const r = await call("training_submit", { cluster: name, recipe: "slow-torchrun",
      params: { job_name: job, instance_type: "ml.g5.2xlarge", script: "scripts/train.py", gpus_per_node: 1, steps: 100000 } });
    check((await waitOperation(r.operation_id, 300)).status === "succeeded", `${job} is submitted`);
  }
  try {
    await openAt(page, `/diagnostics?cluster=${name}&tool=diagnose_training_job&job=walk-wait`);
    await page.waitForSelector("#diag-form-job");
    await stop(page, check, "investigator", "1-form");
    let codes = [];
    await waitFor(async () => {
      await page.click("#diag-form-run-diagnostic");
      await page.waitForSelector("#verdict");
      codes = await page.$$eval("#findings .finding", (l) => l.map((e) => e.getAttribute("data-code")));
      return codes.includes("POD_PENDING_GPU");
    }, 30000, "POD_PENDING_GPU");
    check(await page.getAttribute("#findings", "data-healthy") === "false", "the verdict says the job is not healthy");
    const f = '#findings .finding[data-code="POD_PENDING_GPU"]';
    const quotes = await page.$$eval(`${f} pre.quote`, (l) => l.map((e) => e.textContent));
    check(quotes.some((q) => /Insufficient nvidia.com\/gpu|Unschedulable/.test(q)), "the scheduler's own words are quoted as evidence");
    check(await page.$(`${f} li[data-tool="hyperpod_scale_instance_group"]`) !== null, "a step that would fix it is suggested (more GPUs)");
    await stop(page, check, "investigator", "2-findings");
  } finally {
    for (const job of jobs) await call("training_delete_job", { cluster: name, name: job }).catch(() => {});
  }
});
