// Training (#/training[?cluster=&recipe=NAME&op=ID]): the recipes
// (training_list_recipes), a form generated from the chosen recipe's
// parameter schema, "Review" (training_render's objects as YAML, to read
// and copy), "Submit" (training_submit, its operation followed live), and
// the cluster's jobs (training_list_jobs), each linking to its page
// (web/pages/training_job.js).
import { html, useMemo, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { SchemaForm } from "/lib/form.js";
import { dropDraft } from "/lib/draft.js";
import { clusterTypes } from "/lib/choices.js";
import { href, setQuery } from "/lib/router.js";
import { Act, Empty, ErrorBox, Loading, Pill, Time } from "/lib/ui.js";
import { Follow, Section, moving, useRead } from "/lib/cluster-ui.js";
import { ClusterPick, Missing, Yaml, errorsUnder, lacking, useCluster, useHas } from "/lib/workload.js";

const TOOLS = ["training_list_recipes", "training_render", "training_submit", "training_list_jobs", "training_get_job"];

export const jobHref = (j, cluster) => href("/training/" + j.name, { namespace: j.namespace !== "default" ? j.namespace : "", cluster });

function Recipes({ recipes, chosen }) {
  return html`<ul class="recipe-list">${recipes.map((r) => html`<li class=${r.name === chosen ? "chosen" : ""} data-recipe=${r.name}>
    <div class="recipe-head"><button type="button" class="linkish recipe-pick" aria-pressed=${r.name === chosen ? "true" : "false"}
      onClick=${() => setQuery({ recipe: r.name, op: "" })}><strong>${r.name}</strong></button>
      <span class="muted small">${r.source === "built-in" ? "built in" : r.source}</span></div>
    ${r.error ? html`<p class="field-error">Refused: ${r.error}</p>` : html`<p class="small">${r.description}</p>`}</li>`)}</ul>`;
}

function RecipeForm({ recipe, cluster, query }) {
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const [review, setReview] = useState(null); // {objects, params}
  // the list is read again when operations end: the same schema must not reset what was typed
  const schemaKey = JSON.stringify(recipe.params);
  const schema = useMemo(() => recipe.params, [schemaKey]);
  const choices = useMemo(() => (schema.properties && schema.properties.instance_type ? { instance_type: clusterTypes(cluster) } : undefined), [schemaKey, cluster]);
  const draft = `training:${recipe.name}:${cluster || ""}`;
  const submit = async (params) => {
    setBusy(true); setErrors(null);
    try {
      const r = await callTool("training_submit", { recipe: recipe.name, params, ...(cluster ? { cluster } : {}) });
      dropDraft(draft);
      setReview(null);
      setQuery({ op: r.operation_id });
    } catch (e) { setErrors(e); } finally { setBusy(false); }
  };
  const run = async (params, action) => {
    if (action.label === "Submit") return submit(params);
    setBusy(true); setErrors(null);
    try {
      const r = await callTool("training_render", { recipe: recipe.name, params });
      setReview({ objects: r.objects || [], params });
    } catch (e) { setErrors(e); setReview(null); } finally { setBusy(false); }
  };
  return html`<section class="panel recipe-panel" aria-label=${"recipe " + recipe.name} data-recipe=${recipe.name}>
    <div class="csec-head"><h2>Recipe <code>${recipe.name}</code></h2>
      <button type="button" class="btn btn-small" onClick=${() => setQuery({ recipe: "", op: "" })}>Close</button></div>
    <p class="small">${recipe.description}</p>
    <p class="muted small">Every pod mounts the S3 storage claim at <code>/s3</code>: datasets are read from it, checkpoints and outputs written under
      <code>/s3/checkpoints/JOB</code> and <code>/s3/outputs/JOB</code>.${cluster ? html` Submitted to cluster <code>${cluster}</code>.` : " No cluster is active: pick one above."}</p>
    <div class="tool-layout">
      <div><${SchemaForm} schema=${schema} id="recipe-form" choices=${choices} errors=${errorsUnder(errors, "params")} busy=${busy}
        actions=${[{ label: "Review", kind: "read", plan: true }, { label: "Submit", kind: "mutating" }]} onSubmit=${run} draft=${draft}/></div>
      <div aria-live="polite">
        ${review && html`<section class="review" aria-label="review"><h3>What Submit applies</h3>
          <p class="small">${review.objects.map((o) => html`<span class="chip"><code>${o.kind}</code> ${o.metadata && o.metadata.namespace}/${o.metadata && o.metadata.name}</span> `)}</p>
          <${Yaml} objects=${review.objects} id="review-yaml"/>
          <p><${Act} kind="mutating" id="review-submit" disabled=${busy || !cluster} onClick=${() => submit(review.params)}>Submit these objects</${Act}></p></section>`}
        ${query.op && html`<${Submitted} id=${query.op} cluster=${cluster}/>`}
      </div>
    </div>
  </section>`;
}

function Submitted({ id, cluster }) {
  const [view, setView] = useState(null);
  const r = view && view.status === "succeeded" && view.result;
  return html`<div class="submitted">
    ${r && html`<p class="notice">The job <code>${r.namespace}/${r.name}</code> is ${r.phase}. <a id="open-job" href=${jobHref(r, cluster)}>Open the job and its logs</a></p>`}
    <${Follow} key=${id} id=${id} onView=${setView} onClose=${() => setQuery({ op: "" })}/></div>`;
}

function Jobs({ cluster }) {
  // live: re-read when operations on the cluster move, and every 5 s while a job runs (its pods change by themselves)
  const r = useRead("training_list_jobs", cluster ? { cluster } : {}, { cluster, moving: (d) => (d.jobs || []).some((j) => moving(j.phase)) });
  const jobs = (r.data && r.data.jobs) || [];
  return html`<${Section} id="training-jobs" title="Jobs" loading=${r.loading && !r.data} error=${r.error}
      empty=${r.data && jobs.length === 0 ? "No training jobs yet." : null} emptyHint="Pick a recipe above, fill in its form, review the objects and submit."
      actions=${html`<button type="button" class="btn btn-small" onClick=${r.reload}>Refresh</button>`}>
    <div class="table-wrap"><table class="table jobs stack">
      <thead><tr><th scope="col">Job</th><th scope="col">Phase</th><th scope="col">Recipe</th><th scope="col">Replicas</th><th scope="col">Restarts</th><th scope="col">Created</th></tr></thead>
      <tbody>${jobs.map((j) => html`<tr data-job=${j.name}>
        <td><a href=${jobHref(j, cluster)}><code>${j.namespace}/${j.name}</code></a><div class="muted small">${j.kind}</div></td>
        <td data-label="Phase"><${Pill} status=${j.phase}/></td><td data-label="Recipe">${j.recipe || html`<span class="muted">—</span>`}</td>
        <td data-label="Replicas" class="num">${j.replicas}</td>
        <td data-label="Restarts" class="num">${j.restarts} of ${j.max_retries}</td><td data-label="Created" class="small"><${Time} t=${j.created ? Date.parse(j.created) / 1000 : undefined}/></td></tr>`)}</tbody>
    </table></div>
    ${r.data && (r.data.not_served || []).length > 0 && html`<p class="muted small">Not served on this cluster (their operator is off): ${r.data.not_served.join(", ")}.</p>`}
  </${Section}>`;
}

function Training({ query }) {
  const has = useHas();
  const cluster = useCluster(query);
  const missing = lacking(has, TOOLS);
  const list = useRead("training_list_recipes", {});
  const recipes = (list.data && list.data.recipes) || [];
  const recipe = recipes.find((r) => r.name === query.recipe && !r.error);
  return html`<div class="page-head"><h1>Training</h1><${ClusterPick} value=${cluster}/></div>
    ${missing.length > 0 && html`<${Missing} tools=${missing} what="Part of training"/>`}
    <section class="csec" id="recipes" aria-labelledby="recipes-h"><div class="csec-head"><h2 id="recipes-h">Recipes</h2></div>
      <${ErrorBox} error=${list.error}/>
      ${list.loading && !list.data ? html`<${Loading} what="Loading the recipes"/>` : recipes.length === 0 && !list.error
        ? html`<${Empty} title="No recipes.">Drop a recipe file into the playbook directory's recipes/ folder.</${Empty}>`
        : html`<${Recipes} recipes=${recipes} chosen=${query.recipe}/>`}
    </section>
    ${recipe && html`<${RecipeForm} key=${recipe.name} recipe=${recipe} cluster=${cluster} query=${query}/>`}
    ${query.recipe && list.data && !recipe && html`<p class="field-error">No usable recipe named <code>${query.recipe}</code>.</p>`}
    ${cluster ? html`<${Jobs} cluster=${cluster}/>` : html`<${Empty} title="No active cluster.">Pick or <a href=${href("/create")}>create</a> a cluster to run jobs on.</${Empty}>`}`;
}

export default { path: "/training", title: "Training", nav: "Training", view: Training };
