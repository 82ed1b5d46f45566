// Screenshots of Training (a recipe's form and its review), a job's page,
// Models, Inference (the list and a deploy form) and an endpoint that stays
// Pending (it asks for more GPUs than any node has: its page says why, in
// the scheduler's words) at 1280 and 420 px, light and dark; nothing wider
// than the window.
import { URL, scenario } from "../lib.mjs";
import { call, openAt, waitOperation } from "../clusters.mjs";
import { fill, trainingCluster } from "../workloads.mjs";

// a cluster with a finished job (made once, by the first of these scenarios)
let made = null;
async function setup() {
  if (made) return made;
  const name = await trainingCluster("ui-shots");
  const r = await call("training_submit", { cluster: name, recipe: "pytorch-torchrun",
    params: { job_name: "shot-job", instance_type: "ml.g5.2xlarge", script: "scripts/train.py" } });
  await waitOperation(r.operation_id);
  const big = await call("inference_deploy_container", { cluster: name, name: "too-big", engine: "vllm", gpus: 8, instance_type: "ml.g5.2xlarge" });
  await waitOperation(big.operation_id);
  made = name;
  return name;
}

const SHOTS = process.env.HYPD_SHOTS || "/tmp";
for (const width of [1280, 420]) {
  for (const scheme of ["light", "dark"]) {
    await scenario(`workload pages at ${width} px, ${scheme}`, async (page, check) => {
      const name = await setup();
      await openAt(page, `/training?cluster=${name}&recipe=llama-factory`);
      const shot = (n) => page.screenshot({ path: `${SHOTS}/pages-${n}-${width}-${scheme}.png`, fullPage: true });
      const over = async (what) => {
        const px = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        check(px <= 1, `${what}: nothing wider than the window (${px} px over)`);
      };
      await page.waitForSelector("#recipe-form-job_name");
      await fill(page, "recipe-form", { job_name: "shot", instance_type: "ml.g5.2xlarge", model: "models/qwen", dataset: "alpaca", dataset_dir: "datasets/alpaca" });
      await page.click("#recipe-form-review");
      await page.waitForSelector("#review-yaml");
      await shot("training");
      await over("training");
      // the other pages: where, what shows it is drawn, the shot's name
      for (const [hash, ready, n] of [
        [`/training/shot-job?cluster=${name}`, "#budget, #logs[data-mode]", "training-job"],
        [`/models?cluster=${name}`, "#download-form", "models"],
        [`/inference?cluster=${name}&deploy=container`, 'tr[data-endpoint="too-big"], #deploy-form-container-gpus', "inference"],
        [`/inference/too-big?cluster=${name}`, "#pending-why", "inference-endpoint"],
      ]) {
        await page.goto(`${URL}/#${hash}`);
        for (const sel of ready.split(", ")) await page.waitForSelector(sel);
        await shot(n);
        await over(n);
      }
      check(/Insufficient nvidia.com\/gpu/.test(await page.textContent("#pending-why")), "the endpoint page says why it is Pending: " + await page.textContent("#pending-why"));
    }, { viewport: { width, height: 900 }, colorScheme: scheme });
  }
}
