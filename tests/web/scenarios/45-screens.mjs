// The main pages at 1280 px and 420 px wide, light and dark: a screenshot
// of each under the test output folder, no horizontal scrolling, the
// navigation collapsed behind its button on a narrow screen, text contrast
// at least 4.5:1, every control labelled.
import { URL, scenario, signIn } from "../lib.mjs";
import { contrastProblems, rest, unlabelled } from "../api.mjs";

const SHOTS = process.env.HYPD_SHOTS || "/tmp";
const some = (await rest("/operations?limit=1")).body.operations[0];
const PAGES = [["clusters", "/clusters"], ["operations", "/operations"], ["tools", "/tools"],
  ["tool-form", "/tools/hyperpod_add_instance_group"], ...(some ? [["operation", "/operations/" + some.operation_id]] : [])];

for (const [width, scheme] of [[1280, "dark"], [420, "light"], [420, "dark"], [1280, "light"]]) {
  await scenario(`the main pages at ${width} px, ${scheme}: no sideways scrolling, contrast, labels`, async (page, check) => {
    await page.goto(URL + "/");
    await page.waitForSelector("#token");
    await page.screenshot({ path: `${SHOTS}/page-signin-${width}-${scheme}.png` });
    check((await contrastProblems(page)).length === 0 && (await unlabelled(page)).length === 0, "the sign-in page: contrast and labels");
    await signIn(page);
    for (const [name, route] of PAGES) {
      await page.goto(URL + "/#" + route);
      await page.waitForSelector("main h1");
      await page.waitForTimeout(400);
      await page.screenshot({ path: `${SHOTS}/page-${name}-${width}-${scheme}.png`, fullPage: true });
      const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check(over <= 0, `${name}: no horizontal scrolling (${over} px too wide)`);
      const bad = await contrastProblems(page);
      check(bad.length === 0, `${name}: contrast below 4.5:1: ${bad.slice(0, 5).join("; ")}`);
      const loose = await unlabelled(page);
      check(loose.length === 0, `${name}: controls without a label: ${loose.join(", ")}`);
    }
    await page.click("#ops-indicator");
    await page.waitForSelector("#ops-drawer");
    await page.screenshot({ path: `${SHOTS}/page-drawer-${width}-${scheme}.png` });
    check((await contrastProblems(page)).length === 0, "the drawer: contrast");
    await page.keyboard.press("Escape");
    const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    check(scheme === "dark" ? dark === "rgb(13, 17, 23)" : dark === "rgb(255, 255, 255)", `the ${scheme} palette is used (${dark})`);
    if (width < 700) {
      check(!(await page.isVisible("#nav")), "the navigation is collapsed");
      await page.click(".nav-toggle");
      check(await page.isVisible("#nav a:text-is('Tools')"), "the menu button opens it");
      await page.click("#nav a:text-is('Tools')");
      await page.waitForSelector("h1:text-is('Tools')");
      await page.waitForSelector("#nav", { state: "hidden", timeout: 2000 }).catch(() => {});
      check(!(await page.isVisible("#nav")), "choosing a page closes it");
    } else {
      check(await page.isVisible("#nav"), "the navigation is shown");
    }
  }, { viewport: { width, height: 800 }, colorScheme: scheme });
}
