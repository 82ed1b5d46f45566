// Inference: deploy a container (vLLM's image) from its generated form, see
// it in the list, open it, and get an answer with its latency from the test
// prompt box; then delete it after the typed confirmation.
import { URL, needing } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";
import { fill } from "../workloads.mjs";

const TOOLS = ["inference_deploy_container", "inference_list", "inference_get", "inference_call_model", "inference_delete"];

await needing(TOOLS, "inference: deploy a container from its form and get an answer from the test prompt box", async (page, check) => {
  const name = await cluster("ui-infer");
  await openAt(page, `/inference?cluster=${name}&deploy=container`);
  await page.waitForSelector("#deploy-form-container");
  const filled = await fill(page, "deploy-form-container", { name: "chat", engine: "vllm", image: "vllm/vllm-openai:v0.8.5",
    gpus: 1, instance_type: "ml.g5.2xlarge", replicas: 1 });
  check(filled.length === 6, "the form has the fields asked for: " + filled.join(", "));
  await page.click("#deploy-form-container-deploy");
  await page.waitForSelector('#deploy .follow[data-status="succeeded"], #deploy .notice[role="status"]', { timeout: 60000 });
  await page.waitForSelector('tr[data-endpoint="chat"]', { timeout: 30000 });
  await page.click('tr[data-endpoint="chat"] a');
  await page.waitForSelector("#prompt-form");
  await fill(page, "prompt-form", { prompt: "Say hello in one word.", message: "Say hello in one word." });
  await page.click("#prompt-form-send");
  await page.waitForSelector("#prompt-answer", { timeout: 30000 });
  check((await page.textContent("#prompt-answer")).trim().length > 0, "the model answers");
  check(await page.isVisible("#prompt-latency"), "with its latency: " + (await page.textContent("#prompt-latency").catch(() => "none")));
  await page.click("#endpoint-delete");
  await page.waitForSelector("dialog[open]");
  check(await page.isDisabled("dialog[open] button[type=submit]"), "deleting waits for the name to be typed");
  await page.fill("#confirm-type", "chat");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForFunction(() => location.hash.startsWith("#/inference") && !location.hash.includes("/chat"));
  await page.goto(`${URL}/#/inference?cluster=${name}`);
  await page.waitForFunction(() => !document.querySelector('tr[data-endpoint="chat"]'), null, { timeout: 30000 });
  check(true, "it is gone from the list");
});
