// The Tools page: every tool, searchable, each with its generated form;
// a read tool's result as JSON; the server's validation errors beside the
// field they name; Plan (its rows) before Run, and the run followed live.
import { BAD_REQUEST, URL, scenario, signIn } from "../lib.mjs";
import { rest, waitFor } from "../api.mjs";

await scenario("the Tools page lists every tool of the registry and searches them", async (page, check) => {
  const all = (await rest("/tools")).body.tools.length;
  await signIn(page);
  await page.goto(URL + "/#/tools");
  await page.waitForSelector("[data-tool]");
  check((await page.$$("[data-tool]")).length === all, `all ${all} tools are listed`);
  await page.fill("#tool-search", "aws_get_avail");
  await page.waitForFunction(() => document.querySelectorAll("[data-tool]").length < 3);
  check((await page.$("[data-tool=aws_get_availability_zones]")) !== null, "the search finds aws_get_availability_zones");
  check((await page.evaluate(() => location.hash)).includes("q=aws_get_avail"), "the search is in the URL");
  await page.click("[data-tool=aws_get_availability_zones] a");
  await page.waitForSelector("#tool-form");
  await page.click("#tool-form-run");
  await page.waitForSelector("pre.json");
  check((await page.textContent("pre.json")).includes("us-west-2a"), "a read tool's result is shown as JSON");
});

await scenario("an invalid form value shows the server's error next to its field", async (page, check) => {
  await signIn(page);
  await page.goto(URL + "/#/tools/cluster_create_eks");
  await page.waitForSelector("[name=cluster_tag]");
  check(await page.$eval("[data-path=cluster_tag]", (e) => e.classList.contains("decision") && /your decision/.test(e.textContent)),
    "cluster_tag is marked as a decision");
  await page.fill("[name=cluster_tag]", "BAD TAG");
  await page.click("#tool-form-more > summary"); // the subnets are among the folded options
  await page.click("#tool-form-public_subnet_cidrs-add");
  await page.fill("[name='public_subnet_cidrs[0]']", "10.192.0.0/24");
  await page.click("#tool-form-public_subnet_cidrs-add");
  await page.fill("[name='public_subnet_cidrs[1]']", "not-a-cidr");
  await page.click("#tool-form-run");
  await page.waitForSelector("[data-path=cluster_tag] .field-error");
  const msg = await page.textContent("[data-path=cluster_tag] .field-error");
  check(/cluster tag: 3 to 32 characters/.test(msg), "the server's message is beside cluster_tag: " + msg);
  check((await page.getAttribute("[name=cluster_tag]", "aria-invalid")) === "true", "the field is marked invalid");
  check(/IPv4 CIDR/.test(await page.textContent("[data-path='public_subnet_cidrs[1]'] .field-error")), "an array item's error is beside that item");
  check((await page.$("[data-path='public_subnet_cidrs[0]'] .field-error")) === null, "the valid item has no error");
  const ops = (await rest("/operations?tool=cluster_create_eks&limit=500")).body.operations;
  check(!ops.some((o) => o.params && o.params.cluster_tag === "BAD TAG"), "no operation was started");
}, { allowConsole: BAD_REQUEST });

await scenario("Plan shows the rows a staged tool would create, then Run follows its operation live", async (page, check) => {
  await signIn(page);
  await page.goto(URL + "/#/tools/cluster_create_eks");
  await page.waitForSelector("[name=cluster_tag]");
  check((await page.$("[name=plan]")) === null, "plan is a button, not a field");
  await page.fill("[name=cluster_tag]", "web-tools-plan");
  await page.click("#tool-form-plan");
  await page.waitForSelector(".plan-rows");
  const creates = await page.$$eval("tr[data-action=create]", (rs) => rs.length);
  check(creates > 5, `the plan lists what it creates (${creates} rows)`);
  check(/hypd-web-tools-plan-vpc/.test(await page.textContent(".plan-rows")), "the VPC is named in the plan");
  check((await rest("/operations?tool=cluster_create_eks&limit=500")).body.operations.every((o) => o.params.cluster_tag !== "web-tools-plan"),
    "planning started no operation");
  await page.click("#plan-run");
  await page.waitForFunction(() => /[?&]op=op-/.test(location.hash));
  await page.waitForSelector(".operation[data-status=succeeded]", { timeout: 20000 });
  check((await page.$$("li.step")).length >= 3, "the operation's steps are listed");
  check(/hypd-web-tools-plan/.test(await page.textContent(".operation pre.json")), "the result is shown");
});

await scenario("a destructive tool asks first: it names what its plan deletes, and the person types the cluster tag", async (page, check) => {
  const made = await rest("/tools/cluster_create_eks", { body: { cluster_tag: "web-doomed" } });
  await waitFor(async () => (await rest(`/operations/${made.body.operation_id}`)).body.status === "succeeded", 20000, "the cluster");
  await signIn(page);
  await page.goto(URL + "/#/tools/cluster_delete");
  await page.waitForSelector("[name=cluster_tag]");
  await page.fill("[name=cluster_tag]", "web-doomed");
  await page.click("#tool-form-run");
  await page.waitForSelector("dialog[open]");
  const items = await page.textContent("dialog[open] .confirm-items");
  check(/hypd-web-doomed/.test(items), "the dialog names what goes: " + items.slice(0, 120));
  const go = "dialog[open] button[type=submit]";
  check(await page.$eval(go, (b) => b.disabled), "nothing goes before the tag is typed");
  await page.fill("#confirm-type", "web-doome");
  check(await page.$eval(go, (b) => b.disabled), "a wrong word keeps it disabled");
  await page.fill("#confirm-type", "web-doomed");
  check(await page.$eval(go, (b) => !b.disabled), "the tag enables it");
  await page.keyboard.press("Escape");
  await page.waitForSelector("dialog[open]", { state: "detached", timeout: 2000 }).catch(() => {});
  check((await page.$("dialog[open]")) === null, "Escape closes it");
  check(!(await rest("/operations?tool=cluster_delete&limit=500")).body.operations.some((o) => o.params.cluster_tag === "web-doomed"),
    "and nothing was deleted");
  await page.click("#tool-form-run");
  await page.waitForSelector("dialog[open]");
  check((await page.inputValue("#confirm-type")) === "", "the typed word is asked again");
  await page.fill("#confirm-type", "web-doomed");
  await page.click(go);
  await page.waitForSelector(".operation[data-status=succeeded]", { timeout: 20000 });
  check((await rest("/tools/cluster_list", { body: {} })).body.clusters.every((c) => c.name !== "hypd-web-doomed"), "the cluster is gone");
});
