// The shell: navigation, the top bar (active cluster and region, who is
// signed in), hash routes that can be shared, keyboard focus.
import { TOKEN, URL, scenario, signIn } from "../lib.mjs";
import { unlabelled } from "../api.mjs";

await scenario("the shell: a left navigation, the top bar with the token's name and scope, shareable routes", async (page, check) => {
  await signIn(page);
  await page.waitForSelector("#nav a");
  const who = await page.textContent("#who");
  check(who.includes("sandbox") && who.includes("admin"), "the top bar names the token and its scope: " + who);
  const nav = await page.$$eval("#nav a", (as) => as.map((a) => a.textContent.trim()));
  for (const n of ["Clusters", "Cluster", "Operations", "Tools"]) check(nav.includes(n), "the navigation has " + n);
  await page.click("#nav a:text-is('Operations')");
  await page.waitForSelector("h1:text-is('Operations')");
  check((await page.evaluate(() => location.hash)) === "#/operations", "the route is in the URL");
  check(await page.$eval("#nav a:text-is('Operations')", (a) => a.getAttribute("aria-current") === "page"), "the current page is marked");
  // a shared URL: another tab (no token: session storage is the tab's) signs in, then shows that page and filter
  const again = await page.context().newPage();
  await again.goto(URL + "/#/tools?q=cluster_list");
  await again.fill("#token", TOKEN);
  await again.click("#signin");
  await again.waitForSelector("[data-tool=cluster_list]");
  check((await again.$$("[data-tool]")).length < 10 && (await again.inputValue("#tool-search")) === "cluster_list", "a shared URL opens the page with its filter");
  await again.close();
  // the cluster switcher lists clusters from cluster_list, with the region
  await page.waitForFunction(() => document.querySelector(".region")?.textContent.trim().length > 0);
  check((await page.textContent(".region")).includes("us-west-2"), "the region is shown");
  check((await page.getAttribute("#cluster-switch", "disabled")) === null, "an admin may switch clusters");
  check((await unlabelled(page)).length === 0, "every control has a label");
  await page.goto(URL + "/#/nowhere");
  await page.waitForSelector("h1:text-is('Not found')");
});

await scenario("keyboard: the navigation and the page's controls are reached with Tab, with a visible focus", async (page, check) => {
  await signIn(page);
  await page.goto(URL + "/#/tools");
  await page.waitForSelector("#tool-search");
  const seen = [];
  for (let i = 0; i < 16; i++) { // the navigation has 11 entries (Monitoring and Diagnostics are two of them)
    await page.keyboard.press("Tab");
    seen.push(await page.evaluate(() => {
      const e = document.activeElement;
      const cs = getComputedStyle(e);
      return { id: e.id, text: e.textContent.trim().slice(0, 20), outline: cs.outlineStyle !== "none" && cs.outlineWidth !== "0px" };
    }));
  }
  check(seen.some((s) => s.text === "Tools"), "Tab reaches the navigation");
  check(seen.some((s) => s.id === "tool-search"), "Tab reaches the search box");
  check(seen.some((s) => s.id === "ops-indicator"), "Tab reaches the operations indicator");
  check(seen.every((s) => s.outline), "every focused control shows its focus: " + JSON.stringify(seen.filter((s) => !s.outline)));
});
