// One /ws connection for the whole tab: it authenticates with the tab's
// token in its first message (never in the URL), subscribes to the
// operation and state topics, reconnects with a growing delay (0.5 s to
// 30 s) and hands each event to the listeners of its topic:
//   on("operations", fn)  every operation event {kind, operation_id, phase, status, ...}
//   on("operation:" + id, fn)  the events of one operation
//   on("state", fn)       resource.changed events
//   on("status", fn)      "connecting" | "open" | "closed" (a reconnect after
//                          "open" means events may have been missed: refetch)
//   on("msg:" + type, fn) every other message of that type (logs.line,
//                          logs.end, error...), as the server sent it
// subscribe(topic) -> unsubscribe: a page's own topic ("monitor:NAME"),
// subscribed again after each reconnect, dropped when its last user leaves
// A refusal of the token (close code 4401) tells window "hypd:unauthorized"
// with the server's message, as a REST 401 does.
// send(msg) sends a message while the connection is open (false otherwise);
// reconnect() drops the connection as a network failure would (it comes back).
import { token } from "./api.js";

const listeners = new Map(); // topic -> Set of functions
const wantedTopics = new Map(); // a page's own topics -> how many users
let sock = null;
let delay = 500;
let timer = null;
let wanted = false;
let refusal = null; // the server's last refusal of the token, before its 4401
export let status = "closed";

function emit(topic, ev) {
  for (const fn of listeners.get(topic) || []) {
    try { fn(ev); } catch (e) { console.warn("a /ws listener failed", e); }
  }
}

function setStatus(s) {
  if (s === status) return;
  status = s;
  emit("status", s);
}

function connect() {
  clearTimeout(timer);
  const t = token.get();
  if (!wanted || !t) return;
  setStatus("connecting");
  const s = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  sock = s;
  s.onopen = () => s.send(JSON.stringify({ type: "auth", token: t }));
  s.onmessage = (m) => {
    let msg;
    try { msg = JSON.parse(m.data); } catch { return; }
    if (msg.type === "ready") {
      delay = 500;
      s.send(JSON.stringify({ type: "subscribe", topics: ["operations", "state", ...wantedTopics.keys()] }));
      setStatus("open");
    } else if (msg.type === "event") {
      emit(msg.topic, msg.event);
      if (msg.topic === "operations" && msg.event && msg.event.operation_id) emit("operation:" + msg.event.operation_id, msg.event);
    } else if (typeof msg.type === "string") {
      if (msg.type === "error" && msg.code === "UNAUTHORIZED") refusal = msg;
      emit("msg:" + msg.type, msg);
    }
  };
  s.onclose = (ev) => {
    if (sock !== s) return;
    sock = null;
    setStatus("closed");
    if (ev.code === 4401 && wanted) {
      // the token is refused (revoked, expired, or replaced at a restart): the tab signs out saying why
      const r = refusal || { message: "the token is no longer valid" };
      window.dispatchEvent(new CustomEvent("hypd:unauthorized", { detail: { code: "UNAUTHORIZED", message: r.message, detail: r } }));
    }
    refusal = null;
    if (!wanted || ev.code === 4401) return; // signed out, or the token is refused
    timer = setTimeout(connect, delay);
    delay = Math.min(delay * 2, 30000);
  };
  s.onerror = () => {}; // onclose follows and reconnects
}

// start(): connect (after signing in); stop(): close and stay closed
export function start() { wanted = true; if (!sock) connect(); }
export function stop() {
  wanted = false;
  clearTimeout(timer);
  if (sock) { const s = sock; sock = null; s.close(); }
  setStatus("closed");
}

// send(msg) -> true when sent (the connection is open and authenticated)
export function send(msg) {
  if (!sock || status !== "open") return false;
  sock.send(JSON.stringify(msg));
  return true;
}

// reconnect(): close the socket as a dropped network would; it reconnects
export function reconnect() {
  if (!sock) return;
  const s = sock;
  delay = 200;
  s.close();
}

// subscribe(topic) -> a function that drops it (the server's refusal of a
// topic it does not know comes as on("msg:error") with its name)
export function subscribe(topic) {
  wantedTopics.set(topic, (wantedTopics.get(topic) || 0) + 1);
  if (wantedTopics.get(topic) === 1) send({ type: "subscribe", topics: [topic] });
  let done = false;
  return () => {
    if (done) return;
    done = true;
    const n = (wantedTopics.get(topic) || 1) - 1;
    if (n > 0) return wantedTopics.set(topic, n);
    wantedTopics.delete(topic);
    send({ type: "unsubscribe", topics: [topic] });
  };
}

// on(topic, fn) -> a function that removes the listener
export function on(topic, fn) {
  if (!listeners.has(topic)) listeners.set(topic, new Set());
  listeners.get(topic).add(fn);
  return () => listeners.get(topic).delete(fn);
}

// whileDown(fn, ms = 5000) -> stop: calls fn every ms while the connection
// is not open (the pages' fallback to polling); returns a function that stops it
export function whileDown(fn, ms = 5000) {
  const i = setInterval(() => { if (status !== "open") fn(); }, ms);
  return () => clearInterval(i);
}
