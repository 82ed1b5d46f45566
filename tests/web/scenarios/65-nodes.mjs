// Cluster › Nodes: reboot one after a confirmation that names it.
import { scenario } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";

await scenario("reboot a node after the confirmation that names it", async (page, check) => {
  const name = await cluster("ui-nodes");
  await openAt(page, `/cluster/${name}?tab=nodes`);
  await page.waitForSelector("tr[data-node]");
  const id = await page.getAttribute("tr[data-node]", "data-node");
  check((await page.textContent(`tr[data-node="${id}"]`)).includes("Ready"), "the node's Kubernetes readiness is shown");
  check(await page.isDisabled('[data-node-action="reboot"]'), "nothing to reboot before a node is selected");
  await page.check(`#sel-${id}`);
  await page.click('[data-node-action="reboot"]');
  await page.waitForSelector("dialog[open]");
  check((await page.textContent("dialog[open] .confirm-items")).includes(id), "the dialog names the node");
  check(/restart/.test(await page.textContent("dialog[open] .lost")), "and says what happens");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForSelector(".node-outcome");
  check(/1 of 1 accepted/.test(await page.textContent(".node-outcome")), "the reboot is accepted: " + await page.textContent(".node-outcome"));
  await page.check(`#sel-${id}`);
  await page.click('[data-node-action="replace"]');
  await page.waitForSelector("dialog[open]");
  check(/WIPED/.test(await page.textContent("dialog[open] .lost")), "replacing says local volumes are wiped");
  await page.click("dialog[open] .dialog-actions button[type=button]");
});
