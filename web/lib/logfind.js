// What the log view does with its lines besides showing them: search
// (a case-insensitive substring, the matches marked), timestamps in full
// (the log API's RFC 3339 time, to the millisecond), and the lines as a
// .txt file (a Blob URL given to a download link: navigation, which the
// page's CSP does not restrict, not a fetch).
//   matches(line, q) -> true when q is empty or line.line or line.pod holds it
//   <Marked text q/>: text with each occurrence of q in <mark>
//   stampOf(time) -> "2026-12-02 19:04:24.123" (UTC) | ""
//   asText(lines) -> one line of text per log line: time, pod/container, the line
//   download(filename, text): the text saved as filename
import { html } from "/vendor/preact-htm.js";

export function matches(l, q) {
  if (!q) return true;
  const n = q.toLowerCase();
  return String(l.line ?? "").toLowerCase().includes(n) || String(l.pod ?? "").toLowerCase().includes(n);
}

export function Marked({ text, q }) {
  const s = String(text ?? "");
  if (!q) return s;
  const low = s.toLowerCase();
  const n = q.toLowerCase();
  const out = [];
  let at = 0;
  for (let i = low.indexOf(n); i >= 0; i = low.indexOf(n, at)) {
    if (i > at) out.push(s.slice(at, i));
    out.push(html`<mark>${s.slice(i, i + n.length)}</mark>`);
    at = i + n.length;
  }
  out.push(s.slice(at));
  return out;
}

export function stampOf(t) {
  if (t === undefined || t === null || t === "") return "";
  const d = new Date(typeof t === "number" ? t * 1000 : t);
  return isNaN(d) ? String(t) : d.toISOString().replace("T", " ").replace("Z", "");
}

export function asText(lines) {
  return lines.map((l) => [l.time ? (typeof l.time === "number" ? new Date(l.time * 1000).toISOString() : l.time) : "",
    l.pod ? l.pod + (l.container ? "/" + l.container : "") : "", l.line ?? ""].filter((x, i) => x !== "" || i === 2).join(" ")).join("\n") + "\n";
}

export function download(filename, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  a.hidden = true;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
