// Models: download a model from Hugging Face into the cluster's S3 storage
// from model_download's form (the token a password field, never shown
// again), follow its job, and see its files in the storage.
import { needing } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";
import { fill } from "../workloads.mjs";

const TOOLS = ["model_download", "job_get_status", "job_list", "storage_list_contents"];
const SECRET = "hf_uitestSECRETtoken1234567890";

await needing(TOOLS, "models: download a model from its form, follow the job and see its files in storage", async (page, check) => {
  const name = await cluster("ui-models", { instance_type: "ml.m5.2xlarge" }); // the download runs on CPU nodes only
  await openAt(page, `/models?cluster=${name}`);
  await page.waitForSelector("#download-form");
  const tokenField = await page.$('#download-form input[type="password"]');
  check(!!tokenField, "the token field is a password field");
  const filled = await fill(page, "download-form", { model_id: "Qwen/Qwen2.5-0.5B-Instruct", model: "Qwen/Qwen2.5-0.5B-Instruct" });
  check(filled.length > 0, "the form takes the model id");
  if (tokenField) {
    await tokenField.evaluate((e) => { e.closest("details").open = true; }); // folded under More options
    await tokenField.fill(SECRET);
  }
  await page.click("#download-form-download");
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector(".download[data-job]", { timeout: 30000 });
  await page.waitForSelector('.download[data-phase]:not([data-phase=""])', { timeout: 30000 });
  await page.waitForSelector(".model-files tr[data-object]", { timeout: 60000 });
  const files = await page.$$eval(".model-files tr[data-object]", (xs) => xs.map((x) => x.dataset.object));
  check(files.some((f) => /config\.json$|\.safetensors$|\.bin$/.test(f)), "the model's files are in the storage: " + files.slice(0, 4).join(", "));
  const text = await page.evaluate(() => document.body.innerText + " " + location.href + " " +
    [...document.querySelectorAll("input, textarea")].map((e) => e.value).join(" "));
  check(!text.includes(SECRET), "the token is shown nowhere on the page, in its fields or in the URL");
  const ops = await page.evaluate(async () => (await import("/lib/api.js")).getOperation(new URLSearchParams(location.hash.split("?")[1]).get("op")));
  check(!JSON.stringify(ops).includes(SECRET), "nor in the operation the page reads");
});
