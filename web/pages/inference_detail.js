// One inference endpoint (#/inference/NAME[?namespace=&cluster=]):
// inference_get (replicas, pods and their nodes, the service it is reached
// through, events, and why a pod is Pending: the scheduler's words), a box
// to send a test prompt (inference_call_model: the answer and its latency),
// scale (inference_scale), its live logs, and delete (inference_delete,
// after a typed confirmation).
import { html, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { LogView } from "/lib/logs.js";
import { href, navigate } from "/lib/router.js";
import { Act, Confirm, ErrorBox, Json, Loading, Pill, duration } from "/lib/ui.js";
import { ClusterPick, Events, Missing, lacking, useItem, usePoll } from "/lib/workload.js";
import { ToolForm, state } from "./inference.js";

// answer(r) -> the text of a chat completion, however the tool puts it
export function answer(r) {
  if (!r) return "";
  if (typeof r.answer === "string") return r.answer;
  if (typeof r.content === "string") return r.content;
  const c = r.response && r.response.choices ? r.response.choices : r.choices;
  if (c && c[0]) return (c[0].message && c[0].message.content) || c[0].text || "";
  return "";
}
// latency(r) -> seconds
export function latency(r) {
  if (!r) return undefined;
  if (r.latency_ms !== undefined) return r.latency_ms / 1000;
  if (r.latency_seconds !== undefined) return r.latency_seconds;
  if (typeof r.latency === "number") return r.latency;
  return undefined;
}

function Prompt({ id, cluster, has }) {
  const [result, setResult] = useState(null);
  if (!has("inference_call_model")) return has("inference_call_model") === false && html`<${Missing} tools=${["inference_call_model"]} what="Sending a test prompt"/>`;
  const took = latency(result);
  return html`<section class="panel prompt-box" id="prompt" aria-labelledby="prompt-h"><h2 id="prompt-h">Test prompt</h2>
    <p class="muted small">An OpenAI-style chat completion sent to the endpoint through the Kubernetes API's service proxy (<code>inference_call_model</code>).</p>
    <${ToolForm} tool="inference_call_model" cluster=${cluster} values=${id} hide=${["messages"]} label="Send" id="prompt-form" onResult=${setResult}/>
    ${result && html`<div class="prompt-result" aria-live="polite"><div class="prompt-meta">
        ${took !== undefined && html`<span>Latency <strong id="prompt-latency">${duration(took)}</strong></span>`}
        ${result.model && html`<span>Model <code>${result.model}</code></span>`}
        ${result.service && html`<span>Through <code>${typeof result.service === "object" ? result.service.name : result.service}</code></span>`}
        ${result.pod && html`<span>Answered by <code>${result.pod}</code></span>`}
        ${result.usage && html`<span class="muted small">${result.usage.prompt_tokens ?? "?"} prompt + ${result.usage.completion_tokens ?? "?"} completion tokens</span>`}</div>
      <p class="answer" id="prompt-answer">${answer(result) || html`<span class="muted">(no text in the answer)</span>`}</p>
      <details><summary>The whole answer</summary><${Json} value=${result}/></details></div>`}
  </section>`;
}

function Pending({ d }) {
  const pods = (d.pods || []).filter((p) => p.phase === "Pending");
  if (!pods.length) return null;
  const why = d.pending_reason || pods.map((p) => p.pending_reason).find(Boolean) || (d.events || []).filter((e) => e.reason === "FailedScheduling").map((e) => e.message).pop();
  return html`<div class="notice warn" id="pending-why" role="status"><strong>${pods.length} ${pods.length === 1 ? "pod is" : "pods are"} Pending.</strong>
    ${why ? html` The scheduler says: <span class="pending-reason">${why}</span>` : " No scheduler event explains it yet."}</div>`;
}

function Detail({ params, query }) {
  const { has, cluster, name, namespace, id } = useItem(params, query);
  const missing = lacking(has, ["inference_get"]);
  if (missing.length) return html`<h1>Endpoint <code>${name}</code></h1><${Missing} tools=${missing} what="Reading an endpoint"/>`;
  if (!has("inference_get")) return html`<${Loading}/>`;
  return html`<${DetailOf} id=${id} name=${name} namespace=${namespace} cluster=${cluster} query=${query} has=${has}/>`;
}

function DetailOf({ id, name, namespace, cluster, query, has }) {
  // read, then long-polled (inference_get's wait_seconds: it answers when replicas, pods or their assignment change)
  const r = usePoll("inference_get", id, { done: (x) => x.gone, wait: 20 });
  const [ask, setAsk] = useState(false);
  const [delErr, setDelErr] = useState(null);
  const d = r.data;
  const del = async () => {
    setAsk(false);
    try { await callTool("inference_delete", id); navigate("/inference", { cluster: query.cluster }); } catch (e) { setDelErr(e); }
  };
  const svc = d && d.service;
  const reps = (d && d.replicas) || {};
  return html`<p class="crumbs"><a href=${href("/inference", { cluster: query.cluster })}>Inference</a> / <code>${namespace}/${name}</code></p>
    <div class="page-head"><h1>Endpoint <code>${name}</code> ${d && html`<${Pill} status=${d.gone ? "deleted" : state(d)}/>`}</h1><${ClusterPick} value=${cluster}/></div>
    <${ErrorBox} error=${r.error}/>
    ${!d ? !r.error && html`<${Loading} what="Reading the endpoint"/>` : html`
    <dl class="facts summary-facts endpoint-facts">
      <div><dt>Kind</dt><dd>${d.kind || d.type || "—"}</dd></div>
      <div><dt>Replicas</dt><dd class="num" id="replicas">${reps.ready ?? "?"} ready of ${reps.desired ?? "?"}</dd></div>
      ${d.image && html`<div><dt>Image</dt><dd><code class="wrap">${d.image}</code></dd></div>`}
      ${d.engine && html`<div><dt>Engine</dt><dd>${d.engine}</dd></div>`}
      ${d.port && html`<div><dt>Port</dt><dd class="num">${d.port}</dd></div>`}
      <div><dt>Service</dt><dd id="service">${svc ? html`<code>${svc.name}</code> <span class="muted">${svc.type || ""} ${svc.cluster_ip || ""}${svc.port ? ":" + svc.port : ""}${svc.external ? " · " + svc.external : ""}
        · ${(svc.endpoints || []).length} ready ${(svc.endpoints || []).length === 1 ? "endpoint" : "endpoints"}</span>` : d.kind === "pool" ? html`<span class="muted">none (a pool: each assigned model has its own)</span>` : html`<span class="muted">none</span>`}</dd></div>
      ${d.object && html`<div><dt>Object</dt><dd><code>${d.object}</code></dd></div>`}
    </dl>
    <${Pending} d=${d}/>
    ${(d.autoscaling || []).length > 0 && html`<section class="panel autoscaling" aria-labelledby="as-h"><h2 id="as-h">Autoscaling</h2>
      <ul class="plain">${d.autoscaling.map((a) => html`<li data-scaledobject=${a.name}><code>${a.name}</code> (KEDA ScaledObject): ${a.min ?? "?"} to ${a.max ?? "?"} replicas
        <${Pill} status=${a.ready ? (a.active ? "active" : "ready") : "not ready"} title=${a.message || ""}/>
        ${a.triggers.map((t) => html`<div class="small">${t.type}: <code class="wrap">${t.query}</code> above ${t.threshold}</div>`)}</li>`)}</ul></section>`}
    <div class="actions">
      ${has("inference_scale") && html`<details class="scale"><summary>Scale</summary>
        <${ToolForm} tool="inference_scale" cluster=${cluster} values=${id} label="Scale" id="scale-form" onResult=${r.reload}/></details>`}
      ${has("inference_delete") && html`<${Act} kind="destructive" class="btn-small" id="endpoint-delete" onClick=${() => setAsk(true)}>Delete</${Act}>`}
    </div>
    ${lacking(has, ["inference_scale", "inference_delete"]).length > 0 && html`<${Missing} tools=${lacking(has, ["inference_scale", "inference_delete"])} what="Scaling or deleting"/>`}
    <${ErrorBox} error=${delErr}/>
    <${Prompt} id=${id} cluster=${cluster} has=${has}/>
    <section aria-labelledby="pods-h"><h2 id="pods-h">Pods</h2>
      ${(d.pods || []).length === 0 ? html`<p class="muted">No pods.</p>` : html`<div class="table-wrap"><table class="table pods stack">
        <thead><tr><th scope="col">Pod</th><th scope="col">Phase</th><th scope="col">Ready</th><th scope="col">Node</th><th scope="col">Restarts</th></tr></thead>
        <tbody>${d.pods.map((p) => html`<tr data-pod=${p.name}><td><code>${p.name}</code>${p.assigned && html`<div class="small">serves <code>${p.assigned}</code></div>`}
          ${p.pending_reason && html`<div class="small pending-reason">${p.pending_reason}</div>`}</td><td data-label="Phase"><${Pill} status=${p.terminating ? "terminating" : p.phase}/></td>
          <td data-label="Ready">${p.ready === undefined ? "—" : p.ready ? "yes" : "no"}</td><td data-label="Node"><code class="wrap">${p.node || "—"}</code></td>
          <td data-label="Restarts" class="num">${p.restarts ?? "—"}</td></tr>`)}</tbody></table></div>`}
    </section>
    <${LogView} target=${{ kind: "inference", ...id }} hasTool=${has} title="Logs"/>
    <${Events} events=${d.events}/>
    <details><summary>Everything inference_get answers</summary><${Json} value=${d}/></details>`}
    <${Confirm} open=${ask} title=${`Delete the endpoint ${name}?`} typeToConfirm=${name} action="Delete the endpoint"
      items=${[`${d ? d.kind || "deployment" : "deployment"} ${namespace}/${name}`, "its pods", "its service (if hypd made it)"]}
      lost="Requests to it fail from now on. Model files in storage stay." onConfirm=${del} onClose=${() => setAsk(false)}/>`;
}

export default { path: "/inference/:name", navPath: "/inference", title: (p) => "Endpoint " + p.name, view: Detail };
