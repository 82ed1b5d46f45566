// Models (#/models[?cluster=&op=ID | job=NAME&namespace=]): download a
// model from Hugging Face into the S3 storage (model_download's form; its
// token is a password field, never shown again), the download followed (its
// operation; job_get_status's long poll, by the operation's id until the
// Job is known; the Job's live logs), then the files it wrote, listed from
// the storage (storage_list_contents). The Jobs so far are job_list's.
// The form's fields are a draft (web/lib/draft.js; never the token) until
// the download succeeds: a refused call or a failed download keeps them.
import { html, useEffect, useMemo, useState } from "/vendor/preact-htm.js";
import { dropDraft } from "/lib/draft.js";
import { callTool } from "/lib/api.js";
import { SchemaForm } from "/lib/form.js";
import { LogView } from "/lib/logs.js";
import { href, setQuery } from "/lib/router.js";
import { Empty, ErrorBox, Loading, Pill } from "/lib/ui.js";
import { Follow, Section, bytes, useRead, useToolDef } from "/lib/cluster-ui.js";
import { ClusterPick, Missing, lacking, useCluster, useHas, usePoll } from "/lib/workload.js";

const HIDE = ["cluster", "region", "plan", "wait_seconds", "operation_id"];
const FINAL = /^(succeeded|completed|complete|failed|error)$/i;
const phaseOf = (d) => d && (d.phase || d.status || d.state);

// secrets(schema): a field that holds a token is a password field even when the schema forgets to say so
function secrets(schema) {
  if (!schema || !schema.properties) return schema;
  const props = {};
  for (const [k, p] of Object.entries(schema.properties)) props[k] = /token|secret|password/i.test(k) ? { ...p, writeOnly: true } : p;
  return { ...schema, properties: props };
}

function Facts({ data }) {
  const skip = new Set(["cluster", "region", "events", "pods", "logs", "conditions", "changed"]);
  const rows = Object.entries(data || {}).filter(([k, v]) => !skip.has(k) && v !== null && v !== undefined && v !== "" && typeof v !== "object");
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

// a download Job (?job=NAME&namespace=): job_get_status, long-polled until it ends
function Progress({ cluster, job, namespace, has }) {
  const p = { name: job, namespace, ...(cluster ? { cluster } : {}) };
  const st = usePoll("job_get_status", p, { done: (d) => FINAL.test(String(d.phase || "")), wait: 20 });
  const d = st.data || {};
  const ph = phaseOf(st.data);
  const w = d.download;
  const name = d.pods ? d.name : null; // the Job exists once its view has pods (job_get_status's own answer before it: Pending, no pods)
  return html`<section class="panel download" aria-label="the download" data-job=${d.name || job || ""} data-phase=${ph || ""}>
    <div class="csec-head"><h2>Download ${d.name ? html`<code>${d.namespace}/${d.name}</code>` : ""} ${ph && html`<${Pill} status=${ph}/>`}</h2>
      <button type="button" class="btn btn-small" onClick=${() => setQuery({ job: "", op: "", namespace: "" })}>Close</button></div>
    <${ErrorBox} error=${st.error}/>
    ${w && w.progress && html`<div class="dl-progress" data-stage=${w.progress.stage}><progress max="100" value=${w.progress.percent ?? 0} aria-label="download progress"></progress>
      <span class="small">${w.progress.stage}${w.progress.files_total ? `: ${w.progress.files_done ?? 0} of ${w.progress.files_total} files` : ""}${w.progress.percent !== undefined ? ` (${w.progress.percent}%)` : ""}${w.progress.file ? " · " + w.progress.file : ""}</span></div>`}
    ${st.data ? html`<${Facts} data=${{ model: w && w.model_id, revision: w && w.revision, phase: ph, message: d.message,
      active: d.active, succeeded: d.succeeded, failed: d.failed, started: d.start_time, finished: d.completion_time,
      files: w && w.files ? w.files.length : undefined, bytes: w && w.bytes !== undefined ? bytes(w.bytes) : undefined, into: w && w.s3_uri }}/>
      ${(d.pods || []).length > 0 && html`<p class="small">${d.pods.map((x) => html`<span class="chip"><code>${x.name}</code> ${x.phase}${x.node ? " on " + x.node : ""}</span> `)}</p>`}`
      : !st.error && html`<${Loading} what="Reading the job"/>`}
    ${name && html`<${LogView} target=${{ kind: "job", name, namespace: d.namespace, ...(cluster ? { cluster } : {}) }} hasTool=${has}
      done=${FINAL.test(ph || "")} finished=${FINAL.test(ph || "") && (d.pods || []).length === 0} title="The job's logs" id="job-logs"/>`}
    ${w && w.claim_name && has("storage_list_contents") && FINAL.test(ph || "") && html`<${Files} key=${ph} cluster=${cluster} claim=${w.claim_name}
      namespace=${d.namespace} prefix=${w.destination + "/"}/>`}
  </section>`;
}

// a finished download: what its operation answered, and its folder in the storage
function Done({ cluster, r, has }) {
  return html`<section class="panel download" aria-label="the download" data-job=${r.name} data-phase=${r.phase || "Succeeded"}>
    <div class="csec-head"><h2>Downloaded <code>${r.model_id}</code> <${Pill} status=${r.phase || "Succeeded"}/></h2>
      <button type="button" class="btn btn-small" onClick=${() => setQuery({ op: "" })}>Close</button></div>
    <${Facts} data=${{ revision: r.revision, files: (r.files || []).length, bytes: r.bytes !== undefined ? bytes(r.bytes) : undefined,
      into: r.s3_uri, "in pods": r.path, job: `${r.namespace}/${r.name}` }}/>
    <p class="muted small">Use it as <code>${r.destination}</code> in a training recipe's <code>model</code>, or mount the claim and serve <code>${r.path}</code>.</p>
    ${has("storage_list_contents") && html`<${Files} cluster=${cluster} claim=${r.claim_name} namespace=${r.namespace} prefix=${r.destination + "/"}/>`}
  </section>`;
}

function Downloads({ cluster }) {
  const r = useRead("job_list", cluster ? { cluster } : {});
  const jobs = (r.data && (r.data.jobs || r.data.items)) || [];
  return html`<${Section} id="downloads" title="Download jobs" loading=${r.loading && !r.data} error=${r.error}
      empty=${r.data && jobs.length === 0 ? "No download jobs yet." : null} emptyHint="Download a model above: it runs as a CPU-only Kubernetes Job.">
    <div class="table-wrap"><table class="table stack"><thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Model</th></tr></thead>
      <tbody>${jobs.map((j) => html`<tr data-job=${j.name}><td><button type="button" class="linkish" onClick=${() => setQuery({ job: j.name, namespace: j.namespace || "", op: "" })}><code>${j.namespace || "default"}/${j.name}</code></button></td>
        <td data-label="Status"><${Pill} status=${phaseOf(j) || "unknown"}/></td><td data-label="Model"><code>${j.model_id || j.model || ""}</code></td></tr>`)}</tbody></table></div>
  </${Section}>`;
}

// <DownloadForm cluster view/>: view is the followed operation's (a download of this form, or none)
function DownloadForm({ cluster, view }) {
  const { def, error } = useToolDef("model_download");
  const draft = "models:model_download:" + cluster;
  const ended = view && view.tool === "model_download" ? view.status : null;
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const schema = useMemo(() => def && secrets(def.input_schema), [def]);
  const [n, setN] = useState(0); // a new form after each download: the token is not kept in the page
  // the download done, its fields are too; failed, they stay as typed
  useEffect(() => { if (ended === "succeeded") { dropDraft(draft); setN((x) => x + 1); } }, [ended, draft]);
  const submit = async (p) => {
    setBusy(true); setErrors(null);
    try {
      const r = await callTool("model_download", { ...p, ...(cluster ? { cluster } : {}) });
      if (r.operation_id) { setN((x) => x + 1); setQuery({ op: r.operation_id, job: "", namespace: "" }); }
    } catch (e) { setErrors(e); } finally { setBusy(false); }
  };
  return html`<section class="panel form-panel" aria-label="download a model"><h2>Download from Hugging Face <span class="muted small"><code>model_download</code></span></h2>
      ${error ? html`<${ErrorBox} error=${error}/>` : !def ? html`<${Loading} what="Loading the form"/>` : html`
        <p class="muted small">${def.summary}. A token is kept in a Kubernetes Secret and never shown or logged.</p>
        ${(ended === "failed" || ended === "cancelled") && html`<p class="notice warn" id="download-kept" role="status">The download ${ended}: its
          fields are as you typed them, to change or try again (a token is never kept: give it again).</p>`}
        <${SchemaForm} key=${n} schema=${schema} id="download-form" hide=${HIDE} errors=${errors} busy=${busy}
          actions=${[{ label: "Download", kind: def.kind }]} onSubmit=${submit} draft=${draft}/>`}
    </section>`;
}

function Models({ query }) {
  const has = useHas();
  const cluster = useCluster(query);
  const missing = lacking(has, ["model_download", "job_get_status", "job_list"]);
  // the download's operation: while it runs, the Job is followed (job_get_status by the
  // operation's id); once it has succeeded, its result says where the files went
  const [opView, setOpView] = useState(null);
  const v = opView && opView.operation_id === query.op ? opView : null;
  const running = v && v.status === "running" && v.phase !== "check";
  const follow = cluster && has("job_get_status") && !query.op && query.job;
  // the Job an operation makes: the last two parts of its target (jobs/REGION/CLUSTER/NAMESPACE/NAME)
  const made = v && /^jobs\//.test(v.target || "") ? v.target.split("/").slice(-2) : null;
  return html`<div class="page-head"><h1>Models</h1><${ClusterPick} value=${cluster}/></div>
    <p class="muted">Models are downloaded from Hugging Face into the cluster's S3 storage (mounted at <code>/s3</code> in training and inference pods) by a CPU-only Kubernetes Job, so no GPU idles while files move.</p>
    ${missing.length > 0 && html`<${Missing} tools=${missing} what=${missing.includes("model_download") ? "Downloading a model" : "Part of this page"}/>`}
    ${!cluster && html`<${Empty} title="No active cluster.">Pick or <a href=${href("/create")}>create</a> a cluster first.</${Empty}>`}
    ${cluster && has("model_download") && html`<${DownloadForm} cluster=${cluster} view=${v}/>`}
    ${query.op && html`<${Follow} key=${query.op} id=${query.op} onView=${setOpView} onClose=${() => setQuery({ op: "" })}/>`}
    ${follow && html`<${Progress} key=${query.job} cluster=${cluster} job=${query.job} namespace=${query.namespace || "default"} has=${has}/>`}
    ${running && made && html`<section class="panel download" aria-label="the download" data-job=${made[1]} data-phase="Running">
      <h2>Downloading into Job <code>${made[0]}/${made[1]}</code></h2>
      <p class="muted small">Its progress is the operation's note above; <button type="button" class="linkish" onClick=${() => setQuery({ op: "", job: made[1], namespace: made[0] })}>the Job's own status</button> (job_get_status) is there while it exists.</p>
      <${LogView} target=${{ kind: "job", name: made[1], namespace: made[0], ...(cluster ? { cluster } : {}) }} hasTool=${has} title="The job's logs" id="job-logs"/></section>`}
    ${v && v.status === "succeeded" && v.result && html`<${Done} cluster=${cluster} r=${v.result} has=${has}/>`}
    ${cluster && has("job_list") && html`<${Downloads} cluster=${cluster}/>`}`;
}

export default { path: "/models", title: "Models", nav: "Models", view: Models };
