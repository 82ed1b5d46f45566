// Cluster › Storage (storage_list): S3 and FSx storages with their claims;
// create (storage_create_s3's and storage_create_fsx's forms, followed
// live), browse an S3 storage's contents (storage_list_contents, folders
// and pages; the claim and folder in the URL), delete (storage_delete,
// after a typed confirmation that says what is kept and what is lost).
import { html, useState } from "/vendor/preact-htm.js";
import { SchemaForm } from "/lib/form.js";
import { dropDraft } from "/lib/draft.js";
import { setQuery } from "/lib/router.js";
import { Act, Confirm, ErrorBox, Loading, Pill, Time } from "/lib/ui.js";
import { Follow, Section, bytes, useMutation, useRead, useToolDef } from "/lib/cluster-ui.js";

function CreateForm({ tool, label, cluster, mut, onDone }) {
  const { def, error } = useToolDef(tool);
  if (error) return html`<${ErrorBox} error=${error}/>`;
  if (!def) return html`<${Loading} what="Loading the form"/>`;
  return html`<div class="panel form-panel" data-tool=${tool}><h3>${label} <span class="muted small"><code>${tool}</code></span></h3>
    <p class="muted small">${def.summary}.</p>
    <${SchemaForm} schema=${def.input_schema} id=${"form-" + tool} hide=${["cluster", "plan", "operation_id"]} errors=${mut.error} busy=${mut.busy}
      actions=${[{ label: "Create", kind: def.kind }]} draft=${`storage:${tool}:${cluster}`}
      onSubmit=${async (p) => { if (await mut.run(tool, { ...p, cluster })) { dropDraft(`storage:${tool}:${cluster}`); onDone(); } }}/>
    <button type="button" class="btn btn-small" onClick=${onDone}>Cancel</button></div>`;
}

function Contents({ cluster, claim, namespace, prefix, size }) {
  const [tokens, setTokens] = useState([]); // page tokens of the pages before this one
  const [tok, setTok] = useState(undefined);
  const r = useRead("storage_list_contents", { cluster, claim_name: claim, namespace, prefix, page_size: size, ...(tok ? { page_token: tok } : {}) });
  const d = r.data || {};
  const folders = d.folders || [];
  const objects = d.objects || [];
  const go = (p) => { setTokens([]); setTok(undefined); setQuery({ prefix: p }); };
  const pageNo = tokens.length + 1;
  const parts = prefix.split("/").filter(Boolean);
  return html`<section class="contents panel" aria-label=${"contents of " + claim} data-claim=${claim}>
    <div class="csec-head"><h3>Contents of <code>${claim}</code> ${d.bucket && html`<span class="muted small">s3://${d.bucket}/</span>`}</h3>
      <button type="button" class="btn btn-small" onClick=${() => setQuery({ browse: "", prefix: "" })}>Close</button></div>
    <nav class="crumbs" aria-label="folder"><button type="button" class="linkish" onClick=${() => go("")}>top</button>
      ${parts.map((p, i) => html` / <button type="button" class="linkish" onClick=${() => go(parts.slice(0, i + 1).join("/") + "/")}>${p}</button>`)}</nav>
    <${ErrorBox} error=${r.error}/>
    ${r.loading && !r.data ? html`<${Loading} what="Listing"/>`
      : folders.length + objects.length === 0 ? html`<div class="empty contents-empty"><p class="empty-title">${prefix ? "This folder is empty." : "The bucket is empty."}</p>
          <p>Copy data in with <code>aws s3 cp</code> or from a pod that mounts the claim.</p></div>`
      : html`<div class="table-wrap cwrap"><table class="table objects"><thead><tr><th scope="col">Name</th><th scope="col">Size</th><th scope="col">Modified</th></tr></thead>
        <tbody>${folders.map((f) => { const p = typeof f === "string" ? f : f.prefix || f.name; return html`<tr data-folder=${p}>
            <td><button type="button" class="linkish" onClick=${() => go(p)}>${p.slice(prefix.length)}</button></td><td class="muted">folder</td><td></td></tr>`; })}
          ${objects.map((o) => html`<tr data-object=${o.key}><td><code>${(o.key || "").slice(prefix.length)}</code></td><td class="num">${bytes(o.size)}</td>
            <td>${o.last_modified ? html`<${Time} t=${Date.parse(o.last_modified) / 1000}/>` : ""}</td></tr>`)}</tbody></table></div>`}
    <p class="pager">${tokens.length > 0 && html`<button type="button" class="btn btn-small" onClick=${() => { setTok(tokens[tokens.length - 1]); setTokens(tokens.slice(0, -1)); }}>Previous page</button>`}
      ${d.next_page_token && html`<button type="button" class="btn btn-small" id="contents-next" onClick=${() => { setTokens([...tokens, tok]); setTok(d.next_page_token); }}>Next page</button>`}
      <span class="muted small" id="contents-count">page ${pageNo}: ${folders.length} ${folders.length === 1 ? "folder" : "folders"}, ${objects.length} ${objects.length === 1 ? "object" : "objects"}${d.truncated ? " on this page" : ""}</span></p>
  </section>`;
}

export default function Storage({ cluster, query }) {
  const r = useRead("storage_list", { cluster });
  const mut = useMutation(query);
  const [ask, setAsk] = useState(null);
  const list = (r.data && r.data.storages) || [];
  const form = query.form;
  const browse = list.find((s) => s.claim === query.browse);
  const lost = (s) => s.type === "s3"
    ? `The claim ${s.namespace}/${s.claim} and volume ${s.volume} are deleted: pods mounting it lose it. The bucket ${s.bucket} and its data are kept.`
    : `The claim ${s.namespace}/${s.claim} and volume ${s.volume} are deleted: pods mounting it lose it. The file system ${s.file_system_id || ""} and its data are kept.`;
  return html`<${Section} id="storage" title="Storage" loading=${r.loading && !r.data} error=${r.error}
      empty=${r.data && list.length === 0 ? "No storage yet." : null} emptyHint="Create an S3 bucket mount or an FSx for Lustre file system."
      actions=${html`<${Act} kind="mutating" class="btn-small" id="storage-add-s3" onClick=${() => setQuery({ form: "s3" })}>Create S3 storage</${Act}>
        <${Act} kind="mutating" class="btn-small" id="storage-add-fsx" onClick=${() => setQuery({ form: "fsx" })}>Create FSx storage</${Act}>`}>
    <div class="table-wrap cwrap"><table class="table storages stack">
      <thead><tr><th scope="col">Claim</th><th scope="col">Type</th><th scope="col">Backed by</th><th scope="col">Status</th><th scope="col">Capacity</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${list.map((s) => html`<tr data-claim=${s.claim}>
        <td><code>${s.namespace}/${s.claim}</code><div class="muted small">${s.managed_by_hypd ? "made by hypd" : "not hypd's"}</div></td>
        <td data-label="Type">${s.type === "s3" ? "S3" : s.type === "fsx" ? "FSx for Lustre" : s.type}</td>
        <td data-label="Backed by"><code class="wrap">${s.bucket || s.file_system_id || s.dns_name || "—"}</code></td>
        <td data-label="Status"><${Pill} status=${s.claim_phase || "unknown"} title=${"claim " + (s.claim_phase || "?") + ", volume " + (s.volume_phase || "?")}/>
          ${s.bucket_status && html`<div class="muted small">bucket ${s.bucket_status}</div>`}${s.file_system_status && html`<div class="muted small">file system ${s.file_system_status}</div>`}</td>
        <td data-label="Capacity">${s.capacity}</td>
        <td class="row-actions">${s.type === "s3" && html`<button type="button" class="btn btn-small" data-browse=${s.claim} onClick=${() => setQuery({ browse: s.claim, prefix: "" })}>Contents</button>`}
          <${Act} kind="destructive" class="btn-small" data-delete=${s.claim} onClick=${() => setAsk(s)}>Delete</${Act}></td></tr>`)}</tbody>
    </table></div>
  </${Section}>
  ${form === "s3" && html`<${CreateForm} tool="storage_create_s3" label="Create S3 storage" cluster=${cluster} mut=${mut} onDone=${() => setQuery({ form: "" })}/>`}
  ${form === "fsx" && html`<${CreateForm} tool="storage_create_fsx" label="Create FSx for Lustre storage" cluster=${cluster} mut=${mut} onDone=${() => setQuery({ form: "" })}/>`}
  ${!form && html`<${ErrorBox} error=${mut.error}/>`}
  ${mut.op && html`<${Follow} key=${mut.op} id=${mut.op} onDone=${r.reload} onClose=${mut.close}/>`}
  ${browse && html`<${Contents} key=${browse.claim} cluster=${cluster} claim=${browse.claim} namespace=${browse.namespace} prefix=${query.prefix || ""}
    size=${Math.min(1000, Math.max(1, Number(query.size) || 100))}/>`}
  <${Confirm} open=${!!ask} title=${ask ? `Delete the storage ${ask.claim}?` : ""} typeToConfirm=${ask && ask.claim} action="Delete the storage"
    items=${ask ? [`claim ${ask.namespace}/${ask.claim}`, `volume ${ask.volume}`] : []} lost=${ask ? lost(ask) : ""}
    onConfirm=${() => { const s = ask; setAsk(null); mut.run("storage_delete", { cluster, claim_name: s.claim, namespace: s.namespace }); }} onClose=${() => setAsk(null)}/>`;
}
