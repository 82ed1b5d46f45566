// A playbook tool dropped into the playbook directory appears in the Tools
// page with its form (after POST /api/v1/playbooks/reload), and runs.
import { BAD_REQUEST, URL, scenario, signIn } from "../lib.mjs";
import { playbook } from "../api.mjs";

const ECHO = `-- a read playbook tool of the browser scenarios
return tool {
  name = "monitor_web_echo", summary = "Echo words back, repeated", kind = "read",
  description = "Returns the word it was given, repeated, to show a playbook tool in the web UI.",
  params = { word = { type = "string", required = true, pattern = "^[a-z]+$", decision = true,
                      description = "the word to say" },
             times = { type = "integer", minimum = 1, maximum = 3, default = 1, description = "how often" },
             shout = { type = "boolean", description = "in capitals" },
             tone = { type = "string", enum = { "calm", "bright" }, default = "calm" } },
  run = function(_, p)
    local w = p.shout and p.word:upper() or p.word
    return { said = string.rep(w, p.times, " "), tone = p.tone }
  end,
}
`;

await scenario("a playbook tool dropped into the playbook directory appears in Tools with its form, and runs", async (page, check) => {
  await signIn(page);
  await page.goto(URL + "/#/tools?q=monitor_web_echo");
  await page.waitForSelector("#tool-search");
  check((await page.$("[data-tool=monitor_web_echo]")) === null, "not there before the file is");
  const report = await playbook("monitor_web_echo.lua", ECHO);
  check(report.defined.includes("monitor_web_echo"), "the reload defines it");
  await page.reload();
  await page.waitForSelector("[data-tool=monitor_web_echo]");
  check(/playbook/.test(await page.textContent("[data-tool=monitor_web_echo]")), "it is marked as a playbook tool");
  await page.click("[data-tool=monitor_web_echo] a");
  await page.waitForSelector("[name=word]");
  check((await page.inputValue("[name=times]")) === "1", "the default is filled in");
  check((await page.getAttribute("[name=times]", "max")) === "3", "the maximum is the input's");
  check((await page.$$eval("[name=tone] option", (os) => os.map((o) => o.value))).join() === "calm,bright", "the enum is a select");
  check((await page.$("input[type=checkbox][name=shout]")) !== null, "the boolean is a checkbox");
  check(/your decision/.test(await page.textContent("[data-path=word]")), "word is marked as a decision");
  // the server's validation, beside the field
  await page.fill("[name=word]", "Hi");
  await page.click("#tool-form-more > summary"); // times, shout and tone are folded: not decisions
  await page.fill("[name=times]", "9");
  await page.click("#tool-form-run");
  await page.waitForSelector("[data-path=times] .field-error");
  check(/at most 3/.test(await page.textContent("[data-path=times] .field-error")), "the maximum's error is beside times");
  check((await page.$("[data-path=word] .field-error")) !== null, "the pattern's error is beside word");
  await page.fill("[name=word]", "hi");
  await page.fill("[name=times]", "2");
  await page.check("[name=shout]");
  await page.selectOption("[name=tone]", "bright");
  await page.click("#tool-form-run");
  await page.waitForSelector("pre.json");
  const out = JSON.parse(await page.textContent("pre.json"));
  check(out.said === "HI HI" && out.tone === "bright", "it runs with the form's values: " + JSON.stringify(out));
}, { allowConsole: BAD_REQUEST });
