// The ML engineer's walk: a recipe's job submitted from its form and
// followed to its end with its logs, then a model deployed from the
// Inference page and prompted, each stop screenshotted and judged by axe.
import { URL, needing } from "../lib.mjs";
import { openAt } from "../clusters.mjs";
import { fill, lines, prompt, trainingCluster } from "../workloads.mjs";
import { stop } from "../walks.mjs";

const TOOLS = ["training_submit", "training_get_job", "inference_deploy_container", "inference_call_model", "inference_delete"];

await needing(TOOLS, "walk, ML engineer: submit a job and follow it to its logs, deploy a model and prompt it", async (page, check) => {
  const name = await trainingCluster("ui-walk", { instance_count: 2 });
  await openAt(page, `/training?cluster=${name}&recipe=pytorch-torchrun`);
  await page.waitForSelector("#recipe-form-job_name");
  await fill(page, "recipe-form", { job_name: "walk-job", instance_type: "ml.g5.2xlarge", script: "scripts/train.py" });
  await stop(page, check, "ml", "1-recipe");
  await page.click("#recipe-form-submit");
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector('tr[data-job="walk-job"]', { timeout: 20000 });
  check(true, "the submitted job appears in the jobs list by itself");
  await page.click("#open-job");
  await page.waitForSelector('.job-facts[data-phase="Completed"]', { timeout: 60000 });
  await page.waitForSelector("#logs li[data-pod]", { timeout: 30000 });
  check((await lines(page)).length > 0, "the finished job's log lines are there");
  check(await page.isVisible("#logs .log-kept"), "said to be the lines its finished pods kept");
  await stop(page, check, "ml", "2-job");

  await page.goto(`${URL}/#/inference?cluster=${name}&deploy=container`);
  await page.waitForSelector("#deploy-form-container");
  await fill(page, "deploy-form-container", { name: "walk-chat", engine: "vllm", gpus: 1, instance_type: "ml.g5.2xlarge", replicas: 1 });
  await stop(page, check, "ml", "3-deploy");
  await page.click("#deploy-form-container-deploy");
  await page.waitForSelector('#deploy .follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForFunction(() => /1 of 1/.test(document.querySelector('tr[data-endpoint="walk-chat"]')?.textContent || ""), null, { timeout: 30000 });
  check(true, "the endpoint is listed ready, 1 of 1, without a reload");
  await page.click('tr[data-endpoint="walk-chat"] a');
  await prompt(page, check);
  await stop(page, check, "ml", "4-prompt");
  await page.click("#endpoint-delete");
  await page.waitForSelector("dialog[open]");
  await page.fill("#confirm-type", "walk-chat");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForFunction(() => !document.querySelector('tr[data-endpoint="walk-chat"]'), null, { timeout: 30000 });
  check(true, "deleted after the typed name, gone from the list");
});
