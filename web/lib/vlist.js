// A virtualised table: only the rows in view (and a few either side) are in
// the DOM, so a list of 2,000 nodes or 60,000 pods scrolls as lightly as
// one of 20. Rows have one fixed height (rowHeight, px; the CSS of
// .vtable tr.vrow draws them so), spacer rows above and below hold the
// scroll height, and the table says its full size to screen readers
// (aria-rowcount, each row its aria-rowindex). Keyboard: Tab reaches the
// table; the arrows, Page Up/Down, Home and End move between rows (the
// row in focus is scrolled into view and read out); Enter is onOpen(row).
//
//   <VirtualTable id="nodes-table" label="Nodes" rows=${list} rowKey=${(n) => n.name}
//     head=${html`<tr><th scope="col">Node</th>...</tr>`}
//     row=${(n) => html`<td>${n.name}</td>...`} rowAttrs=${(n) => ({ "data-node": n.name })}
//     cols=${7} height=${420} rowHeight=${36}/>
// (cols: the number of columns, which the spacer rows span)
import { html, useEffect, useRef, useState } from "/vendor/preact-htm.js";

const OVERSCAN = 6;

export function VirtualTable({ id, label, rows, rowKey, head, row, rowAttrs, cols, cls = "", height = 420, rowHeight = 36, onOpen, empty }) {
  const box = useRef(null);
  const [top, setTop] = useState(0);
  const [active, setActiveState] = useState(-1);
  // the row in focus, also as a ref: keys pressed faster than the renders move from the newest one
  const at = useRef(-1);
  const setActive = (i) => { at.current = i; setActiveState(i); };
  const frame = useRef(0);
  const keyed = useRef(false); // the focus moves with the keys, even when its row leaves the DOM
  const n = rows.length;
  // the header row's height counts in the scroll offset of the first row
  const headH = rowHeight;
  const view = Math.ceil(height / rowHeight);
  const start = Math.max(0, Math.min(Math.floor(Math.max(0, top - headH) / rowHeight) - OVERSCAN, Math.max(0, n - view - OVERSCAN)));
  const end = Math.min(n, start + view + 2 * OVERSCAN);
  const onScroll = () => {
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => { frame.current = 0; if (box.current) setTop(box.current.scrollTop); });
  };
  useEffect(() => () => cancelAnimationFrame(frame.current), []);
  useEffect(() => { if (active >= n) setActive(n - 1); }, [n]);
  // the row in focus: scrolled into view, then focused once drawn
  const focusRow = (i) => {
    const el = box.current;
    if (!el || n === 0) return;
    i = Math.max(0, Math.min(n - 1, i));
    setActive(i);
    const y = headH + i * rowHeight;
    if (y < el.scrollTop + headH) el.scrollTop = y - headH;
    else if (y + rowHeight > el.scrollTop + el.clientHeight) el.scrollTop = y + rowHeight - el.clientHeight;
    setTop(el.scrollTop);
  };
  useEffect(() => {
    if (active < 0 || !box.current || !(keyed.current || box.current.contains(document.activeElement))) return;
    const tr = box.current.querySelector(`tr[aria-rowindex="${active + 2}"]`);
    if (tr && document.activeElement !== tr) tr.focus({ preventScroll: true });
    if (tr) keyed.current = false;
  }, [active, start]);
  const key = (e) => {
    const page = Math.max(1, view - 1);
    const cur = at.current < 0 ? -1 : Math.min(at.current, n - 1);
    const to = { ArrowDown: cur + 1, ArrowUp: cur - 1, PageDown: cur + page, PageUp: cur - page, Home: 0, End: n - 1 }[e.key];
    if (to !== undefined) { e.preventDefault(); keyed.current = true; focusRow(to); return; }
    if (e.key === "Enter" && onOpen && cur >= 0 && rows[cur] && e.target.tagName === "TR") { e.preventDefault(); onOpen(rows[cur]); }
  };
  const spacer = (px) => html`<tr class="vspacer" aria-hidden="true"><td colspan=${cols} ref=${(td) => { if (td) td.style.height = px + "px"; }}></td></tr>`;
  const shown = rows.slice(start, end);
  return html`<div class=${"vtable table-wrap " + cls} id=${id} tabindex="0" role="region" aria-label=${`${label}: ${n} rows; arrow keys move between them`}
      ref=${(el) => { box.current = el; if (el) el.style.maxHeight = height + headH + "px"; }} onScroll=${onScroll} onKeyDown=${key}
      onFocus=${(e) => { if (e.target === box.current && active < 0 && n) { keyed.current = true; setActive(0); } }}
      data-rows=${n} data-start=${start} data-end=${end}>
    <table class=${"table vt"} aria-rowcount=${n + 1}>
      <thead>${head}</thead>
      <tbody>
        ${start > 0 && spacer(start * rowHeight)}
        ${shown.map((r, j) => {
          const i = start + j;
          return html`<tr key=${rowKey(r)} class=${"vrow" + (i === active ? " vrow-active" : "")} aria-rowindex=${i + 2} tabindex="-1"
            onClick=${() => setActive(i)} ...${rowAttrs ? rowAttrs(r) : {}}>${row(r, i)}</tr>`;
        })}
        ${end < n && spacer((n - end) * rowHeight)}
      </tbody>
    </table>
    ${n === 0 && empty && html`<p class="muted vt-empty">${empty}</p>`}
  </div>`;
}
