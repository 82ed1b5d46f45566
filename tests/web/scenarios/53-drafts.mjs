// What a person typed is never thrown away: a reload keeps the create
// wizard's decisions and a tool form's fields (session storage), never a
// secret; Clear the form drops them; "Start again" after a failed create
// (an EKS failure injected in the sandbox) reopens the wizard with that
// create's decisions; a download that fails keeps its form's fields.
import { URL, scenario } from "../lib.mjs";
import { call, choose, cluster, decide, openAt, waitOperation } from "../clusters.mjs";
import { fill } from "../workloads.mjs";

const SANDBOX = process.env.HYPD_SANDBOX;
const SECRET = "hf_draftSECRETtoken1234567890";
const faults = async (spec) => {
  const r = await fetch(SANDBOX + "/_sandbox/faults", { method: "POST", body: JSON.stringify(spec), headers: { "content-type": "application/json" } });
  if (!r.ok) throw new Error("sandbox faults: HTTP " + r.status + " " + await r.text());
};
const value = (page, sel) => page.$eval(sel, (e) => e.value);
const stored = (page) => page.evaluate(() => Object.keys(sessionStorage).filter((k) => k.startsWith("hypd.draft."))
  .map((k) => k + "=" + sessionStorage.getItem(k)).join("\n"));

await scenario("a reload keeps the wizard's decisions and a tool form's fields, never a secret; Clear the form drops them", async (page, check) => {
  await decide(page, { tag: "draft-one", count: 3 });
  await page.click("#create-form-more > summary");
  await page.fill("#create-form-volume_size_gb", "321");
  await page.reload();
  await page.waitForSelector("#create-form-cluster_tag");
  check(await value(page, "#create-form-cluster_tag") === "draft-one", "the tag is back after a reload");
  check(await value(page, "#create-form-instance_count") === "3", "so is the count");
  await page.waitForSelector('#create-form-instance_type option[value="ml.g5.2xlarge"]', { state: "attached" });
  check(await value(page, "#create-form-instance_type") === "ml.g5.2xlarge", "and the instance type");
  check(await page.isVisible("#create-form-volume_size_gb") && await value(page, "#create-form-volume_size_gb") === "321",
    "a folded option typed is back, its options unfolded");

  await page.goto(URL + "/#/tools/model_download");
  await page.waitForSelector("#tool-form-model_id");
  await page.fill("#tool-form-model_id", "Qwen/Qwen3-0.6B");
  await page.click("#tool-form-more > summary"); // the token and the folder are among the other options
  await page.fill("#tool-form-hf_token", SECRET);
  await page.fill("#tool-form-destination", "models/kept");
  await page.reload();
  await page.waitForSelector("#tool-form-model_id");
  check(await value(page, "#tool-form-model_id") === "Qwen/Qwen3-0.6B" && await value(page, "#tool-form-destination") === "models/kept",
    "the tool form's fields are back after a reload");
  check(await value(page, "#tool-form-hf_token") === "", "the token is not");
  const kept = await stored(page);
  check(kept.includes("Qwen/Qwen3-0.6B") && !kept.includes(SECRET), "session storage holds the draft, never the token");
  await page.click("#tool-form-clear");
  check(await value(page, "#tool-form-model_id") === "", "Clear the form empties it");
  await page.reload();
  await page.waitForSelector("#tool-form-model_id");
  check(await value(page, "#tool-form-model_id") === "" && !(await stored(page)).includes("Qwen/Qwen3-0.6B"), "and drops its draft");
});

await scenario("Start again after a failed create reopens the wizard with its decisions", async (page, check) => {
  await faults({ eks_failure: [{ cluster: "hypd-ui-again", code: "Ec2SubnetNotFound", message: "One or more subnets do not exist." }] });
  let v;
  try {
    const r = await call("cluster_create", { cluster_tag: "ui-again", availability_zone: "us-west-2b", instance_type: "ml.g5.4xlarge",
      instance_count: 2, volume_size_gb: 250 });
    v = await waitOperation(r.operation_id, 300);
  } finally {
    await faults({});
  }
  check(v.status === "failed", "the create failed: " + v.status + " " + JSON.stringify(v.error || {}).slice(0, 120));
  await openAt(page, "/create?op=" + v.operation_id);
  await page.waitForSelector('.progress[data-status="failed"]');
  await page.click("#start-again");
  await page.waitForSelector("#create-form-cluster_tag");
  check(!(await page.evaluate(() => location.hash.includes("op="))), "the wizard is open again");
  check(await value(page, "#create-form-cluster_tag") === "ui-again", "with the failed create's tag");
  check(await value(page, "#create-form-instance_count") === "2", "its count");
  await page.waitForSelector('#create-form-availability_zone option[value="us-west-2b"]', { state: "attached" });
  check(await value(page, "#create-form-availability_zone") === "us-west-2b", "its zone");
  await page.waitForSelector('#create-form-instance_type option[value="ml.g5.4xlarge"]', { state: "attached" });
  check(await value(page, "#create-form-instance_type") === "ml.g5.4xlarge", "its instance type");
  check(await page.isVisible("#create-form-volume_size_gb") && await value(page, "#create-form-volume_size_gb") === "250",
    "and its folded option, unfolded");
  await choose(page, "#create-form-availability_zone", "us-west-2a");
  await page.click("#create-form-plan");
  await page.waitForSelector(".grouped-plan");
  const planned = await page.textContent(".grouped-plan");
  check(/instance_count=2\b/.test(planned) && planned.includes("ml.g5.4xlarge") && planned.includes("volume_size_gb=250"),
    "the kept decisions are what it plans: " + planned.slice(0, 200));
});

await scenario("a download that fails keeps its form's fields (the token given again)", async (page, check) => {
  const name = await cluster("ui-keep", { instance_type: "ml.m5.2xlarge" }); // CPU nodes: a download runs on them
  await openAt(page, `/models?cluster=${name}`);
  await page.waitForSelector("#download-form");
  await fill(page, "download-form", { model_id: "nobody/no-such-model", destination: "models/none" });
  await page.fill('#download-form input[type="password"]', SECRET);
  await page.click("#download-form-download");
  await page.waitForSelector('.follow[data-status="failed"]', { timeout: 60000 });
  check(await value(page, "#download-form-model_id") === "nobody/no-such-model", "the model id is as typed");
  check(await value(page, "#download-form-destination") === "models/none", "so is the destination");
  check(await page.waitForSelector("#download-kept").catch(() => null), "the form says the download failed and its fields are kept");
  check(await value(page, '#download-form input[type="password"]') === "", "the token is not kept");
  check(!(await stored(page)).includes(SECRET), "nor stored");
});
