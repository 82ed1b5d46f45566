// Helpers of the browser scenarios that talk to the server directly (not
// through the page): REST calls with a token, a token of another scope
// (hypd token create beside the running server), playbook tools dropped
// into the server's playbook directory, and a "held" operation: a staged
// playbook tool whose AWS call (sts GetCallerIdentity) the sandbox holds
// (the fault `hold`, through its /_sandbox/faults) so that it stays
// running, in a known phase, until cancelled or let go.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { TOKEN, URL } from "./lib.mjs";

const SANDBOX = process.env.HYPD_SANDBOX;

// rest(path, {method, body, token}) -> {status, body}
export async function rest(path, { method, body, token = TOKEN } = {}) {
  const r = await fetch(URL + "/api/v1" + path, { method: method || (body === undefined ? "GET" : "POST"),
    headers: { authorization: "Bearer " + token, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, body: await r.json().catch(() => ({})) };
}

// newToken(scope, name) -> a token made with `hypd token create` while the server runs
export function newToken(scope, name) {
  const out = execFileSync(process.env.HYPD, ["token", "create", "--scope", scope, "--name", name],
    { env: { ...process.env, HYPD_STATE: process.env.HYPD_STATE }, stdio: ["ignore", "pipe", "ignore"] });
  return out.toString().trim().split("\n").pop().trim();
}

// playbook(file, text): a tool file in the server's playbook directory, then a reload
export async function playbook(file, text) {
  writeFileSync(`${process.env.HYPD_PLAYBOOKS}/${file}`, text, { mode: 0o644 });
  const r = await rest("/playbooks/reload", { body: {} });
  if (r.status !== 200 || (r.body.errors || []).length) throw new Error("playbook reload: " + JSON.stringify(r.body));
  return r.body;
}

export const HOLD_TOOL = "diagnose_web_hold";
export const HOLD_PHASE = "asking STS who we are";
const HOLD = `-- a staged tool that the browser scenarios hold in a known phase
return tool {
  name = "${HOLD_TOOL}",
  summary = "Prepare, ask STS who we are, finish",
  description = "Three steps: prepare (30 s), ask STS (GetCallerIdentity), finish (60 s). Follow it with operation_get.",
  kind = "mutating",
  aws = { "sts:GetCallerIdentity" },
  params = { label = { type = "string", required = true, decision = true, pattern = "^[a-z0-9-]+$",
    pattern_help = "lowercase letters, digits and '-'", description = "what this run is called" } },
  status_tool = "operation_get",
  target = function(p) return "web-hold/" .. p.label end,
  steps = {
    { name = "prepare", run = function(ctx) ctx:phase("preparing"); ctx:sleep(30) end },
    { name = "ask", run = function(ctx) ctx:phase("${HOLD_PHASE}"); ctx:progress("waiting for STS"); ctx:call("sts", "GetCallerIdentity", {}) end },
    { name = "finish", run = function(ctx) ctx:phase("finishing"); ctx:sleep(60) end },
  },
}
`;

async function faults(spec) {
  const r = await fetch(SANDBOX + "/_sandbox/faults", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify(spec) });
  if (!r.ok) throw new Error("sandbox faults: HTTP " + r.status);
}

// held(fn): runs fn(start) while STS holds its answers; start(label) -> the
// operation id of a new held operation. Afterwards every running held
// operation is cancelled and STS let go.
export async function held(fn) {
  await playbook("diagnose_web_hold.lua", HOLD);
  await faults({ services: { sts: { hold: true } } });
  try {
    return await fn(async (label) => {
      const r = await rest("/tools/" + HOLD_TOOL, { body: { label } });
      if (r.status !== 202) throw new Error(`${HOLD_TOOL}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.operation_id;
    });
  } finally {
    await faults({});
    const running = await rest(`/operations?status=running&tool=${HOLD_TOOL}`);
    for (const o of running.body.operations || []) await rest(`/operations/${o.operation_id}/cancel`, { body: {} });
  }
}

// waitFor(fn, ms) -> fn's first truthy answer (polled every 100 ms), or throws
export async function waitFor(fn, ms = 5000, what = "a condition") {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await new Promise((f) => setTimeout(f, 100));
  }
}

// contrastProblems(page) -> texts whose colour against their background is below 4.5:1
export function contrastProblems(page) {
  return page.evaluate(() => {
    const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
      .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
    const bgOf = (el) => {
      for (let e = el; e; e = e.parentElement) {
        const c = rgb(getComputedStyle(e).backgroundColor);
        if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return c;
      }
      return rgb(getComputedStyle(document.body).backgroundColor);
    };
    const out = [];
    for (const el of document.querySelectorAll("body *")) {
      if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
      const cs = getComputedStyle(el);
      if (cs.visibility === "hidden" || cs.display === "none" || el.closest("[disabled], .needs-scope, option")) continue;
      const r = el.getBoundingClientRect();
      if (!r.width || !r.height) continue;
      const a = lum(rgb(cs.color)), b = lum(bgOf(el));
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      if (ratio < 4.5) out.push(`${el.tagName.toLowerCase()}.${el.className} "${el.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
    }
    return out;
  });
}

// unlabelled(page) -> the form controls with no label
export function unlabelled(page) {
  return page.evaluate(() => [...document.querySelectorAll("input, select, textarea")]
    .filter((e) => e.type !== "hidden" && !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.getAttribute("aria-labelledby"))
    .map((e) => e.id || e.name || e.outerHTML.slice(0, 60)));
}
