// Cost as a person reads it: "$12.34 an hour · $9,008 a month", and
// <CostView cost=... error=.../>: the hourly and monthly figure of what a
// plan creates or keeps (hypd.cost: AWS on-demand list prices, a month of
// 730 hours), its priced items, the things whose price is unknown (with
// why), and what deleting saves. A price that could not be read says why.
import { html } from "/vendor/preact-htm.js";

const USD = (digits) => new Intl.NumberFormat("en-US", { style: "currency", currency: "USD",
  minimumFractionDigits: digits, maximumFractionDigits: digits });

// money(n, digits) -> "$1,234.56"
export function money(n, digits = 2) { return USD(digits).format(Number(n) || 0); }

// perHourMonth(hourly, monthly) -> "$12.34 an hour · $9,008 a month"
export function perHourMonth(hourly, monthly) {
  return `${money(hourly, hourly > 0 && hourly < 1 ? 3 : 2)} an hour · ${money(monthly, 0)} a month`;
}

export function costText(cost) {
  if (!cost) return "";
  const s = perHourMonth(cost.hourly, cost.monthly);
  const n = (cost.unpriced || []).length;
  return n ? `${s} (and ${n} thing${n === 1 ? "" : "s"} with no known price)` : s;
}

export function CostView({ cost, error, title = "Cost" }) {
  if (!cost && !error) return null;
  if (!cost) return html`<section class="cost" aria-label="cost"><h3>${title}</h3>
    <p class="muted cost-error">No cost shown: ${error}</p></section>`;
  const items = cost.items || [], unpriced = cost.unpriced || [];
  return html`<section class="cost" aria-label="cost"><h3>${title}</h3>
    <p class="cost-total"><strong>${perHourMonth(cost.hourly, cost.monthly)}</strong>
      <span class="muted"> on-demand list prices before discounts; a month is ${cost.hours_per_month || 730} hours</span></p>
    ${cost.saved_hourly > 0 ? html`<p class="cost-saved">Deleting saves ${perHourMonth(cost.saved_hourly, cost.saved_monthly)}</p>` : ""}
    ${items.length ? html`<table class="table cost-items"><thead><tr><th scope="col">What</th><th scope="col">Action</th>
      <th scope="col">Quantity</th><th scope="col">Unit price</th><th scope="col">An hour</th><th scope="col">A month</th></tr></thead>
      <tbody>${items.map((i) => html`<tr class="cost-item" data-type=${i.type}><td>${i.name}${i.instance_type ? html` <code>${i.instance_type}</code>` : ""}</td>
        <td>${i.action || ""}</td><td>${i.quantity}</td><td>${money(i.unit_price, 3)} / ${i.unit}</td>
        <td>${money(i.hourly)}</td><td>${money(i.monthly, 0)}</td></tr>`)}</tbody></table>` : ""}
    ${unpriced.length ? html`<ul class="cost-unpriced">${unpriced.map((u) => html`<li>Price unknown: ${u.name}${u.instance_type ? html` <code>${u.instance_type}</code>` : ""} (${u.why})</li>`)}</ul>` : ""}
  </section>`;
}
