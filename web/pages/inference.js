// Inference (#/inference[?cluster=&deploy=container|managed|jumpstart|router|autoscaling&op=ID]):
// the endpoints (inference_list), each linking to its page
// (web/pages/inference_detail.js); deploy forms generated from the tools'
// schemas (a container image, a managed InferenceEndpointConfig, a JumpStart
// model chosen from the public hub, an SGLang router, autoscaling); the
// model pools with their warm pods, assigned to a model or released.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { SchemaForm } from "/lib/form.js";
import { dropDraft } from "/lib/draft.js";
import { clusterTypes } from "/lib/choices.js";
import { href, setQuery } from "/lib/router.js";
import { Act, Confirm, Empty, ErrorBox, Loading, Pill } from "/lib/ui.js";
import { Follow, Section, moving, useRead, useToolDef } from "/lib/cluster-ui.js";
import { ClusterPick, Missing, lacking, useCluster, useHas } from "/lib/workload.js";

export const HIDE = ["cluster", "region", "plan", "wait_seconds"];
const DEPLOY = [
  { id: "container", tool: "inference_deploy_container", title: "Container", what: "A vLLM, SGLang or any image as a Deployment: cluster-internal, behind a load balancer, or a model pool of warm workers" },
  { id: "managed", tool: "inference_deploy_managed", title: "Managed", what: "An InferenceEndpointConfig for the HyperPod inference operator (model from S3 or FSx)" },
  { id: "jumpstart", tool: "inference_deploy_jumpstart", title: "JumpStart", what: "A JumpStart model from the SageMaker public hub" },
  { id: "router", tool: "inference_deploy_router", title: "Router", what: "The SGLang router with cache-aware routing in front of several SGLang replicas" },
  { id: "autoscaling", tool: "inference_set_autoscaling", title: "Autoscaling", what: "A KEDA ScaledObject on a Prometheus query for a deployment" },
];

export const endpointHref = (e, cluster) => href("/inference/" + e.name, { namespace: e.namespace && e.namespace !== "default" ? e.namespace : "", cluster });
const kindOf = (e) => e.kind || "";
const ready = (e) => (typeof e.replicas === "object" && e.replicas ? e.replicas.ready : e.ready);
const desired = (e) => (typeof e.replicas === "object" && e.replicas ? e.replicas.desired : e.replicas);
// state(e) -> a word for the list: ready (all replicas), starting, scaled to zero
export const state = (e) => (desired(e) === 0 ? "scaled to 0" : ready(e) >= desired(e) ? "ready" : ready(e) > 0 ? "partly ready" : "pending");

// <ToolForm tool cluster values hide choices label onResult/>: one tool's generated form, its answer or operation followed
export function ToolForm({ tool, cluster, values = {}, hide = [], choices, label = "Deploy", id, onResult }) {
  const { def, error } = useToolDef(tool);
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const [op, setOp] = useState(null);
  const [result, setResult] = useState(null);
  const draft = `inference:${tool}:${cluster || ""}:${JSON.stringify(values)}`; // what the person typed, per form and target
  if (error) return html`<${ErrorBox} error=${error}/>`;
  if (!def) return html`<${Loading} what="Loading the form"/>`;
  const submit = async (p) => {
    setBusy(true); setErrors(null); setResult(null); setOp(null);
    try {
      const r = await callTool(tool, { ...p, ...values, ...(cluster ? { cluster } : {}) });
      if (def.kind !== "read") dropDraft(draft);
      if (r.operation_id) setOp(r.operation_id); else { setResult(r); onResult && onResult(r); }
    } catch (e) { setErrors(e); } finally { setBusy(false); }
  };
  return html`<div class="tool-form-box" data-tool=${tool}>
    <${SchemaForm} schema=${def.input_schema} id=${id || "form-" + tool} values=${values} hide=${[...HIDE, ...hide, ...Object.keys(values)]}
      errors=${errors} busy=${busy} choices=${choices} actions=${[{ label, kind: def.kind }]} onSubmit=${submit} draft=${draft}/>
    ${op && html`<${Follow} key=${op} id=${op} onDone=${(v) => onResult && onResult(v.result, v)} onClose=${() => setOp(null)}/>`}
    ${result && html`<p class="notice small" role="status">Done${result.name ? html`: <code>${result.name}</code>` : ""}.</p>`}
  </div>`;
}

function Deploy({ cluster, query, has, onDone }) {
  const tab = DEPLOY.find((d) => d.id === query.deploy);
  // JumpStart's model ids from the public hub, as the form's choices
  const jumpstart = has("inference_list_jumpstart_models") ? {
    model_id: async () => ((await callTool("inference_list_jumpstart_models", {})).models || [])
      .map((m) => ({ value: m.id, label: `${m.id} ${m.version || ""} — ${m.display_name || m.task || ""}${m.gated ? " (gated: needs accept_eula)" : ""}` })),
  } : undefined;
  return html`<section class="csec" id="deploy" aria-labelledby="deploy-h"><div class="csec-head"><h2 id="deploy-h">Deploy</h2></div>
    <div class="tabs deploy-tabs" role="tablist" aria-label="what to deploy">${DEPLOY.map((d) => html`<button type="button" role="tab" id=${"deploy-" + d.id}
      aria-selected=${tab === d ? "true" : "false"} onClick=${() => setQuery({ deploy: tab === d ? "" : d.id })}>${d.title}</button>`)}</div>
    ${tab && html`<div class="panel form-panel" role="tabpanel" aria-labelledby=${"deploy-" + tab.id}>
      <h3>${tab.title} <span class="muted small"><code>${tab.tool}</code></span></h3><p class="muted small">${tab.what}.</p>
      ${!has(tab.tool) ? has(tab.tool) === false && html`<${Missing} tools=${[tab.tool]} what=${tab.title + " deployment"}/>`
        : html`<${ToolForm} key=${tab.tool} tool=${tab.tool} cluster=${cluster} label=${tab.id === "autoscaling" ? "Set autoscaling" : "Deploy"}
            id=${"deploy-form-" + tab.id} choices=${{ instance_type: clusterTypes(cluster), ...(tab.id === "jumpstart" ? jumpstart : {}) }} onResult=${onDone}/>`}
    </div>`}
  </section>`;
}

// a model pool's pods: which model each serves (business=<model>, or unassigned), assign and release
function Pool({ pool, cluster, has }) {
  const id = { name: pool.name, namespace: pool.namespace || "default", ...(cluster ? { cluster } : {}) };
  const r = useRead("inference_get", id);
  const [busy, setBusy] = useState(null);
  const [err, setErr] = useState(null);
  const [model, setModel] = useState("");
  const [ask, setAsk] = useState(null);
  const pods = (r.data && r.data.pods) || [];
  const models = (r.data && r.data.models) || [];
  const act = async (tool, pod) => {
    setBusy(pod.name); setErr(null);
    const ns = pool.namespace || "default";
    try {
      await callTool(tool, tool === "inference_assign_pool_pod"
        ? { pool: pool.name, model, pods: [pod.name], namespace: ns, ...(cluster ? { cluster } : {}) }
        : { pool: pool.name, pods: [pod.name], namespace: ns, ...(cluster ? { cluster } : {}) });
      r.reload();
    } catch (e) { setErr(e); } finally { setBusy(null); }
  };
  const can = has("inference_assign_pool_pod") && has("inference_release_pool_pod");
  const inp = "pool-model-" + pool.name;
  return html`<div class="panel pool" data-pool=${pool.name}><div class="csec-head"><h3>Pool <code>${id.namespace}/${pool.name}</code>
      <span class="muted small">${r.data ? `${r.data.unassigned ?? "?"} of ${pods.length} unassigned` : ""}</span></h3>
      <a class="small" href=${endpointHref(pool, cluster)}>details</a></div>
    ${!can && html`<${Missing} tools=${lacking(has, ["inference_assign_pool_pod", "inference_release_pool_pod"])} what="Assigning pool pods"/>`}
    <p class="scale-form"><label for=${inp}>Model to assign</label>
      <input id=${inp} value=${model} placeholder="a model name (its Service)" pattern="[a-z0-9]([-a-z0-9]*[a-z0-9])?" onInput=${(e) => setModel(e.target.value)}/>
      <span class="muted small">Assigning relabels a pod <code>business=MODEL</code>; the Service <code>MODEL</code> selects it.</span></p>
    <${ErrorBox} error=${r.error || err}/>
    ${r.loading && !r.data ? html`<${Loading}/>` : pods.length === 0 ? html`<p class="muted">No pods.</p>` : html`
    <div class="table-wrap"><table class="table pool-pods stack"><thead><tr><th scope="col">Pod</th><th scope="col">Phase</th><th scope="col">Node</th><th scope="col">Serves</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${pods.map((p) => { const b = p.assigned || "unassigned"; return html`<tr data-pod=${p.name} data-business=${b}>
        <td><code>${p.name}</code></td><td data-label="Phase"><${Pill} status=${p.phase}/></td><td data-label="Node"><code class="wrap">${p.node || "—"}</code></td>
        <td data-label="Serves">${b === "unassigned" ? html`<span class="muted">unassigned</span>` : html`<code>${b}</code>`}</td>
        <td class="row-actions">${b === "unassigned"
          ? html`<${Act} kind="mutating" class="btn-small" data-assign=${p.name} disabled=${!can || !model || !!busy} title=${model ? "" : "Type the model's name first"} onClick=${() => act("inference_assign_pool_pod", p)}>Assign to ${model || "…"}</${Act}>`
          : html`<${Act} kind="destructive" class="btn-small" data-release=${p.name} disabled=${!can || !!busy} onClick=${() => setAsk(p)}>Release</${Act}>`}</td></tr>`; })}</tbody></table></div>`}
    ${models.length > 0 && html`<p class="small">Models served: ${models.map((m) => html`<span class="chip"><code>${m.name}</code> ${(m.endpoints || []).length} ${(m.endpoints || []).length === 1 ? "pod" : "pods"}${m.cluster_ip ? ", " + m.cluster_ip + ":" + m.port : ""}</span> `)}</p>`}
    <${Confirm} open=${!!ask} title=${ask ? `Release ${ask.name}?` : ""} action="Release it" items=${ask ? [`pod ${ask.name} from model ${ask.assigned}`] : []}
      lost=${ask ? `The pod stops serving ${ask.assigned} and becomes a warm worker again; a model left with no pod loses its Service.` : ""}
      onConfirm=${() => { const p = ask; setAsk(null); act("inference_release_pool_pod", p); }} onClose=${() => setAsk(null)}/>
  </div>`;
}

function Endpoints({ cluster, has, n }) {
  // live: re-read when operations on the cluster move, and every 5 s while an endpoint is not ready
  const r = useRead("inference_list", cluster ? { cluster } : {}, { cluster, moving: (d) => (d.deployments || []).some((e) => moving(state(e))) });
  useEffect(() => { if (n) r.reload(); }, [n]);
  const list = (r.data && r.data.deployments) || [];
  const pools = list.filter((e) => kindOf(e) === "pool");
  return html`<${Section} id="endpoints" title="Endpoints" loading=${r.loading && !r.data} error=${r.error}
      empty=${r.data && list.length === 0 ? "Nothing deployed yet." : null} emptyHint="Deploy a model below: a container image, a managed endpoint or a JumpStart model."
      actions=${html`<button type="button" class="btn btn-small" onClick=${r.reload}>Refresh</button>`}>
    <div class="table-wrap"><table class="table endpoints stack">
      <thead><tr><th scope="col">Name</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Ready</th><th scope="col">Image</th></tr></thead>
      <tbody>${list.map((e) => html`<tr data-endpoint=${e.name}>
        <td><a href=${endpointHref(e, cluster)}><code>${e.namespace || "default"}/${e.name}</code></a></td>
        <td data-label="Kind">${kindOf(e)}${e.engine ? html` <span class="muted small">${e.engine}</span>` : ""}</td><td data-label="State"><${Pill} status=${state(e)}/></td>
        <td data-label="Ready" class="num">${ready(e) ?? "—"} of ${desired(e) ?? "—"}</td>
        <td data-label="Image"><code class="wrap">${e.image || "—"}</code>${e.port ? html` <span class="muted small">port ${e.port}</span>` : ""}</td></tr>`)}</tbody>
    </table></div>
  </${Section}>
  ${pools.length > 0 && html`<section class="csec" id="pools" aria-labelledby="pools-h"><h2 id="pools-h">Model pools</h2>
    ${pools.map((p) => html`<${Pool} key=${p.name} pool=${p} cluster=${cluster} has=${has}/>`)}</section>`}`;
}

function Inference({ query }) {
  const has = useHas();
  const cluster = useCluster(query);
  const [n, setN] = useState(0);
  const hasList = has("inference_list");
  return html`<div class="page-head"><h1>Inference</h1><${ClusterPick} value=${cluster}/></div>
    ${!cluster ? html`<${Empty} title="No active cluster.">Pick or <a href=${href("/create")}>create</a> a cluster first.</${Empty}>` : html`
      ${hasList === false ? html`<${Missing} tools=${["inference_list"]} what="Listing the endpoints"/>` : hasList && html`<${Endpoints} cluster=${cluster} has=${has} n=${n}/>`}
      <${Deploy} cluster=${cluster} query=${query} has=${has} onDone=${() => setN((x) => x + 1)}/>`}`;
}

export default { path: "/inference", title: "Inference", nav: "Inference", view: Inference };
