// Forms that speak to a person: the create wizard opens with the cluster
// name under a human label (its key small beside it), the help under a
// field is the person's (never the agent's "ask the person"), the other
// options are folded under "More options" (opened by an error in one of
// them), the features are switches whose options show when on; the
// endpoint call opens with the prompt; an optional object's fields are not
// marked required until it is given.
import { URL, scenario, signIn } from "../lib.mjs";
import { call, choose, cluster, openAt } from "../clusters.mjs";
import { unlabelled } from "../api.mjs";

// fields(page, form) -> the form's top-level field paths, in the order shown
const fields = (page, form) => page.$$eval(`#${form} > [data-path], #${form} > details > [data-path]`, (xs) => xs.map((x) => x.dataset.path));
const AGENT = /ask the person|never invent/i;

await scenario("labels: the create wizard opens with the cluster name, person's help, more options folded", async (page, check) => {
  await openAt(page, "/create");
  await page.waitForSelector("#create-form-cluster_tag");
  const order = await fields(page, "create-form");
  check(JSON.stringify(order.slice(0, 4)) === JSON.stringify(["cluster_tag", "availability_zone", "instance_type", "instance_count"]),
    "the decisions come first, the cluster name first: " + order.slice(0, 6).join(", "));
  check((await page.textContent("label[for=create-form-cluster_tag]")) === "Cluster name", "the cluster name has a human label");
  check((await page.textContent("[data-path=cluster_tag] .param-key")) === "cluster_tag", "its key is shown small beside it");
  const help = await page.textContent("#create-form-cluster_tag-help");
  check(!AGENT.test(help) && /cannot change/.test(help), "its help is the person's, saying what cannot change: " + help);
  const all = await page.$$eval("#create-form .help", (xs) => xs.map((x) => x.textContent).join(" | "));
  check(!AGENT.test(all), "no help on the page speaks to an agent");
  check((await page.textContent("label[for=create-form-instance_type]")) === "Instance type", "the instance type is labelled for a person");
  check(!(await page.$eval("#create-form-more", (d) => d.open)), "more options are folded");
  check(!(await page.isVisible("#create-form-volume_size_gb")), "a folded option is not shown");
  check(/More options \(12/.test(await page.textContent("#create-form-more > summary")), "the summary counts them");
  check((await page.$$("#create-form-more .mark-required")).length === 0, "nothing folded is marked required");
  await page.click("#create-form-more > summary");
  await page.waitForSelector("#create-form-volume_size_gb", { state: "visible" });
  check((await page.$$("[data-path=features] select")).length === 0, "the features are not selects");
  const sw = await page.$$eval("[data-path=features] input[role=switch]", (xs) => xs.map((x) => x.labels[0].textContent.trim()));
  check(sw.length === 7 && sw[0] === "Training operator" && sw.includes("Karpenter autoscaling"), "each feature is a labelled switch: " + sw.join(", "));
  check(!(await page.$("[name='features.karpenter.consolidate_after']")), "a feature's options are hidden while it is off");
  await page.click("label[for=create-form-features-karpenter]");
  await page.waitForSelector("[name='features.karpenter.consolidate_after']");
  check((await page.textContent("label[for=create-form-features-karpenter-consolidate_after]")) === "Remove idle nodes after",
    "its options show, labelled, once it is on");
  check((await unlabelled(page)).length === 0, "every control has a label");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/labels-create-more.png`, fullPage: true });
  // an error on a folded option opens the fold by itself
  await page.click("#create-form-more > summary");
  check(!(await page.$eval("#create-form-more", (d) => d.open)), "folded again");
  await page.fill("#create-form-cluster_tag", "lbl-one");
  await choose(page, "#create-form-availability_zone", "us-west-2a");
  await choose(page, "#create-form-instance_type", "ml.g5.2xlarge");
  await page.fill("#create-form-instance_count", "1");
  await page.evaluate(() => { document.getElementById("create-form-more").open = true; });
  await page.fill("#create-form-volume_size_gb", "0");
  await page.evaluate(() => { document.getElementById("create-form-more").open = false; });
  await page.click("#create-form-plan");
  await page.waitForSelector("[data-path=volume_size_gb] .field-error");
  check(await page.$eval("#create-form-more", (d) => d.open), "an invalid folded option opens more options");
}, { allowConsole: /status of (400|422)/ });

await scenario("labels: the endpoint call opens with the prompt; the features form is switches", async (page, check) => {
  await signIn(page);
  await page.goto(URL + "/#/tools/inference_call_model");
  await page.waitForSelector("#tool-form-prompt");
  const order = await fields(page, "tool-form");
  check(order[0] === "prompt" && order[1] === "name", "the prompt first, then the endpoint: " + order.slice(0, 4).join(", "));
  check((await page.textContent("label[for=tool-form-prompt]")) === "Prompt", "the prompt is labelled for a person");
  check(await page.$("#tool-form-more") && !(await page.isVisible("#tool-form-max_tokens")), "the tuning knobs are folded");
  await page.goto(URL + "/#/tools/hyperpod_update_advanced_features");
  await page.waitForSelector("#tool-form-training_operator");
  check((await page.getAttribute("#tool-form-training_operator", "role")) === "switch", "a feature is a switch");
  check((await page.$$("#tool-form fieldset select")).length === 0, "no nested selects");
  check((await fields(page, "tool-form"))[0] === "training_operator", "the training operator first");
  await page.click("label[for=tool-form-tiered_checkpointing]");
  await page.waitForSelector("#tool-form-tiered_checkpointing-memory_percentage");
  check(true, "tiered checkpointing's memory share shows once it is on");
});

await scenario("labels: an optional object's fields are marked required only once it is given", async (page, check) => {
  await signIn(page);
  await page.goto(URL + "/#/tools");
  await page.evaluate(async () => {
    const { html, render } = await import("/vendor/preact-htm.js");
    const { SchemaForm } = await import("/lib/form.js");
    const host = document.createElement("div");
    document.querySelector("main").replaceChildren(host);
    const schema = { type: "object", required: ["job"], properties: {
      job: { type: "string", "x-hypd-label": "Job name", "x-hypd-group": "decisions", "x-hypd-order": 1 },
      elastic: { type: "object", "x-hypd-label": "Elastic training", "x-hypd-group": "decisions", "x-hypd-order": 2, required: ["min_replicas"],
        properties: { min_replicas: { type: "integer", "x-hypd-label": "Fewest nodes" }, step: { type: "integer", "x-hypd-label": "Step" } } } } };
    render(html`<${SchemaForm} schema=${schema} id="o"/>`, host);
  });
  await page.waitForSelector("#o-elastic-min_replicas");
  check((await page.$$("[data-path='elastic.min_replicas'] .mark-required")).length === 0, "not required while the group is empty");
  check((await page.$$("[data-path=job] .mark-required")).length === 1, "the job's own required mark shows");
  await page.fill("#o-elastic-step", "2");
  await page.waitForSelector("[data-path='elastic.min_replicas'] .mark-required");
  check(true, "required once the group holds a value");
});

await scenario("labels: on the Features page a feature that is on shows its options, read back, and applies them", async (page, check) => {
  const name = await cluster("lbl-feat", { s3_storage: false, features: { tiered_checkpointing: { enabled: true, memory_percentage: 30 } } });
  await openAt(page, `/cluster/${name}?tab=features`);
  await page.waitForSelector('[data-feature="tiered_checkpointing"][data-enabled="true"][data-pending="false"]');
  check(!(await page.$('[data-feature="training_operator"] [data-options]')), "a feature that is off shows no options");
  await page.click('[data-options="tiered_checkpointing"] > summary');
  const field = "#feat-opts-tiered_checkpointing-memory_percentage";
  await page.waitForSelector(field);
  check((await page.textContent(`label[for=${field.slice(1)}]`)) === "Memory for checkpoints (%)", "its option has a human label");
  check((await page.inputValue(field)) === "30", "with the value read back");
  await page.fill(field, "40");
  await page.click("#feat-opts-tiered_checkpointing-apply-options");
  await page.waitForFunction(() => location.hash.includes("op=op-"));
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector('[data-feature="tiered_checkpointing"][data-pending="false"] [data-options]', { timeout: 15000 });
  await page.click('[data-options="tiered_checkpointing"] > summary').catch(() => {});
  await page.waitForFunction((f) => document.querySelector(f) && document.querySelector(f).value === "40", field, { timeout: 15000 }).catch(() => {});
  check((await page.inputValue(field)) === "40", "applied: 40 is read back");
  const after = await call("hyperpod_get_advanced_features", { cluster: name });
  check(after.features.tiered_checkpointing.memory_percentage === 40, "the cluster holds 40");
});
