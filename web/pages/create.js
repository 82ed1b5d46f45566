// The create wizard (#/create, then #/create?op=ID): cluster_create's
// decisions (its schema's "decisions" group, cluster name first; the rest
// folded under "More options" by the form), zones and instance types from the read tools; the
// plan (cluster_create with plan = true) grouped by what it makes, with the
// computed parts (VPC and subnets with CIDRs, roles, buckets, the HyperPod
// cluster); on confirmation the run, and its five stages (the operation's
// children) in a live progress panel with a timeline of phases. Everything
// after the run is read from the operation, so a reload shows the same.
// The decisions are a draft ("create:cluster_create", web/lib/draft.js)
// until the run is accepted; "Start again" after a failed or cancelled
// creation puts its parameters back as the draft. The plan takes focus and
// scrolls into view; a read token plans, and only Create needs operate.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { denied, useSession } from "/lib/session.js";
import { callTool } from "/lib/api.js";
import { SchemaForm } from "/lib/form.js";
import { standard } from "/lib/choices.js";
import { useOperation, elapsed } from "/lib/op.js";
import { href, navigate } from "/lib/router.js";
import { Act, Confirm, ErrorBox, Loading, Pill, duration } from "/lib/ui.js";
import { CostView, costText } from "/lib/cost.js";
import { useToolDef } from "/lib/cluster-ui.js";
import { dropDraft, saveDraft } from "/lib/draft.js";
import { usePlanFocus } from "/lib/plan.js";

const TOOL = "cluster_create";
const DRAFT = "create:" + TOOL;
const STAGES = [
  { tool: "cluster_create_eks", title: "EKS cluster", what: "VPC, subnets, NAT, roles, the EKS control plane", step: "eks" },
  { tool: "cluster_configure_dependencies", title: "Dependencies", what: "OIDC provider, add-ons, device plugins, health agents", step: "dependencies" },
  { tool: "hyperpod_create", title: "HyperPod cluster", what: "execution role, lifecycle scripts, compute subnet, the instance group", step: "hyperpod_and_storage" },
  { tool: "storage_create_s3", title: "S3 storage", what: "the data bucket, its volume and claim", step: "hyperpod_and_storage" },
  { tool: "hyperpod_update_advanced_features", title: "Features", what: "managed features such as the training operator", step: "features" },
];
const FAMILY = {
  ec2: "Network: VPC, subnets, gateways, routes",
  iam: "IAM: roles, policies, OIDC provider",
  eks: "EKS: the cluster, access, add-ons",
  kubernetes: "Kubernetes objects",
  s3: "S3: buckets and objects",
  sagemaker: "HyperPod",
  hypd: "Later stages (planned once what they need exists)",
};

// the computed parts worth reading before saying yes
function Computed({ rows }) {
  const of = (t) => rows.filter((r) => r.type === t);
  const f = (r) => r.fields || {};
  const vpc = of("ec2:vpc")[0];
  const subnets = of("ec2:subnet");
  const hp = of("sagemaker:cluster")[0];
  const groups = hp ? (f(hp).InstanceGroups || []) : [];
  return html`<dl class="computed">
    ${vpc && html`<div><dt>VPC</dt><dd><code>${vpc.name}</code> <code class="cidr">${f(vpc).CidrBlock}</code></dd></div>`}
    ${subnets.length > 0 && html`<div><dt>Subnets</dt><dd><ul class="plain">${subnets.map((s) => html`<li data-subnet=${s.name}>
      <code>${s.name}</code> <code class="cidr">${f(s).CidrBlock || "a CIDR of the VPC"}</code> <span class="muted">${f(s).AvailabilityZone}</span></li>`)}</ul></dd></div>`}
    ${of("iam:role").length > 0 && html`<div><dt>Roles</dt><dd>${of("iam:role").map((r) => html`<code class="chip">${r.name}</code> `)}</dd></div>`}
    ${of("s3:bucket").length > 0 && html`<div><dt>Buckets</dt><dd>${of("s3:bucket").map((r) => html`<code class="chip">${r.name}</code> `)}</dd></div>`}
    ${of("eks:cluster")[0] && html`<div><dt>EKS cluster</dt><dd><code>${of("eks:cluster")[0].name}</code></dd></div>`}
    ${hp && html`<div><dt>HyperPod cluster</dt><dd><code>${hp.name}</code>${groups.map((g) => html` <span class="muted">·</span>
      group <code>${g.InstanceGroupName}</code>: ${g.InstanceCount} × <code>${g.InstanceType}</code>`)}</dd></div>`}
  </dl>`;
}

const detail = (r) => {
  const o = r.fields || {};
  const keys = ["CidrBlock", "AvailabilityZone", "addonName", "PolicyArn", "kind", "namespace", "Key", "claim", "capacity", "why"];
  const bits = keys.filter((k) => o[k] !== undefined).map((k) => `${k}: ${o[k]}`);
  if (r.why) bits.push(r.why);
  return bits.join(" · ");
};

export function GroupedPlan({ plan }) {
  const rows = plan.plan || [];
  const groups = new Map();
  for (const r of rows) {
    const fam = (r.type || "other").split(":")[0];
    if (!groups.has(fam)) groups.set(fam, []);
    groups.get(fam).push(r);
  }
  return html`<section class="plan grouped-plan" aria-label="plan">
    <p class="plan-counts">${["create", "change", "delete", "keep"].map((k) => html`<span class=${"plan-count plan-" + k} data-count=${k}><strong>${plan[k] || 0}</strong> to ${k}</span> `)}
      ${rows.some((r) => r.action === "later") && html`<span class="plan-count plan-later"><strong>${rows.filter((r) => r.action === "later").length}</strong> planned later</span>`}</p>
    <h3>What hypd computed</h3>
    <${Computed} rows=${rows}/>
    <h3>Every resource, by kind</h3>
    ${[...groups.entries()].map(([fam, rs]) => {
      const creates = rs.filter((r) => r.action === "create").length;
      return html`<details class="plan-group" data-family=${fam} open=${fam === "ec2" || fam === "sagemaker" || fam === "hypd"}>
        <summary><strong>${FAMILY[fam] || fam}</strong> <span class="muted">${rs.length} ${rs.length === 1 ? "item" : "items"}${creates ? `, ${creates} to create` : ""}</span></summary>
        <div class="table-wrap cwrap"><table class="table plan-rows"><thead><tr><th scope="col">Action</th><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Details</th></tr></thead>
        <tbody>${rs.map((r) => html`<tr class=${"plan-row plan-" + r.action} data-action=${r.action}>
          <td><span class=${"plan-action plan-" + r.action}>${r.action}</span></td><td><code>${(r.type || "").split(":").slice(1).join(":")}</code></td>
          <td class="plan-name">${r.name}</td><td class="plan-fields">${detail(r)}</td></tr>`)}</tbody></table></div>
      </details>`;
    })}
  </section>`;
}

// the progress panel: the five stages, each with its status, phase and time
function LiveStage(props) {
  const { view } = useOperation(props.child.operation_id);
  return html`<${Stage} ...${props} view=${view}/>`;
}

function Stage({ stage, child, parent, n, view }) {
  const v = child ? (view || child) : null;
  const pp = parent.params || {};
  const asked = stage.tool === "hyperpod_update_advanced_features" ? !!(pp.features && Object.keys(pp.features).length)
    : stage.tool === "storage_create_s3" ? pp.s3_storage !== false : true;
  const status = v ? v.status : parent.status === "running" ? "pending" : asked ? (parent.status === "succeeded" ? "skipped" : "not started") : "skipped";
  return html`<li class=${"stage stage-" + status} data-stage=${stage.tool} data-status=${status}>
    <span class="stage-n" aria-hidden="true">${n}</span>
    <div class="stage-body">
      <div class="stage-head"><strong>${stage.title}</strong> <${Pill} status=${status}/>
        ${v && html`<span class="stage-time">${duration(elapsed(v))}</span>`}
        ${child && html`<a class="small" href=${href("/operations/" + child.operation_id)}>operation</a>`}</div>
      <div class="muted small"><code>${stage.tool}</code>: ${stage.what}</div>
      ${v && html`<div class="stage-phase">${v.phase}</div>`}
      ${!asked && html`<div class="muted small">Not asked for (${stage.tool === "storage_create_s3" ? "s3_storage was off" : "no features were chosen"}).</div>`}
      ${view && view.steps && (view.status === "running" ? html`<${Timeline} view=${view} compact=${true}/>`
        : html`<details class="stage-phases"><summary>${(view.steps || []).filter((x) => x.started_at).length} phases</summary><${Timeline} view=${view} compact=${true}/></details>`)}
    </div></li>`;
}

// a timeline of an operation's steps: when each began and how long it took
export function Timeline({ view, compact }) {
  const steps = (view.steps || []).filter((s) => s.started_at);
  const start = view.created_at;
  const total = Math.max(1, elapsed(view));
  const set = (left, width) => (el) => { if (el) { el.style.marginLeft = left + "%"; el.style.width = Math.max(width, 0.8) + "%"; } };
  if (!steps.length) return null;
  return html`<ol class=${"timeline" + (compact ? " timeline-compact" : "")} aria-label=${"phases of " + view.tool}>
    ${steps.map((s) => {
      const secs = s.seconds !== undefined ? s.seconds : Math.max(0, Date.now() / 1000 - s.started_at);
      return html`<li class=${"tl tl-" + s.status} data-step=${s.name}>
        <span class="tl-name">${s.name}</span>
        <span class="tl-track" aria-hidden="true"><span class="tl-bar" ref=${set(100 * (s.started_at - start) / total, 100 * secs / total)}></span></span>
        <span class="tl-time">${s.status === "running" ? "running" : duration(secs)} <span class="muted">at +${duration(s.started_at - start)}</span></span></li>`;
    })}</ol>`;
}

// "Start again": the failed creation's parameters (its record holds no
// secret: hypd.tool.registry public) become the wizard's draft
function again(def, view) {
  saveDraft(DRAFT, view.params || {}, def && def.input_schema);
  navigate("/create", {});
}

function Progress({ id }) {
  const { view, error, note } = useOperation(id);
  const { def } = useToolDef(TOOL);
  const { refreshClusters } = useSession();
  const ok = view && view.operation_id === id && view.status === "succeeded";
  useEffect(() => { if (ok) refreshClusters(); }, [ok]);
  if (error && !view) return html`<${ErrorBox} error=${error}/>`;
  if (!view) return html`<${Loading} what="Loading the creation"/>`;
  const kids = view.children || [];
  const tag = (view.params && view.params.cluster_tag) || (view.target || "").split("/").pop();
  const result = view.result || {};
  return html`<section class="progress" aria-label="progress" data-status=${view.status} aria-busy=${view.status === "running" ? "true" : "false"}>
    <div class="progress-head">
      <h2>${view.status === "running" ? "Creating" : view.status === "succeeded" ? "Created" : "Creating"} <code>${tag}</code> <${Pill} status=${view.status}/></h2>
      <span class="muted">${duration(elapsed(view))} ${view.status === "running" ? "so far" : "in all"}</span>
    </div>
    <p class="op-now" aria-live="polite"><strong>Now:</strong> <span class="progress-phase">${view.phase}</span>${note && html` — <span class="muted">${note}</span>`}</p>
    <ol class="stages">${STAGES.map((s, i) => html`<${kids.some((c) => c.tool === s.tool) ? LiveStage : Stage} key=${s.tool} stage=${s} n=${i + 1} parent=${view} child=${kids.find((c) => c.tool === s.tool)}/>`)}</ol>
    <h3>Timeline of phases</h3>
    <${Timeline} view=${view}/>
    ${view.status === "succeeded" && html`<p class="notice" role="status">The cluster <a href=${href("/cluster/" + (result.cluster || "hypd-" + tag))}><code>${result.cluster || "hypd-" + tag}</code></a>${" "}is ready${result.hyperpod_cluster ? html` with HyperPod cluster <code>${result.hyperpod_cluster}</code>` : ""}.</p>`}
    ${(view.status === "failed" || view.status === "cancelled") && html`<${ErrorBox} error=${view.error || { message: view.phase }}/>
      <p>Running it again finds what was made and goes on. <button type="button" class="btn btn-small" id="start-again"
        onClick=${() => again(def, view)}>Start again</button> <span class="muted small">(with these decisions, to change or keep)</span></p>`}
    <p><a href=${href("/operations/" + id)}>The operation's full log</a></p>
  </section>`;
}

function Wizard() {
  const { def, error } = useToolDef(TOOL);
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const [plan, setPlan] = useState(null); // {params, value}
  const [ask, setAsk] = useState(false);
  const planRef = usePlanFocus(plan);
  const { who } = useSession();
  if (error) return html`<${ErrorBox} error=${error}/>`;
  if (!def) return html`<${Loading} what="Loading cluster_create's form"/>`;
  const doPlan = async (p) => {
    setBusy(true); setErrors(null); setPlan(null);
    // an error on a folded option unfolds them (the form does), so that it shows beside its field
    try { setPlan({ params: p, value: await callTool(TOOL, { ...p, plan: true }) }); } catch (e) { setErrors(e); } finally { setBusy(false); }
  };
  const run = async () => {
    setAsk(false); setBusy(true);
    try {
      const r = await callTool(TOOL, plan.params);
      dropDraft(DRAFT); // accepted: the decisions are the operation's now
      navigate("/create", { op: r.operation_id });
    } catch (e) { setErrors(e); setPlan(null); } finally { setBusy(false); }
  };
  const step = plan ? 2 : 1;
  return html`<ol class="wizard-steps" aria-label="steps">
      <li aria-current=${step === 1 ? "step" : undefined}>1. Decisions</li><li aria-current=${step === 2 ? "step" : undefined}>2. Review the plan</li><li>3. Create</li></ol>
    <div class="wizard">
      <section class="wizard-form" aria-label="decisions">
        <p class="muted">${def.summary}. Only the decisions are asked; hypd computes the rest (shown in the plan).</p>
        <${SchemaForm} schema=${def.input_schema} id="create-form" hide=${["plan"]} errors=${errors} busy=${busy}
          choices=${standard(def.input_schema)} actions=${[{ label: "Plan", plan: true, kind: def.kind }]} onSubmit=${doPlan} draft=${DRAFT}/>
      </section>
      <section class="wizard-plan" id="wizard-plan" tabindex="-1" ref=${planRef} aria-label=${plan ? undefined : "plan"}
          aria-labelledby=${plan ? "wizard-plan-h" : undefined} aria-live="polite">
        ${plan ? html`<h2 id="wizard-plan-h">The plan for <code>${plan.params.cluster_tag}</code></h2><${CostView} cost=${plan.value.cost} error=${plan.value.cost_error} title="What it costs"/>
          <${GroupedPlan} plan=${plan.value}/>
          ${denied(who, def.kind, "applying") && html`<p class="notice" id="apply-scope">${denied(who, def.kind, "applying")}.</p>`}
          <p class="sticky-actions"><${Act} kind=${def.kind} id="create-run" doing="applying" disabled=${busy} onClick=${() => setAsk(true)}>Create this cluster</${Act}>
            <button type="button" class="btn" onClick=${() => setPlan(null)}>Change the decisions</button></p>`
          : html`<div class="empty"><p class="empty-title">No plan yet.</p><p>Make the decisions, then Plan: hypd answers what it would create, changing nothing.</p></div>`}
      </section>
    </div>
    <${Confirm} open=${ask} kind="mutating" title=${plan ? `Create ${plan.params.cluster_tag}?` : ""} action="Create it"
      itemsLabel="This will create:" items=${plan ? made(plan) : []}
      lost=${plan ? "nothing that exists now is changed or removed. If the creation is cancelled or fails half-way, what it made so far " +
        "stays, and what runs costs money (the NAT gateway, the EKS control plane, the instances" +
        (plan.value.cost ? `: ${costText(plan.value.cost)} at on-demand list prices` : "") + "), until you run it again (it goes on " +
        "from what was made) or delete the cluster (cluster_delete). It takes about half an hour in AWS." : ""}
      onConfirm=${run} onClose=${() => setAsk(false)}/>`;
}

// made(plan) -> what the confirmation names: the counts of what the plan creates, by kind, and the instances
function made(plan) {
  const rows = (plan.value.plan || []).filter((r) => r.action === "create");
  const by = new Map();
  for (const r of rows) { const fam = (r.type || "other").split(":")[0]; by.set(fam, (by.get(fam) || 0) + 1); }
  const out = [...by.entries()].map(([fam, n]) => `${n} × ${(FAMILY[fam] || fam).split(":")[0]}`);
  const hp = (plan.value.plan || []).find((r) => r.type === "sagemaker:cluster");
  for (const g of (hp && hp.fields && hp.fields.InstanceGroups) || []) out.push(`${g.InstanceCount} × ${g.InstanceType} in group ${g.InstanceGroupName}`);
  return out;
}

function Create({ query }) {
  return html`<p class="crumbs"><a href=${href("/clusters")}>Clusters</a> / create</p>
    <h1>Create a cluster</h1>
    ${query.op ? html`<${Progress} id=${query.op}/>` : html`<${Wizard}/>`}`;
}

export default { path: "/create", title: "Create a cluster", view: Create };
