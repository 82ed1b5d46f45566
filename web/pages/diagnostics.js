// Diagnostics (#/diagnostics[?cluster=&tool=diagnose_node_health&node=...]):
// pick one of the read-only diagnostics, fill its parameters (the tool's
// own form; what the URL names is prefilled, so a link from the Monitoring
// page opens it ready), run it, and read its findings worst first with
// their evidence; each suggested next step opens its tool's form
// prefilled, and asks before it runs (web/lib/findings.js).
import { html, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { SchemaForm } from "/lib/form.js";
import { standard } from "/lib/choices.js";
import { setQuery } from "/lib/router.js";
import { useSession } from "/lib/session.js";
import { Empty, ErrorBox, Loading } from "/lib/ui.js";
import { useToolDef } from "/lib/cluster-ui.js";
import { ClusterPick, useCluster, useHas } from "/lib/workload.js";
import { Findings } from "/lib/findings.js";

export const DIAGNOSTICS = [
  { tool: "diagnose_node_health", title: "Node health", what: "A node that is unhealthy, NotReady, tainted or short of GPUs or EFA; one node or all." },
  { tool: "diagnose_training_job", title: "Training job", what: "A job that hangs, restarts or is slow: NCCL, EFA, CUDA and XID errors, stalled steps." },
  { tool: "diagnose_cluster_creation", title: "Cluster creation", what: "A failed or stuck EKS or HyperPod creation: lifecycle scripts, add-ons, access, quotas, IAM." },
  { tool: "diagnose_inference", title: "Inference", what: "An endpoint that does not serve: pods Pending or crashing, images, readiness." },
];
// the URL's names for a diagnostic's parameters (all of them plain strings)
const FROM_URL = ["node", "instance_group", "operation_id", "job", "name", "namespace"];

function Picker({ chosen, has, cluster }) {
  return html`<ul class="diag-pick" role="list">${DIAGNOSTICS.map((d) => {
    const there = has(d.tool);
    return html`<li class=${d.tool === chosen ? "chosen" : ""} data-diagnostic=${d.tool}>
      <button type="button" class="linkish diag-choose" aria-pressed=${d.tool === chosen ? "true" : "false"} disabled=${there === false}
        onClick=${() => setQuery({ tool: d.tool, cluster, ...Object.fromEntries(FROM_URL.map((k) => [k, ""])) })}><strong>${d.title}</strong></button>
      <code class="small">${d.tool}</code>
      <p class="small">${d.what}</p>
      ${there === false && html`<p class="small warn-text" data-missing=${d.tool}>Not available on this server: GET /api/v1/tools does not list <code>${d.tool}</code>.</p>`}</li>`;
  })}</ul>`;
}

function Runner({ tool, cluster, query }) {
  const { def, error: defErr } = useToolDef(tool);
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState(null);
  if (defErr) return html`<${ErrorBox} error=${defErr}/>`;
  if (!def) return html`<${Loading} what="Loading the diagnostic"/>`;
  const given = Object.fromEntries(FROM_URL.filter((k) => query[k]).map((k) => [k, query[k]]));
  const run = async (p) => {
    setBusy(true); setErrors(null); setResult(null);
    // what was asked goes into the URL, so the page can be shared and reloaded
    setQuery(Object.fromEntries(FROM_URL.map((k) => [k, typeof p[k] === "string" ? p[k] : ""])));
    try { setResult(await callTool(tool, { ...p, cluster })); } catch (e) { setErrors(e); } finally { setBusy(false); }
  };
  return html`<section class="panel diag-run" aria-label=${"run " + tool} data-tool=${tool}>
    <h2><code>${tool}</code> <span class="kind kind-read">read only</span></h2>
    <p class="small">${String(def.summary || "").replace(/([^.])$/, "$1.")} It only reads: anything it suggests is shown as a call for you to review.</p>
    <div class="tool-layout">
      <div><${SchemaForm} schema=${def.input_schema} id="diag-form" values=${given} hide=${["cluster", "region"]} errors=${errors} busy=${busy}
        choices=${standard(def.input_schema)} actions=${[{ label: "Run diagnostic", kind: "read" }]} onSubmit=${run}/></div>
      <div>${busy && html`<${Loading} what="Diagnosing"/>`}${result && html`<${Findings} key=${JSON.stringify(result).length} result=${result}/>`}</div>
    </div>
  </section>`;
}

function Diagnostics({ query }) {
  const has = useHas();
  const { tools } = useSession();
  const cluster = useCluster(query);
  const chosen = DIAGNOSTICS.some((d) => d.tool === query.tool) ? query.tool : null;
  const none = tools && DIAGNOSTICS.every((d) => has(d.tool) === false);
  return html`<div class="page-head"><h1>Diagnostics</h1><${ClusterPick} value=${cluster}/></div>
    <p class="muted">Each diagnostic only reads the cluster, and answers with findings: the evidence they rest on, what it means, and the calls that would
      inspect, fix, reboot or replace, in that order, for you to review and run.</p>
    ${none && html`<div class="missing" role="note"><p><strong>Diagnostics are not available on this server.</strong> None of ${DIAGNOSTICS.map((d, i) => html`${i ? ", " : ""}<code>${d.tool}</code>`)} is listed by GET /api/v1/tools.</p></div>`}
    ${!cluster ? html`<${Empty} title="No active cluster.">Pick one above to diagnose it.</${Empty}>` : html`
      <${Picker} chosen=${chosen} has=${has} cluster=${cluster}/>
      ${chosen && has(chosen) && html`<${Runner} key=${chosen + cluster} tool=${chosen} cluster=${cluster} query=${query}/>`}`}`;
}

export default { path: "/diagnostics", title: "Diagnostics", nav: "Diagnostics", view: Diagnostics };
