// Logs of a workload (a training job, a job, a deployment, an inference
// endpoint or a pod), live over /ws when the server offers it:
//   -> {"type":"logs.follow","id","cluster"?,"namespace"?,"kind","name","container"?,"tail"?}
//   <- {"type":"logs.line","id","pod","container","time","line"}  (in order per pod)
//   <- {"type":"logs.end","id","reason","message"?}
//   -> {"type":"logs.stop","id"}
// When the socket drops, the follow is sent again once it is back (with a
// larger tail, so lines written meanwhile are not lost); the lines it
// replays are recognised by the last (time, line count at that time) kept
// per pod, so none is shown twice. A server without live logs (it answers
// "unknown message type logs.follow") is read by polling: job_get_logs when
// the server has that tool, else the page's own fallback (e.g. the last
// lines training_get_job shows per pod), and the view says so.
//   useLogs(target, {fallback, hasTool, tail}) -> {lines, mode, ended, note, error}
//   <LogView target fallback/>: the lines with their pod names, autoscroll
//   that pauses when you scroll up (or press Pause), the mode shown; a
//   search that filters and marks the lines as you type, timestamps shown
//   or hidden, the lines downloaded as a .txt file (web/lib/logfind.js);
//   for a finished workload, the lines its finished pods kept, said so.
import { html, useEffect, useLayoutEffect, useRef, useState } from "/vendor/preact-htm.js";
import { callTool } from "./api.js";
import * as ws from "./ws.js";
import { Marked, asText, download, matches, stampOf } from "./logfind.js";

const MAX = 5000; // lines kept in the view
const REPLAY_TAIL = 5000; // the tail asked for after a reconnect

// norm(time) -> a string that sorts as the time does (RFC 3339 to the nanosecond)
export function norm(t) {
  if (t === undefined || t === null || t === "") return null;
  if (typeof t === "number") return String(Math.round(t * 1e9)).padStart(22, "0");
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(t);
  if (m) return m[1] + "." + (m[2] || "").padEnd(9, "0").slice(0, 9);
  const d = Date.parse(t);
  return isNaN(d) ? String(t) : new Date(d).toISOString().replace(/\.(\d+)Z$/, (_, f) => "." + f.padEnd(9, "0"));
}

// merger() -> {accept(line) -> bool, replay()}: drops the lines a replay
// sends again. Per pod it keeps the newest time seen and how many lines had
// it; after replay(), lines older than that are dropped, and as many lines of
// that same time as were already shown.
export function merger() {
  const last = new Map(); // pod/container -> {t, n, skip}
  return {
    replay() { for (const v of last.values()) v.skip = v.n; },
    accept(l) {
      const t = norm(l.time);
      if (t === null) return true;
      const k = (l.pod || "") + "/" + (l.container || "");
      const v = last.get(k);
      if (!v || t > v.t) { last.set(k, { t, n: 1, skip: 0 }); return true; }
      if (t < v.t) return false;
      if (v.skip > 0) { v.skip--; return false; }
      v.n++;
      return true;
    },
  };
}

let seq = 0;
const UNKNOWN = /unknown message type logs\./;

export function useLogs(target, { fallback, hasTool = () => false, tail = 200, every = 3000 } = {}) {
  const [st, setSt] = useState({ lines: [], mode: "connecting", ended: null, note: null, error: null });
  const key = JSON.stringify(target);
  useEffect(() => {
    if (!target) return undefined;
    const id = "logs-" + Date.now().toString(36) + "-" + (++seq);
    const m = merger();
    let lines = [];
    let live = true;
    let mode = "connecting";
    let ended = null;
    let sent = false;
    let timer = null;
    const set = (o) => live && setSt((s) => ({ ...s, ...o }));
    // lines are drawn in batches (a fast stream sends hundreds a second)
    let pending = [];
    let flushTimer = null;
    const flush = () => {
      flushTimer = null;
      if (!pending.length) return;
      lines = lines.concat(pending);
      pending = [];
      if (lines.length > MAX) lines = lines.slice(lines.length - MAX);
      set({ lines });
    };
    const add = (list, via) => {
      for (const l of list) if (m.accept(l)) pending.push({ ...l, via });
      if (pending.length && !flushTimer) flushTimer = setTimeout(flush, 100);
    };
    const follow = (replay) => {
      const msg = { type: "logs.follow", id, kind: target.kind, name: target.name };
      for (const k of ["cluster", "namespace", "container"]) if (target[k]) msg[k] = target[k];
      msg.tail = replay ? REPLAY_TAIL : tail;
      if (replay) m.replay();
      sent = ws.send(msg);
      if (sent && mode !== "live") { mode = "live"; set({ mode, note: null }); }
    };
    // polling: job_get_logs, else the page's fallback (a snapshot of the last lines)
    const poll = async () => {
      if (!live) return;
      try {
        if (hasTool("job_get_logs")) {
          const p = { kind: target.kind, name: target.name, tail: REPLAY_TAIL };
          for (const k of ["cluster", "namespace", "container"]) if (target[k]) p[k] = target[k];
          const r = await callTool("job_get_logs", p);
          m.replay();
          add(r.lines || [], "poll");
          set({ mode: "polling", error: null });
        } else if (fallback) {
          const r = await fallback();
          if (!live) return;
          lines = (r || []).map((l) => ({ ...l, via: "snapshot" }));
          set({ lines, mode: "snapshot", error: null });
        } else { set({ mode: "unavailable" }); return; }
      } catch (e) { set({ error: e }); }
      if (live && !ended) timer = setTimeout(poll, every);
    };
    const startPolling = (why) => {
      if (mode === "polling" || mode === "snapshot") return;
      mode = "polling";
      set({ mode, note: why });
      poll();
    };
    const offLine = ws.on("msg:logs.line", (msg) => { if (msg.id === id) add([msg], "live"); });
    const offEnd = ws.on("msg:logs.end", (msg) => {
      if (msg.id !== id) return;
      ended = { reason: msg.reason, message: msg.message };
      flush();
      set({ ended });
    });
    const offErr = ws.on("msg:error", (msg) => {
      if (msg.id === id) set({ error: { code: "LOGS", message: msg.message } });
      else if (!msg.id && sent && mode === "live" && UNKNOWN.test(msg.message || "")) {
        startPolling("Live logs are not available on this server (its /ws does not offer logs.follow yet)");
      }
    });
    const offStatus = ws.on("status", (s) => {
      if (mode === "polling" || mode === "snapshot" || ended) return;
      if (s === "open") follow(sent);
      else if (s === "closed" && mode === "live") { mode = "reconnecting"; set({ mode }); }
    });
    if (ws.status === "open") follow(false);
    return () => {
      live = false;
      clearTimeout(timer);
      clearTimeout(flushTimer);
      offLine(); offEnd(); offErr(); offStatus();
      if (sent && !ended) ws.send({ type: "logs.stop", id });
    };
  }, [key]);
  return st;
}

const MODE = {
  connecting: "connecting…", live: "live", reconnecting: "reconnecting…", polling: "read every few seconds",
  snapshot: "last lines, read every few seconds", unavailable: "unavailable",
};

// <LogView target={kind, name, namespace?, cluster?, container?} fallback hasTool title done finished/>
// (done: the workload has finished, so the lines are what its pods kept;
// finished: it is done and has no pods, so no lines is expected)
export function LogView({ target, fallback, hasTool, title = "Logs", id = "logs", done = false, finished = false }) {
  const { lines, mode, ended, note, error } = useLogs(target, { fallback, hasTool, tail: done ? REPLAY_TAIL : 200 });
  const [paused, setPaused] = useState(false);
  const [pod, setPod] = useState("");
  const [q, setQ] = useState("");
  const [stamps, setStamps] = useState(true);
  const box = useRef(null);
  const pods = [...new Set(lines.map((l) => l.pod).filter(Boolean))];
  const ofPod = pod ? lines.filter((l) => l.pod === pod) : lines;
  const shown = q ? ofPod.filter((l) => matches(l, q)) : ofPod;
  useLayoutEffect(() => {
    const el = box.current;
    if (el && !paused) el.scrollTop = el.scrollHeight;
  });
  const onScroll = () => {
    const el = box.current;
    if (!el) return;
    const atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 24;
    if (!atEnd && !paused) setPaused(true);
  };
  const save = () => download(`${target && target.name || "logs"}${pod ? "-" + pod : ""}${q ? "-matching" : ""}.txt`, asText(shown));
  return html`<section class="logview" id=${id} aria-label=${title} data-mode=${mode} data-ended=${ended ? ended.reason : undefined}>
    <div class="logview-head">
      <h2>${title}</h2>
      <span class=${"log-mode log-mode-" + mode} title="How the lines arrive"><span aria-hidden="true">${mode === "live" ? "●" : "○"}</span> ${MODE[mode] || mode}</span>
      <span class="muted small log-count">${lines.length} ${lines.length === 1 ? "line" : "lines"}</span>
      <span class="spacer"></span>
      ${pods.length > 1 && html`<label class="small" for=${id + "-pod"}>Pod</label>
        <select id=${id + "-pod"} class="small" value=${pod} onChange=${(e) => setPod(e.target.value)}>
          <option value="">all pods</option>${pods.map((p) => html`<option value=${p}>${p}</option>`)}</select>`}
      <button type="button" class="btn btn-small" id=${id + "-pause"} aria-pressed=${paused ? "true" : "false"}
        onClick=${() => setPaused(!paused)}>${paused ? "Resume autoscroll" : "Pause autoscroll"}</button>
    </div>
    <div class="log-tools">
      <label class="small" for=${id + "-find"}>Search</label>
      <input type="search" id=${id + "-find"} class="log-find" value=${q} placeholder="text in a line or a pod's name" aria-describedby=${id + "-found"}
        onInput=${(e) => setQ(e.target.value)} onKeyDown=${(e) => { if (e.key === "Escape" && q) { e.preventDefault(); setQ(""); } }}/>
      <span class="small log-found" id=${id + "-found"} role="status" aria-live="polite">${q ? `${shown.length} of ${ofPod.length} ${ofPod.length === 1 ? "line matches" : "lines match"}` : ""}</span>
      <label class="small log-stamps"><input type="checkbox" id=${id + "-stamps"} checked=${stamps} onChange=${(e) => setStamps(e.target.checked)}/> Timestamps</label>
      <button type="button" class="btn btn-small" id=${id + "-download"} disabled=${shown.length === 0} onClick=${save}
        title="The lines shown (the pod and search filters applied), with their times and pods, as a text file">Download ${shown.length} ${shown.length === 1 ? "line" : "lines"} (.txt)</button>
    </div>
    ${note && html`<p class="notice log-note">${note}. ${mode === "snapshot" ? "Showing the last lines of each pod instead, read again every few seconds."
      : mode === "unavailable" ? "Nor does it have job_get_logs, so no lines can be shown here." : "Reading them with job_get_logs every few seconds instead."}</p>`}
    ${done && lines.length > 0 && html`<p class="notice log-kept">It has finished: these are the lines its finished pods kept (a pod that ended keeps
      its containers' logs until it is deleted with the workload).</p>`}
    ${error && html`<p class="field-error">${error.message}</p>`}
    <ol class=${"loglines" + (stamps ? "" : " no-stamps")} ref=${box} onScroll=${onScroll} tabindex="0" aria-live="off" aria-label=${title + ": lines"} data-lines=${lines.length} data-shown=${shown.length}>
      ${shown.length === 0 && html`<li class="muted log-empty">${q && ofPod.length ? `No line holds “${q}”.` : ended ? "No lines." : finished ? "No lines: the workload has finished and its pods are gone." : mode === "unavailable" ? "No logs can be read here." : "No lines yet."}</li>`}
      ${shown.map((l) => html`<li data-pod=${l.pod} data-via=${l.via}><span class="log-pod">${q ? html`<${Marked} text=${l.pod} q=${q}/>` : l.pod}</span>${stamps && html`<time class="log-time" datetime=${typeof l.time === "string" ? l.time : undefined}>${stampOf(l.time)}</time>`}<span class="log-line">${q ? html`<${Marked} text=${l.line} q=${q}/>` : l.line}</span></li>`)}
    </ol>
    ${paused && html`<p class="small muted">Autoscroll is paused. <button type="button" class="linkish" onClick=${() => setPaused(false)}>Follow the newest lines</button></p>`}
    ${ended && html`<p class="small muted log-end">The stream ended: ${ended.reason}${ended.message ? " (" + ended.message + ")" : ""}.</p>`}
  </section>`;
}
