// Confirmations say what happens: a reboot what it removes from service
// (the pods on the node; its local volumes kept), a Replace, which wipes
// the node's local volumes, waits for the node's id typed as Delete does,
// and the create's confirmation names what it creates and what is lost if
// it stops half-way.
import { URL, scenario } from "../lib.mjs";
import { cluster, decisions, openAt } from "../clusters.mjs";

const dialog = (page) => page.textContent("dialog[open]");
const close = (page) => page.click("dialog[open] .dialog-actions button[type=button]");

await scenario("reboot says what it removes; Replace needs the node's id typed; the create says what is lost", async (page, check) => {
  const name = await cluster("ui-keep", { instance_type: "ml.m5.2xlarge" });
  await openAt(page, `/cluster/${name}?tab=nodes`);
  await page.waitForSelector("tr[data-node]");
  const id = await page.getAttribute("tr[data-node]", "data-node");
  await page.check(`#sel-${id}`);

  await page.click('[data-node-action="reboot"]');
  await page.waitForSelector("dialog[open]");
  const reboot = await dialog(page);
  check(/This will reboot:/.test(reboot) && (await page.textContent("dialog[open] .confirm-items")).includes(id), "the reboot names the node");
  check(/This will remove from service/.test(reboot) && /pods running on them/.test(reboot), "it says what it removes: " + reboot.slice(0, 200));
  check(/local volumes are kept/.test(reboot), "and what it keeps");
  check(!(await page.$("dialog[open] #confirm-type")), "a reboot asks for no typed word");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/66-confirm-reboot.png` });
  await close(page);

  await page.click('[data-node-action="replace"]');
  await page.waitForSelector("dialog[open] #confirm-type");
  const replace = await dialog(page);
  check(/WIPED/.test(replace) && /\/opt\/dlami\/nvme/.test(replace) && /root volume/.test(replace), "replacing says which local volumes are wiped");
  const submit = "dialog[open] button[type=submit]";
  check(await page.isDisabled(submit), "Replace stays disabled until the id is typed");
  await page.fill("dialog[open] #confirm-type", id.slice(0, -1));
  check(await page.isDisabled(submit), "a near miss does not enable it");
  await page.fill("dialog[open] #confirm-type", id);
  check(!(await page.isDisabled(submit)), "the node's id typed enables it");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/66-confirm-replace.png` });
  await close(page);
  const closed = await page.waitForSelector("dialog[open]", { state: "detached", timeout: 5000 }).then(() => true, () => false);
  check(closed, "Keep it closes the dialog, nothing replaced");

  await page.goto(URL + "/#/create"); // signed in already
  await decisions(page, { tag: "confirm-one", count: 2 });
  await page.click("#create-form-plan");
  await page.waitForSelector(".grouped-plan");
  await page.click("#create-run");
  await page.waitForSelector("dialog[open]");
  const create = await dialog(page);
  check(/This will create:/.test(create) && /2 × ml\.g5\.2xlarge in group confirm-one-ig/.test(create), "the create names what it makes: " +
    await page.textContent("dialog[open] .confirm-items"));
  check(/What is lost:/.test(create) && /fails half-way/.test(create) && /costs money/.test(create), "and what is lost if it stops half-way");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/66-confirm-create.png` });
  await close(page);
});
