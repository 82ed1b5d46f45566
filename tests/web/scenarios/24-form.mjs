// The generic form (web/lib/form.js) on its own, drawn in the signed-in
// page from a schema: nested objects, unions of types, arrays, a secret,
// fixed fields (x-hypd-fixed) read-only when editing with the reason, choices
// filled by a read tool (cluster_list), and what it sends.
import { URL, scenario, signIn } from "../lib.mjs";

const SCHEMA = { type: "object", required: ["name"], properties: {
  name: { type: "string", "x-hypd-decision": true, "x-hypd-fixed": true, description: "what it is called" },
  password: { type: "string", writeOnly: true, description: "a secret" },
  size: { type: "integer", minimum: 1, maximum: 9, default: 3 },
  ratio: { type: "number" },
  cluster: { type: "string", description: "a cluster" },
  tags: { type: "array", items: { type: "string" } },
  limits: { type: "object", additionalProperties: false, properties: { cpu: { type: "integer" }, gpu: { type: "boolean", default: false } } },
  feature: { type: ["boolean", "object"], properties: { enabled: { type: "boolean" }, version: { type: "string" } } },
  labels: { type: "object", properties: {}, description: "free-form" },
} };

async function draw(page, opts) {
  await page.evaluate(async ({ schema, opts }) => {
    const { html, render } = await import("/vendor/preact-htm.js");
    const { SchemaForm } = await import("/lib/form.js");
    const { Session } = await import("/lib/session.js");
    const choices = await import("/lib/choices.js");
    const host = document.createElement("div");
    host.id = "form-host";
    document.querySelector("main").replaceChildren(host);
    window.sent = null;
    render(html`<${Session.Provider} value=${{ who: { name: "t", scope: "admin" } }}>
      <${SchemaForm} schema=${schema} id="t" existing=${opts.existing} values=${opts.values || {}} fixedReason=${opts.fixedReason}
        errors=${opts.errors} choices=${{ cluster: choices.clusters }} onSubmit=${(p) => { window.sent = p; }}/></${Session.Provider}>`, host);
  }, { schema: SCHEMA, opts });
  await page.waitForSelector("#t");
}

await scenario("the generic form: types, unions, arrays, a secret, choices from a read tool, what it sends", async (page, check) => {
  await signIn(page);
  await page.goto(URL + "/#/tools");
  await draw(page, {});
  check((await page.getAttribute("[name=password]", "type")) === "password", "a secret is a password field");
  check((await page.inputValue("[name=size]")) === "3", "a default is filled in");
  check((await page.$eval("label[for=t-name]", (l) => l.textContent)) === "name", "labels are tied to their inputs");
  await page.waitForFunction(() => document.querySelectorAll("[name=cluster] option").length > 1);
  check((await page.$$eval("[name=cluster] option", (os) => os.map((o) => o.value))).some((v) => v.startsWith("hypd-")),
    "the cluster field's choices come from cluster_list");
  await page.fill("[name=name]", "x1");
  await page.fill("[name=password]", "s3cret");
  await page.fill("[name=ratio]", "0.5");
  await page.click("#t-tags-add");
  await page.fill("[name='tags[0]']", "a");
  await page.fill("[name='limits.cpu']", "4");
  check(!(await page.$("[name='feature.version']")), "a feature's options are hidden while it is off");
  await page.click("label[for=t-feature]");
  await page.fill("[name='feature.version']", "v2");
  await page.fill("[name=labels]", '{"k": "v"}');
  await page.click("#t-run");
  const sent = await page.evaluate(() => window.sent);
  const want = { name: "x1", password: "s3cret", ratio: 0.5, tags: ["a"], limits: { cpu: 4 }, feature: { enabled: true, version: "v2" }, labels: { k: "v" } };
  check(JSON.stringify(sent) === JSON.stringify(want), "it sends what was set, typed, without untouched defaults: " + JSON.stringify(sent));
  check(sent && sent.size === undefined && sent.limits.cpu === 4 && sent.ratio === 0.5, "numbers are numbers, the default is left to the server");
});

await scenario("the generic form: fixed fields are read-only when editing, with the reason; errors by path", async (page, check) => {
  await signIn(page);
  await page.goto(URL + "/#/tools");
  await draw(page, { existing: true, values: { name: "kept" }, fixedReason: "the group's name is fixed when it is created",
    errors: { code: "VALIDATION", message: "x", fields: [{ field: "limits.cpu", rule: "minimum", message: "limits.cpu: must be at least 1" },
      { field: "feature.version", rule: "pattern", message: "feature.version: bad" }, { field: "elsewhere", rule: "unknown", message: "elsewhere: unknown field" }] } });
  check(await page.$eval("[name=name]", (i) => i.readOnly || i.disabled), "the fixed field is read-only");
  check(/fixed when it is created/.test(await page.textContent("[data-path=name] .fixed-reason")), "with the reason");
  check((await page.inputValue("[name=name]")) === "kept", "showing its value");
  check(/must be at least 1/.test(await page.textContent("[data-path='limits.cpu'] .field-error")), "a nested field's error is beside it");
  check(/elsewhere/.test(await page.textContent(".form-errors")), "an error naming no field is listed above the buttons");
});
