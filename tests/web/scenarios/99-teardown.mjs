// Teardown from the cluster pages (issue 19): the cluster page's Delete
// shows cluster_delete's plan and asks for the tag typed in; what the
// teardown keeps (an FSx file system: it may hold data) stays on the
// Clusters page with the command that removes it, drawn amber, and its own
// Delete (with force) removes it. The status colours: Failure and NotReady
// red, Degraded and ShuttingDown amber, none of them Schedulable's grey.
import { URL, scenario } from "../lib.mjs";
import { call, cluster, openAt, waitOperation } from "../clusters.mjs";

await scenario("teardown: Delete on the cluster page, the leftovers on the Clusters page, status colours", async (page, check) => {
  const name = await cluster("ui-del");
  const fsx = await waitOperation((await call("storage_create_fsx", { cluster: name })).operation_id, 300);
  check(fsx.status === "succeeded", "FSx storage made: " + fsx.status);
  await openAt(page, "/cluster/" + name);
  await page.waitForSelector("#delete-ui-del");
  await page.click("#delete-ui-del");
  await page.waitForSelector("dialog[open] .confirm-items li");
  const items = await page.$$eval("dialog[open] .confirm-items li", (l) => l.map((x) => x.textContent));
  check(items.some((x) => x.startsWith("eks:cluster hypd-ui-del")), "the dialog lists the plan's deletes: " + items.slice(0, 3).join(", "));
  const kept = await page.$$eval("dialog[open] .confirm-kept li", (l) => l.map((x) => x.textContent));
  check(kept.some((x) => /^fsx:file-system .*may hold data/.test(x)), "it says what is kept and why: " + kept.join("; ").slice(0, 160));
  check(await page.isDisabled('dialog[open] button[type="submit"]'), "Delete waits for the tag typed in");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS}/teardown-dialog.png` });
  await page.fill("dialog[open] #confirm-type", "ui-del");
  await page.click('dialog[open] button[type="submit"]');
  await page.waitForFunction(() => location.hash.startsWith("#/operations/op-"));
  const id = (await page.evaluate(() => location.hash)).split("/").pop().split("?")[0];
  const v = await waitOperation(id, 600);
  check(v.status === "succeeded", "cluster_delete succeeded: " + v.status + " " + JSON.stringify(v.error || ""));

  await page.goto(URL + "/#/clusters"); // signed in already
  await page.waitForSelector('[data-leftover="ui-del"]');
  // the page reads the list again on each visit: the one from before the teardown ended goes
  await page.waitForFunction(() => !document.querySelector('[data-leftover="ui-del"]').textContent.includes("nat-gateway"),
    null, { timeout: 15000 }).catch(() => {});
  const text = await page.textContent('[data-leftover="ui-del"]');
  check(text.includes("fsx:file-system") && text.includes("ec2:vpc"), "the leftovers are listed: " + text.slice(0, 200));
  check(!text.includes("ec2:nat-gateway"), "as they are once the teardown ended (its NAT gateway went): " + text.slice(0, 300));
  const cmd = await page.textContent('[data-leftover="ui-del"] [data-remove]');
  check(cmd === "hypd call cluster_delete cluster_tag=ui-del force:=true", "with the command that removes them: " + cmd);
  check(!!(await page.$('[data-leftover="ui-del"] .pill-warn')), "drawn amber, not grey");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS}/teardown-leftovers.png`, fullPage: true });
  const tones = await page.evaluate(async () => {
    const { tone } = await import("/lib/tone.js");
    return ["Failure", "Degraded", "NotReady", "ShuttingDown", "Schedulable"].map(tone).join(" ");
  });
  check(tones === "bad warn bad warn ok", "Failure, Degraded, NotReady, ShuttingDown, Schedulable: " + tones);
  const colours = await page.evaluate(() => {
    const c = (cls) => { const s = document.createElement("span"); s.className = "pill " + cls; document.body.append(s); const v = getComputedStyle(s).color; s.remove(); return v; };
    return { bad: c("pill-bad"), warn: c("pill-warn"), muted: c("pill-muted"), ok: c("pill-ok") };
  });
  check(new Set(Object.values(colours)).size === 4, "red, amber, grey and green are four colours: " + JSON.stringify(colours));
  const shown = await page.evaluate(async () => {
    const { html, render } = await import("/vendor/preact-htm.js");
    const { Pill } = await import("/lib/ui.js");
    const d = document.createElement("div");
    document.body.append(d);
    render(html`<${Pill} status="Failed" message="InsufficientCapacity: no ml.g5.2xlarge in us-west-2a"/><${Pill} status="InService" message="fine"/>`, d);
    const out = [d.textContent, d.querySelectorAll(".pill-message").length];
    d.remove();
    return out;
  });
  check(shown[0].includes("InsufficientCapacity") && shown[1] === 1, "a failed status shows its message beside it (a good one does not): " + JSON.stringify(shown));

  await page.click('[data-leftover="ui-del"] button.btn-danger');
  await page.waitForSelector("dialog[open] .confirm-items li");
  const again = await page.$$eval("dialog[open] .confirm-items li", (l) => l.map((x) => x.textContent));
  check(again.some((x) => x.startsWith("fsx:file-system")), "with force its plan deletes the file system: " + again.join(", ").slice(0, 200));
  await page.fill("dialog[open] #confirm-type", "ui-del");
  await page.click('dialog[open] button[type="submit"]');
  await page.waitForFunction(() => location.hash.startsWith("#/operations/op-"));
  const id2 = (await page.evaluate(() => location.hash)).split("/").pop().split("?")[0];
  const v2 = await waitOperation(id2, 600);
  check(v2.status === "succeeded", "the second cluster_delete succeeded: " + v2.status + " " + JSON.stringify(v2.error || ""));
  await page.goto(URL + "/#/clusters");
  await page.reload(); // the session's cluster list read again
  await page.waitForSelector("table.clusters, .empty");
  check(!(await page.$('[data-leftover="ui-del"]')), "nothing is left for ui-del");
});
