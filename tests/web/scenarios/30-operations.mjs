// Operations: the history of every operation whoever started it, filters
// in the URL; one operation's page with its steps, live progress, cancel
// (after a confirmation that Escape closes), and the same progress after a
// reload; the drawer of running operations, live.
import { URL, scenario, signIn } from "../lib.mjs";
import { HOLD_PHASE, HOLD_TOOL, held, rest, waitFor } from "../api.mjs";

await scenario("the Operations page lists every operation with its caller and front end, filtered in the URL", async (page, check) => {
  // one started over REST by another caller, one that fails
  await rest("/tools/cluster_create_eks", { body: { cluster_tag: "web-ops-list" } });
  await signIn(page);
  await page.goto(URL + "/#/operations");
  await page.waitForSelector("table.ops tbody tr");
  const row = await page.$$eval("table.ops tbody tr", (rs) => rs.map((r) => r.textContent));
  check(row.some((t) => t.includes("cluster_create_eks") && t.includes("sandbox") && t.includes("rest")), "caller and front end are shown");
  // sorted by keyboard: the Tool header's button, then Enter
  await page.focus("button[data-sort=tool]");
  await page.keyboard.press("Enter");
  await page.waitForSelector("th[aria-sort=ascending] button[data-sort=tool]");
  const tools = await page.$$eval("table.ops tbody tr td:first-child a", (as) => as.map((a) => a.textContent));
  check(tools.join() === [...tools].sort((a, b) => a.localeCompare(b)).join(), "Enter on a header sorts by it");
  await page.keyboard.press("Enter");
  await page.waitForSelector("th[aria-sort=descending] button[data-sort=tool]");
  await page.selectOption("#filter-status", "succeeded");
  await page.waitForFunction(() => location.hash.includes("status=succeeded"));
  await page.waitForFunction(() => [...document.querySelectorAll("table.ops tbody tr")].every((r) => /succeeded/.test(r.textContent)));
  await page.selectOption("#filter-tool", "cluster_create_eks");
  await page.waitForFunction(() => location.hash.includes("tool=cluster_create_eks"));
  await page.waitForFunction(() => [...document.querySelectorAll("table.ops tbody tr")].every((r) => /cluster_create_eks/.test(r.textContent)));
  await page.reload();
  await page.waitForSelector("table.ops tbody tr");
  check((await page.inputValue("#filter-tool")) === "cluster_create_eks" && (await page.inputValue("#filter-status")) === "succeeded",
    "the filters come back from the URL");
  await page.click("table.ops tbody tr a");
  await page.waitForSelector(".operation");
  check(/#\/operations\/op-/.test(await page.evaluate(() => location.hash)), "an operation has its own URL");
  check((await page.$$("li.step")).length > 3, "its steps are listed with their timings");
  await page.goto(URL + "/#/operations?status=cancelled&tool=operation_get");
  await page.waitForSelector(".empty");
  check(/No operation matches/.test(await page.textContent(".empty")), "an empty filter says so");
});

// openHeld(page, start, label) -> id: signed in, on the page of a new held operation, in its held phase
async function openHeld(page, start, label) {
  await signIn(page);
  const id = await start(label);
  await page.goto(URL + "/#/operations/" + id);
  await page.waitForSelector(`.op-phase:text-is("${HOLD_PHASE}")`);
  return id;
}

await scenario("cancel an operation from its page, after a confirmation that Escape closes", async (page, check) => {
  await held(async (start) => {
    const id = await openHeld(page, start, "web-cancel");
    await page.click("#op-cancel");
    await page.waitForSelector("dialog[open]");
    check(await page.evaluate(() => document.activeElement.closest("dialog") !== null), "the focus is in the dialog");
    for (let i = 0; i < 4; i++) await page.keyboard.press("Tab");
    check(await page.evaluate(() => document.activeElement.closest("dialog") !== null), "Tab keeps the focus in the dialog");
    await page.keyboard.press("Escape");
    await page.waitForSelector("dialog[open]", { state: "detached", timeout: 2000 }).catch(() => {});
    check((await page.$("dialog[open]")) === null, "Escape closes it");
    check((await rest("/operations/" + id)).body.status === "running", "and cancels nothing");
    await page.click("#op-cancel");
    await page.click("dialog[open] button[type=submit]");
    await page.waitForSelector(".operation[data-status=cancelled]");
    check((await rest("/operations/" + id)).body.status === "cancelled", "the server has it cancelled");
    check(/cancelled/.test(await page.textContent(".op-phase")), "the page shows where it stopped");
    check((await page.$("li.step[data-step=ask] .pill-warn")) !== null, "the step it stopped in is marked cancelled");
    check((await page.$("#op-cancel")) === null, "no cancel button once it ended");
  });
});

await scenario("reload the page mid-operation and see the same progress", async (page, check) => {
  await held(async (start) => {
    const id = await openHeld(page, start, "web-reload");
    const before = await page.$$eval("li.step", (ls) => ls.map((l) => l.dataset.step + ":" + l.className));
    await page.reload();
    await page.waitForSelector(`.op-phase:text-is("${HOLD_PHASE}")`);
    const after = await page.$$eval("li.step", (ls) => ls.map((l) => l.dataset.step + ":" + l.className));
    check(JSON.stringify(before) === JSON.stringify(after), "the same steps in the same states: " + after.join(", "));
    check(after[0].includes("step-done") && after[1].includes("step-running"), "prepare done, ask running");
    check(/waiting for STS/.test(await page.textContent(".op-note")), "the current note is shown");
    check((await page.getAttribute(".operation", "data-status")) === "running", "still running");
  });
});

await scenario("the operations drawer shows a running operation's phase live", async (page, check) => {
  const frames = [];
  page.on("websocket", (w) => w.on("framereceived", (f) => frames.push(String(f.payload))));
  await signIn(page);
  await page.waitForSelector("#ops-indicator");
  await page.click("#ops-indicator");
  await page.waitForSelector("#ops-drawer");
  await held(async (start) => {
    const id = await start("web-drawer");
    await page.waitForSelector(`#ops-drawer [data-op="${id}"]`);
    await page.waitForFunction((id) => document.querySelector(`#ops-drawer [data-op="${id}"] .drawer-phase`)?.textContent === "asking STS who we are", id);
    check(/[1-9]/.test(await page.textContent(".ops-count")), "the indicator counts it");
    check(frames.some((f) => f.includes(id) && f.includes("operation.phase")), "its phases came over /ws");
    await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/drawer-with-a-running-operation.png` });
    check((await page.textContent(`#ops-drawer [data-op="${id}"]`)).includes(HOLD_TOOL), "the drawer names its tool");
    await rest(`/operations/${id}/cancel`, { body: {} });
    await waitFor(async () => (await page.$(`#ops-drawer [data-op="${id}"]`)) === null, 5000, "the drawer to drop it");
    await page.keyboard.press("Escape");
    await page.waitForSelector("#ops-drawer", { state: "detached" });
  });
});
