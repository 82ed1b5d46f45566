// The Monitoring page's drawings, by hand (no chart library): a GPU bar
// per instance group (used, free, not allocatable, and the pending demand
// beside it), the GPU allocation of the last hour from the cache's own
// samples (monitor_get_cluster's history: one a minute) as an SVG with
// labelled axes, and DCGM utilisation per GPU when the cluster has the
// exporter. Numbers are always written out too: colour is never the only
// carrier, and a screen reader gets the chart's summary as its label.
import { html } from "/vendor/preact-htm.js";

const n0 = (x) => (typeof x === "number" && isFinite(x) ? x : 0);
const width = (el, pct) => { if (el) el.style.width = Math.max(0, Math.min(100, pct)) + "%"; };

// <GpuBar name gpu={capacity, allocatable, requested, free, pending} [unit="GPUs"]/>
export function GpuBar({ name, gpu = {}, unit = "GPUs", kind = "gpu" }) {
  const cap = n0(gpu.capacity), alloc = n0(gpu.allocatable), used = n0(gpu.requested), pending = n0(gpu.pending);
  const free = gpu.free !== undefined ? n0(gpu.free) : Math.max(0, alloc - used);
  const off = Math.max(0, cap - alloc);
  const scale = Math.max(1, cap, alloc, used + free + off, pending);
  const pct = (x) => (100 * x) / scale;
  const words = `${used} of ${alloc} ${unit} in use, ${free} free` + (off ? `, ${off} not allocatable` : "") + (pending ? `, ${pending} wanted by pending pods` : "");
  return html`<div class="gbar" data-group=${name} data-kind=${kind} data-used=${used} data-free=${free} data-allocatable=${alloc} data-pending=${pending}>
    <div class="gbar-head"><code>${name}</code> <span class="gbar-words">${words}</span></div>
    <div class="gbar-track" role="img" aria-label=${`${name}: ${words}`}>
      <span class="gbar-used" ref=${(el) => width(el, pct(used))}></span><span class="gbar-free" ref=${(el) => width(el, pct(free))}></span><span class="gbar-off" ref=${(el) => width(el, pct(off))}></span>
    </div>
    ${pending > 0 && html`<div class="gbar-track gbar-track-pending" aria-hidden="true"><span class="gbar-pending" ref=${(el) => width(el, pct(pending))}></span></div>`}
  </div>`;
}

export function GpuLegend() {
  return html`<p class="gbar-legend small" aria-hidden="true"><span class="sw sw-used"></span> in use <span class="sw sw-free"></span> free
    <span class="sw sw-off"></span> not allocatable <span class="sw sw-pending"></span> pending demand</p>`;
}

// a round ceiling for the y axis: 1, 2, 5 × 10^k
function nice(x) {
  if (x <= 4) return 4;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

const W = 640, H = 220, L = 44, R = 12, T = 12, B = 34;

// <HistoryChart history=[{t, gpus_allocatable, gpus_requested}]/>: the last hour
export function HistoryChart({ history = [] }) {
  const pts = history.filter((p) => typeof p.t === "number").sort((a, b) => a.t - b.t);
  if (pts.length === 0) return html`<p class="muted" id="gpu-history-empty">No samples yet: the cache takes one a minute once it has been built.</p>`;
  const now = pts[pts.length - 1].t;
  const t0 = now - 3600;
  const top = nice(Math.max(1, ...pts.map((p) => Math.max(n0(p.gpus_allocatable), n0(p.gpus_requested)))));
  const x = (t) => L + ((W - L - R) * (Math.max(t0, t) - t0)) / 3600;
  const y = (v) => T + (H - T - B) * (1 - n0(v) / top);
  // a step line: a sample holds until the next one
  const path = (key) => pts.map((p, i) => (i === 0 ? `M${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}` :
    `H${x(p.t).toFixed(1)}V${y(p[key]).toFixed(1)}`)).join("") + `H${x(now).toFixed(1)}`;
  const area = path("gpus_requested") + `V${y(0)}H${x(pts[0].t).toFixed(1)}Z`;
  const last = pts[pts.length - 1];
  const yTicks = [0, 0.25, 0.5, 0.75, 1].map((f) => f * top);
  const xTicks = [60, 45, 30, 15, 0];
  const label = `GPU allocation over the last hour: now ${n0(last.gpus_requested)} of ${n0(last.gpus_allocatable)} allocatable GPUs requested; ` +
    `peak requested ${Math.max(...pts.map((p) => n0(p.gpus_requested)))}; ${pts.length} samples.`;
  return html`<figure class="chart" id="gpu-history" data-samples=${pts.length}>
    <svg viewBox=${`0 0 ${W} ${H}`} role="img" aria-label=${label} preserveAspectRatio="xMidYMid meet">
      <title>${label}</title>
      ${yTicks.map((v) => html`<g class="tick"><line x1=${L} x2=${W - R} y1=${y(v)} y2=${y(v)} class="grid"/>
        <text x=${L - 6} y=${y(v) + 4} text-anchor="end">${Math.round(v * 10) / 10}</text></g>`)}
      ${xTicks.map((m) => html`<text class="tick" x=${x(now - m * 60)} y=${H - B + 16} text-anchor=${m === 60 ? "start" : m === 0 ? "end" : "middle"}>${m === 0 ? "now" : `−${m} min`}</text>`)}
      <text class="axis-label" x=${12} y=${T + (H - T - B) / 2} transform=${`rotate(-90 12 ${T + (H - T - B) / 2})`} text-anchor="middle">GPUs</text>
      <path class="area-requested" d=${area}/>
      <path class="line-allocatable" d=${path("gpus_allocatable")}/>
      <path class="line-requested" d=${path("gpus_requested")}/>
      <line class="axis" x1=${L} x2=${W - R} y1=${y(0)} y2=${y(0)}/>
    </svg>
    <figcaption class="small"><span class="sw sw-alloc"></span> allocatable <span class="sw sw-used"></span> requested${" · now "}<strong>${n0(last.gpus_requested)}</strong>${" of "}<strong>${n0(last.gpus_allocatable)}</strong> GPUs requested</figcaption>
  </figure>`;
}

// the percent of one DCGM sample, whichever name the exporter's field has
export const utilOf = (g) => n0(g.utilisation ?? g.util ?? g.gpu_util ?? g.value);
