// Sortable tables: useSort(rows, {key, dir}) -> {rows, th}; th(key, label)
// draws a header whose button (reachable by keyboard) sorts by that column,
// with aria-sort saying how. Values are compared as numbers when both are.
import { html, useState } from "/vendor/preact-htm.js";

const cmp = (a, b) => {
  if (a === b) return 0;
  if (a === undefined || a === null) return 1;
  if (b === undefined || b === null) return -1;
  return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
};

export function useSort(rows, start = {}, get = (r, k) => r[k]) {
  const [s, setS] = useState({ key: start.key, dir: start.dir || "asc" });
  const sorted = s.key ? [...rows].sort((a, b) => (s.dir === "asc" ? 1 : -1) * cmp(get(a, s.key), get(b, s.key))) : rows;
  const th = (key, label) => {
    const on = s.key === key;
    return html`<th scope="col" aria-sort=${on ? (s.dir === "asc" ? "ascending" : "descending") : "none"}>
      <button type="button" class="sort" data-sort=${key} onClick=${() => setS({ key, dir: on && s.dir === "asc" ? "desc" : "asc" })}>
        ${label}<span aria-hidden="true" class="sort-mark">${on ? (s.dir === "asc" ? " ▲" : " ▼") : ""}</span></button></th>`;
  };
  return { rows: sorted, th };
}
