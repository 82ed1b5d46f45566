// Inference: deploy a container (vLLM's image) from its generated form,
// see it in the list and on its page (replicas, pods, its Service);
// a model pool's warm pods assigned to a model and released with the
// buttons; scale; delete after the typed confirmation; and an answer with
// its latency from the test prompt box.
import { URL, needing } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";
import { fill, prompt } from "../workloads.mjs";

const DEPLOY = ["inference_deploy_container", "inference_list", "inference_get", "inference_scale", "inference_delete",
  "inference_assign_pool_pod", "inference_release_pool_pod"];

async function deploy(page, name, values) {
  if (await page.$("#who")) await page.goto(`${URL}/#/inference?cluster=${name}&deploy=container`);
  else await openAt(page, `/inference?cluster=${name}&deploy=container`);
  await page.waitForSelector("#deploy-form-container");
  const filled = await fill(page, "deploy-form-container", values);
  await page.click("#deploy-form-container-deploy");
  await page.waitForSelector('#deploy .follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector(`tr[data-endpoint="${values.name}"]`, { timeout: 30000 });
  return filled;
}

await needing(DEPLOY, "inference: deploy a container and a model pool from the form, assign and release pool pods, scale, delete", async (page, check) => {
  const name = await cluster("ui-infer", { instance_count: 3 });
  const filled = await deploy(page, name, { name: "chat", engine: "vllm", gpus: 1, instance_type: "ml.g5.2xlarge", replicas: 1 });
  check(filled.length === 5, "the form has the fields asked for: " + filled.join(", "));
  // the list reads again by itself (it may first show the deployment starting, 0 of 1)
  await page.waitForFunction(() => /1 of 1/.test(document.querySelector('tr[data-endpoint="chat"]')?.textContent || ""), null, { timeout: 30000 }).catch(() => {});
  check(/1 of 1/.test(await page.textContent('tr[data-endpoint="chat"]')), "the list shows it ready, 1 of 1");
  await page.click('tr[data-endpoint="chat"] a');
  await page.waitForSelector("#replicas");
  check((await page.textContent("#replicas")).includes("1 ready of 1"), "its page shows the replicas");
  check(/chat.*ClusterIP.*1 ready endpoint/.test(await page.textContent("#service")), "and the Service it is reached through: " + await page.textContent("#service"));
  await page.click(".scale summary");
  await fill(page, "scale-form", { replicas: 2 });
  await page.click("#scale-form-scale");
  await page.waitForFunction(() => /of 2/.test(document.getElementById("replicas").textContent), null, { timeout: 30000 });
  check(true, "scaled to 2 from its page");
  await page.click("#endpoint-delete");
  await page.waitForSelector("dialog[open]");
  check(await page.isDisabled("dialog[open] button[type=submit]"), "deleting waits for the name to be typed");
  await page.fill("#confirm-type", "chat");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForFunction(() => location.hash.startsWith("#/inference") && !location.hash.includes("/chat"));
  await page.waitForFunction(() => !document.querySelector('tr[data-endpoint="chat"]'), null, { timeout: 30000 });
  check(true, "deleted: it is gone from the list");
  // a pool of two warm workers; one assigned to a model, then released
  await deploy(page, name, { name: "warm", engine: "vllm", gpus: 1, instance_type: "ml.g5.2xlarge", replicas: 2, service: "pool" });
  await page.waitForSelector('.pool[data-pool="warm"] tr[data-business="unassigned"]');
  check((await page.$$('.pool[data-pool="warm"] tr[data-pod]')).length === 2, "the pool shows its two warm pods");
  await page.fill("#pool-model-warm", "qwen");
  await page.click('.pool[data-pool="warm"] tr[data-business="unassigned"] [data-assign]');
  await page.waitForSelector('.pool[data-pool="warm"] tr[data-business="qwen"]', { timeout: 30000 });
  check((await page.$$('.pool[data-pool="warm"] tr[data-business="unassigned"]')).length === 1, "one pod serves qwen, one is still warm");
  await page.click('.pool[data-pool="warm"] tr[data-business="qwen"] [data-release]');
  await page.waitForSelector("dialog[open]");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForFunction(() => document.querySelectorAll('.pool[data-pool="warm"] tr[data-business="unassigned"]').length === 2, null, { timeout: 30000 });
  check(true, "released: both pods are warm again");
});

await needing(["inference_deploy_container", "inference_get", "inference_call_model"], "inference: a deployed container answers the test prompt box, with its latency", async (page, check) => {
  const name = "hypd-ui-infer";
  await deploy(page, name, { name: "talk", engine: "vllm", gpus: 1, instance_type: "ml.g5.2xlarge", replicas: 1 });
  await page.click('tr[data-endpoint="talk"] a');
  await prompt(page, check);
});
