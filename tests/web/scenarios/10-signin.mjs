// Signing in: a pasted token, the one-time link, a wrong token.
import { LOGIN, TOKEN, URL, scenario } from "../lib.mjs";

await scenario("sign in with a pasted token: the page says who is signed in", async (page, check) => {
  await page.goto(URL + "/");
  await page.fill("#token", TOKEN);
  await page.click("#signin");
  await page.waitForSelector("#who");
  check((await page.textContent("#who")).includes("sandbox"), "the token's name is shown");
  check(!(await page.evaluate(() => location.href)).includes(TOKEN), "the token is in no URL");
  check(await page.evaluate(() => localStorage.length === 0 && document.cookie === ""),
    "nothing in local storage or cookies");
});

await scenario("sign in once with the printed link; the link's code leaves the address bar", async (page, check) => {
  await page.goto(LOGIN);
  await page.waitForSelector("#who");
  check(!(await page.evaluate(() => location.href)).includes("login="), "the code is gone from the URL");
  const again = await page.context().newPage();
  await again.goto(LOGIN);
  await again.waitForSelector("#message");
  check(/not valid/.test(await again.textContent("#message")), "a second use is refused");
  await again.close();
}, { allowConsole: true });

await scenario("a wrong token: the UI says so and shows nothing else", async (page, check) => {
  await page.goto(URL + "/");
  await page.fill("#token", "hypd_not-a-token");
  await page.click("#signin");
  await page.waitForFunction(() => /not valid/.test(document.querySelector("#message")?.textContent || ""));
  check((await page.$("#who")) === null, "nothing signed in is shown");
}, { allowConsole: true });

