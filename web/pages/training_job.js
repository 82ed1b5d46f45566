// A training job (#/training/NAME[?namespace=&cluster=]): training_get_job
// followed by its long poll (wait_seconds): phase, replicas, the restarts
// used of its recovery budget (runPolicy.jobMaxRetryCount), the pod at
// fault, pods and their nodes, conditions and events; its live logs
// (web/lib/logs.js; without live logs on the server, the last lines of each
// pod that training_get_job reads); delete (training_delete_job, confirmed).
import { html, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { LogView } from "/lib/logs.js";
import { href, navigate } from "/lib/router.js";
import { Act, Confirm, ErrorBox, Loading, Pill, Time } from "/lib/ui.js";
import { ClusterPick, Events, lacking, Missing, useItem, usePoll } from "/lib/workload.js";

const DONE = { Completed: true, Failed: true, Succeeded: true };
// stamp("2026-12-01T14:33:22Z") -> epoch seconds (for <Time/>: relative, the absolute time on hover)
export const stamp = (t) => (t ? Date.parse(t) / 1000 : undefined);

// <Budget used max/>: restarts used of the recovery budget, as words and a bar
export function Budget({ used = 0, max = 0 }) {
  const left = Math.max(0, max - used);
  const tone = used > max ? "bad" : left === 0 && max > 0 ? "warn" : used > 0 ? "warn" : "ok";
  return html`<div class=${"budget budget-" + tone} id="budget" data-used=${used} data-max=${max}>
    <strong>${used} of ${max}</strong> restarts used <span class="muted">(recovery budget, <code>runPolicy.jobMaxRetryCount</code>; ${left} left)</span>
    <span class="budget-bar" aria-hidden="true">${Array.from({ length: Math.min(max, 40) }, (_, i) => html`<span class=${i < used ? "used" : ""}></span>`)}</span>
  </div>`;
}

function Job({ params, query }) {
  const { has, cluster, name, namespace, id: p } = useItem(params, query);
  const missing = lacking(has, ["training_get_job"]);
  const job = usePoll("training_get_job", p, { done: (d) => DONE[d.phase], wait: 20, enabled: missing.length === 0 });
  const [ask, setAsk] = useState(false);
  const [delErr, setDelErr] = useState(null);
  const d = job.data;
  if (missing.length) return html`<h1>Job <code>${name}</code></h1><${Missing} tools=${missing} what="Reading a training job"/>`;
  const fallback = async () => {
    const r = await callTool("training_get_job", { ...p, tail_lines: 200 });
    const out = [];
    for (const pod of r.pods || []) for (const line of pod.logs || []) out.push({ pod: pod.name, line });
    return out;
  };
  const del = async () => {
    setAsk(false);
    try { await callTool("training_delete_job", p); navigate("/training", { cluster: query.cluster }); } catch (e) { setDelErr(e); }
  };
  return html`<p class="crumbs"><a href=${href("/training", { cluster: query.cluster })}>Training</a> / <code>${namespace}/${name}</code></p>
    <div class="page-head"><h1>Job <code>${name}</code> ${d && html`<${Pill} status=${d.phase}/>`}</h1><${ClusterPick} value=${cluster}/></div>
    <${ErrorBox} error=${job.error}/>
    ${!d ? !job.error && html`<${Loading} what="Reading the job"/>` : html`
    <dl class="facts summary-facts job-facts" data-phase=${d.phase}>
      <div><dt>Phase</dt><dd class="job-phase">${d.phase}</dd></div>
      <div><dt>Kind</dt><dd><code>${d.kind}</code></dd></div>
      <div><dt>Recipe</dt><dd>${d.recipe || "—"}</dd></div>
      <div><dt>Replicas</dt><dd class="num">${d.replicas}</dd></div>
      <div><dt>Created</dt><dd><${Time} t=${stamp(d.created)}/></dd></div>
      <div><dt>Cluster</dt><dd><code>${d.cluster}</code> <span class="muted">${d.region}</span></dd></div>
    </dl>
    <${Budget} used=${d.restarts} max=${d.max_retries}/>
    ${d.ray && html`<dl class="facts summary-facts ray-facts"><div><dt>Ray job</dt><dd><${Pill} status=${d.ray.job_status || "unknown"}/></dd></div>
      <div><dt>Deployment</dt><dd>${d.ray.deployment_status || "—"}</dd></div>
      ${d.ray.ray_cluster && html`<div><dt>Ray cluster</dt><dd><code>${d.ray.ray_cluster}</code></dd></div>`}
      ${d.ray.message && html`<div><dt>Message</dt><dd>${d.ray.message}</dd></div>`}</dl>`}
    ${d.log_monitoring && html`<p class="small log-rules">Log monitoring (hang and stall detection): ${d.log_monitoring.rules.map((r) => html`<span class="chip"><code>${r}</code></span> `)}
      ${d.log_monitoring.fired.length ? d.log_monitoring.fired.map((f) => html`<span class="field-error">rule <code>${f.rule}</code> found the job ${f.state}: ${f.why}</span> `) : html`<span class="muted">none has fired</span>`}</p>`}
    ${d.faulty && html`<p class="notice warn">Pod at fault in the last restart: <code>${JSON.stringify(d.faulty)}</code></p>`}
    <div class="actions"><${Act} kind="destructive" class="btn-small" id="job-delete" onClick=${() => setAsk(true)}>Delete the job</${Act}></div>
    <${ErrorBox} error=${delErr}/>
    <section aria-labelledby="pods-h"><h2 id="pods-h">Pods</h2>
      ${(d.pods || []).length === 0 ? html`<p class="muted">No pods${DONE[d.phase] ? " (a finished job's pods are cleaned up)" : " yet"}.</p>` : html`
      <div class="table-wrap"><table class="table pods stack"><thead><tr><th scope="col">Pod</th><th scope="col">Phase</th><th scope="col">Node</th><th scope="col">Restarts</th></tr></thead>
      <tbody>${d.pods.map((x) => html`<tr data-pod=${x.name}><td><code>${x.name}</code>${x.role && html` <span class="muted small">${x.role}</span>`}</td><td data-label="Phase"><${Pill} status=${x.phase}/></td>
        <td data-label="Node"><code class="wrap">${x.node || "—"}</code></td><td data-label="Restarts" class="num">${x.restarts}</td></tr>`)}</tbody></table></div>`}
    </section>
    <${LogView} target=${{ kind: "training_job", name, namespace, ...(cluster ? { cluster } : {}) }} fallback=${fallback} hasTool=${has} done=${!!DONE[d.phase]} finished=${!!DONE[d.phase] && (d.pods || []).length === 0} title="Logs"/>
    <section aria-labelledby="cond-h"><h2 id="cond-h">Conditions</h2>
      ${(d.conditions || []).length === 0 ? html`<p class="muted">None yet.</p>` : html`<ul class="plain conditions">${d.conditions.map((c) => html`<li>
        <span class=${"cond cond-" + (c.status === "True" ? "true" : "false")} title=${c.reason}><span aria-hidden="true">${c.status === "True" ? "✓" : "○"}</span> ${c.type}${c.status === "True" ? "" : " (no longer)"}</span> <span class="small">${c.message}</span> <span class="muted small"><${Time} t=${stamp(c.lastTransitionTime)}/></span></li>`)}</ul>`}
    </section>
    <${Events} events=${d.events}/>`}
    <${Confirm} open=${ask} title=${`Delete the job ${name}?`} typeToConfirm=${name} action="Delete the job"
      items=${[`${d ? d.kind : "job"} ${namespace}/${name}`, "its pods"]} lost="The job stops now; its pods and their logs go. Checkpoints and outputs under /s3 stay in the bucket."
      onConfirm=${del} onClose=${() => setAsk(false)}/>`;
}

export default { path: "/training/:name", navPath: "/training", title: (p) => "Job " + p.name, view: Job };
