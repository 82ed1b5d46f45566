// What the workload scenarios (scenarios/92-*.mjs .. 98-*.mjs) share: a
// training cluster (the training operator on), a recipe of the playbook
// directory whose simulated training runs long enough to watch its logs,
// and filling a generated form by field name (only the fields its schema has).
import { writeFileSync, mkdirSync } from "node:fs";
import { TOKEN, URL } from "./lib.mjs";
import { cluster } from "./clusters.mjs";

// trainingCluster(tag) -> "hypd-<tag>": one ml.g5.2xlarge node, the training operator on
export const trainingCluster = (tag, extra = {}) => cluster(tag, { features: { training_operator: true }, ...extra });

// slowRecipe(): the recipe "slow-torchrun" (pytorch-torchrun with a `steps`
// parameter: the sandbox's training prints one line per step) in the server's playbook directory
export async function slowRecipe() {
  const dir = process.env.HYPD_PLAYBOOKS + "/recipes";
  mkdirSync(dir, { recursive: true });
  writeFileSync(dir + "/slow-torchrun.lua", `-- slow-torchrun: pytorch-torchrun whose simulated training runs \`steps\` steps
local C = require "_common"
return {
  name = "slow-torchrun",
  description = "A PyTorch script with torchrun, as pytorch-torchrun, whose simulated training runs many steps.",
  params = C.params("763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2", {
    script = C.path("the training script, a path under /s3 (scripts/train.py)", true),
    steps = { type = "integer", default = 2000, minimum = 1, maximum = 100000, description = "the simulated training's steps" },
  }),
  render = function(p)
    local job = C.pytorch_job(p, "slow-torchrun", { image = p.image, command = C.launch(p, { C.MOUNT .. "/" .. p.script }) })
    job.metadata.annotations = { ["sandbox.hypd.io/steps"] = tostring(p.steps) }
    return { job }
  end,
}
`);
  const r = await fetch(`${URL}/api/v1/playbooks/reload`, { method: "POST", body: "{}",
    headers: { authorization: "Bearer " + TOKEN, "content-type": "application/json" } });
  if (!r.ok) throw new Error("playbooks/reload: HTTP " + r.status);
}

// fill(page, formId, values): each value into the form's field of that name,
// when the form has it (a select by its value, a checkbox by true/false;
// a folded one unfolded);
// answers the names filled
export async function fill(page, form, values) {
  const done = [];
  for (const [k, v] of Object.entries(values)) {
    const sel = `#${form}-${k.replace(/[^A-Za-z0-9_-]+/g, "-")}`;
    const el = await page.$(sel);
    if (!el) continue;
    // a field folded under "More options" is unfolded first
    const tag = await el.evaluate((e) => { const d = e.closest("details:not([open])"); if (d) d.open = true; return e.tagName + ":" + (e.type || ""); });
    if (tag.startsWith("SELECT")) {
      // its choices may come from a read tool: wait for the option
      await page.waitForSelector(`${sel} option[value="${String(v)}"]`, { state: "attached", timeout: 15000 });
      await page.selectOption(sel, String(v));
    }
    else if (tag.endsWith("checkbox")) { if ((await el.isChecked()) !== !!v) await el.click(); }
    else await page.fill(sel, String(v));
    done.push(k);
  }
  return done;
}

// lines(page, sel) -> the texts of the log view's lines
export const lines = (page, sel = "#logs") => page.$$eval(`${sel} .loglines li[data-pod] .log-line`, (xs) => xs.map((x) => x.textContent));

// prompt(page, check): on an endpoint's page, the test prompt box sent a
// short prompt; checks that the model answers, with no error and its latency
export async function prompt(page, check) {
  await page.waitForSelector("#prompt-form-prompt");
  check((await page.$eval("#prompt-form > [data-path]", (f) => f.dataset.path)) === "prompt", "the prompt is the form's first field");
  await page.fill("#prompt-form-prompt", "Say hello in one word.");
  // the timeout is among the more options, folded
  if (!(await page.isVisible("#prompt-form-timeout_seconds"))) await page.click("#prompt-form-more > summary");
  await page.fill("#prompt-form-timeout_seconds", "20");
  await page.click("#prompt-form-send");
  await page.waitForSelector("#prompt-answer, #prompt .form-errors", { timeout: 60000 });
  const error = (await page.textContent("#prompt .form-errors").catch(() => "")).trim();
  check(!error, "no error: " + error);
  check(((await page.textContent("#prompt-answer").catch(() => "")) || "").trim().length > 0, "the model answers");
  check(/\d/.test(await page.textContent("#prompt-latency").catch(() => "")), "with its latency");
}
