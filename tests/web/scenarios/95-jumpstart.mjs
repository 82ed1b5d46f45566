// Inference › JumpStart: the deploy form's model_id offers the SageMaker
// public hub's models (inference_list_jumpstart_models) as choices; a model
// deployed from it shows in the list as kind jumpstart, ready.
import { needing } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";
import { fill } from "../workloads.mjs";

await needing(["inference_deploy_jumpstart", "inference_list_jumpstart_models", "inference_list"], "inference: deploy a JumpStart model chosen from the hub's list in the form", async (page, check) => {
  const name = await cluster("ui-jumpstart", { features: { inference_operator: true } });
  await openAt(page, `/inference?cluster=${name}&deploy=jumpstart`);
  await page.waitForSelector("#deploy-form-jumpstart-model_id option[value='deepseek-llm-r1-distill-qwen-1-5b']", { state: "attached" });
  const opts = await page.$$eval("#deploy-form-jumpstart-model_id option", (xs) => xs.map((x) => x.textContent));
  check(opts.some((o) => /gated/.test(o)), "a gated model says so in its choice");
  await fill(page, "deploy-form-jumpstart", { name: "js-qwen", model_id: "deepseek-llm-r1-distill-qwen-1-5b", instance_type: "ml.g5.2xlarge" });
  await page.click("#deploy-form-jumpstart-deploy");
  await page.waitForSelector('#deploy .follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector('tr[data-endpoint="js-qwen"]', { timeout: 30000 });
  const row = await page.textContent('tr[data-endpoint="js-qwen"]');
  check(/jumpstart/.test(row) && /1 of 1/.test(row), "the list shows it as jumpstart, 1 of 1 ready: " + row);
});
