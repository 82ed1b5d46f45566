// Models (#/models[?cluster=&op=ID&job=NAME&namespace=]): download a model
// from Hugging Face into the S3 storage (model_download's form; its token
// is a password field, never shown again), the download followed (the
// operation, then job_get_status's long poll and the job's live logs), and
// the files it wrote (storage_list_contents). The downloads so far are
// job_list's.
import { html, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { SchemaForm } from "/lib/form.js";
import { LogView } from "/lib/logs.js";
import { href, setQuery } from "/lib/router.js";
import { Empty, ErrorBox, Loading, Pill } from "/lib/ui.js";
import { Follow, Section, bytes, useRead, useToolDef } from "/lib/cluster-ui.js";
import { ClusterPick, Missing, lacking, useCluster, useHas, usePoll } from "/lib/workload.js";

const HIDE = ["cluster", "region", "plan", "wait_seconds"];
const FINAL = /^(succeeded|completed|complete|failed|error)$/i;
const phaseOf = (d) => d && (d.phase || d.status || d.state);

// secrets(schema): a field that holds a token is a password field even when the schema forgets to say so
function secrets(schema) {
  if (!schema || !schema.properties) return schema;
  const props = {};
  for (const [k, p] of Object.entries(schema.properties)) props[k] = /token|secret|password/i.test(k) ? { ...p, writeOnly: true } : p;
  return { ...schema, properties: props };
}

// what a download's operation result says about where it went
export function target(r = {}) {
  const job = r.job_name || (typeof r.job === "string" ? r.job : r.job && r.job.name) || r.name;
  return { job, namespace: r.namespace || (r.job && r.job.namespace) || "default",
    claim: r.storage_claim || r.claim_name || r.claim || "s3-claim", prefix: r.prefix || r.s3_prefix || r.path || "" };
}

function Facts({ data }) {
  const skip = new Set(["cluster", "region", "events", "pods", "logs", "conditions", "changed"]);
  const rows = Object.entries(data || {}).filter(([k, v]) => !skip.has(k) && v !== null && typeof v !== "object");
  return html`<dl class="facts summary-facts progress-facts">${rows.map(([k, v]) => html`<div data-fact=${k}><dt>${k.replace(/_/g, " ")}</dt>
    <dd>${/^(phase|status|state)$/.test(k) ? html`<${Pill} status=${String(v)}/>` : String(v)}</dd></div>`)}</dl>`;
}

function Files({ cluster, claim, namespace, prefix }) {
  const r = useRead("storage_list_contents", { cluster, claim_name: claim, namespace, prefix, page_size: 200 });
  const d = r.data || {};
  const objects = d.objects || [];
  const folders = d.folders || [];
  return html`<section class="panel model-files" aria-label="files in storage" data-claim=${claim}>
    <div class="csec-head"><h3>Files in <code>${claim}</code>${prefix && html` under <code>${prefix}</code>`}</h3>
      <button type="button" class="btn btn-small" onClick=${r.reload}>Refresh</button></div>
    ${d.bucket && html`<p class="muted small">s3://${d.bucket}/${prefix}</p>`}
    <${ErrorBox} error=${r.error}/>
    ${r.loading && !r.data ? html`<${Loading} what="Listing"/>` : objects.length + folders.length === 0
      ? html`<p class="muted files-empty">No files there yet.</p>`
      : html`<div class="table-wrap"><table class="table objects"><thead><tr><th scope="col">Name</th><th scope="col">Size</th></tr></thead>
        <tbody>${folders.map((f) => { const p = typeof f === "string" ? f : f.prefix || f.name; return html`<tr data-folder=${p}><td>${p.slice(prefix.length)}</td><td class="muted">folder</td></tr>`; })}
        ${objects.map((o) => html`<tr data-object=${o.key}><td><code>${(o.key || "").slice(prefix.length)}</code></td><td class="num">${bytes(o.size)}</td></tr>`)}</tbody></table></div>`}
  </section>`;
}

function Progress({ cluster, t, has }) {
  const p = { name: t.job, namespace: t.namespace, ...(cluster ? { cluster } : {}) };
  const st = usePoll("job_get_status", p, { done: (d) => FINAL.test(String(phaseOf(d) || "")), wait: 20, enabled: has("job_get_status") === true });
  const ph = phaseOf(st.data);
  return html`<section class="panel download" aria-label="the download" data-job=${t.job} data-phase=${ph || ""}>
    <div class="csec-head"><h2>Download job <code>${t.namespace}/${t.job}</code> ${ph && html`<${Pill} status=${ph}/>`}</h2>
      <button type="button" class="btn btn-small" onClick=${() => setQuery({ job: "", op: "" })}>Close</button></div>
    ${has("job_get_status") === false ? html`<${Missing} tools=${["job_get_status"]} what="The download's progress"/>` : html`
      <${ErrorBox} error=${st.error}/>${st.data ? html`<${Facts} data=${st.data}/>` : !st.error && html`<${Loading} what="Reading the job"/>`}`}
    <${LogView} target=${{ kind: "job", name: t.job, namespace: t.namespace, ...(cluster ? { cluster } : {}) }} hasTool=${has} title="The job's logs" id="job-logs"/>
    ${has("storage_list_contents") && html`<${Files} key=${ph} cluster=${cluster} claim=${t.claim} namespace=${t.namespace} prefix=${t.prefix}/>`}
  </section>`;
}

function Downloads({ cluster }) {
  const r = useRead("job_list", cluster ? { cluster } : {});
  const jobs = (r.data && (r.data.jobs || r.data.items)) || [];
  return html`<${Section} id="downloads" title="Jobs" loading=${r.loading && !r.data} error=${r.error}
      empty=${r.data && jobs.length === 0 ? "No download jobs yet." : null} emptyHint="Download a model above: it runs as a CPU-only Kubernetes Job.">
    <div class="table-wrap"><table class="table stack"><thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Model</th></tr></thead>
      <tbody>${jobs.map((j) => html`<tr data-job=${j.name}><td><button type="button" class="linkish" onClick=${() => setQuery({ job: j.name, namespace: j.namespace || "", op: "" })}><code>${j.namespace || "default"}/${j.name}</code></button></td>
        <td data-label="Status"><${Pill} status=${phaseOf(j) || "unknown"}/></td><td data-label="Model"><code>${j.model_id || j.model || ""}</code></td></tr>`)}</tbody></table></div>
  </${Section}>`;
}

function DownloadForm({ cluster, setDone }) {
  const { def, error } = useToolDef("model_download");
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (p) => {
    setBusy(true); setErrors(null); setDone(null);
    try {
      const r = await callTool("model_download", { ...p, ...(cluster ? { cluster } : {}) });
      if (r.operation_id) setQuery({ op: r.operation_id, job: "" });
      else setDone(r);
    } catch (e) { setErrors(e); } finally { setBusy(false); }
  };
  return html`<section class="panel form-panel" aria-label="download a model"><h2>Download from Hugging Face <span class="muted small"><code>model_download</code></span></h2>
      ${error ? html`<${ErrorBox} error=${error}/>` : !def ? html`<${Loading} what="Loading the form"/>` : html`
        <p class="muted small">${def.summary}. A token is kept in a Kubernetes Secret and never shown or logged.</p>
        <${SchemaForm} schema=${secrets(def.input_schema)} id="download-form" hide=${HIDE} errors=${errors} busy=${busy}
          actions=${[{ label: "Download", kind: def.kind }]} onSubmit=${submit}/>`}
    </section>`;
}

function Models({ query }) {
  const has = useHas();
  const cluster = useCluster(query);
  const [done, setDone] = useState(null); // a direct answer of model_download
  const missing = lacking(has, ["model_download", "job_get_status", "job_list"]);
  const fromOp = (v) => { if (v.status === "succeeded" && v.result) { const t = target(v.result); if (t.job && t.job !== query.job) setQuery({ job: t.job, namespace: t.namespace, claim: t.claim, prefix: t.prefix }); } };
  const t = query.job ? { job: query.job, namespace: query.namespace || "default", claim: query.claim || "s3-claim", prefix: query.prefix || "" } : done && target(done);
  return html`<div class="page-head"><h1>Models</h1><${ClusterPick} value=${cluster}/></div>
    <p class="muted">Models are downloaded from Hugging Face into the cluster's S3 storage (mounted at <code>/s3</code> in training and inference pods) by a CPU-only Kubernetes Job, so no GPU idles while files move.</p>
    ${missing.length > 0 && html`<${Missing} tools=${missing} what=${missing.includes("model_download") ? "Downloading a model" : "Part of this page"}/>`}
    ${!cluster && html`<${Empty} title="No active cluster.">Pick or <a href=${href("/create")}>create</a> a cluster first.</${Empty}>`}
    ${cluster && has("model_download") && html`<${DownloadForm} cluster=${cluster} setDone=${setDone}/>`}
    ${query.op && html`<${Follow} key=${query.op} id=${query.op} onView=${fromOp} onClose=${() => setQuery({ op: "" })}/>`}
    ${cluster && t && t.job && html`<${Progress} key=${t.job} cluster=${cluster} t=${t} has=${has}/>`}
    ${cluster && has("job_list") && html`<${Downloads} cluster=${cluster}/>`}`;
}

export default { path: "/models", title: "Models", nav: "Models", view: Models };
