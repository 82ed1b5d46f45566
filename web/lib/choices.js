// Loaders of a form field's choices from the read tools, for
// <SchemaForm choices={...}/>: each is (values) -> [{value, label, group}].
//   choices={{ availability_zone: zones, instance_type: { load: instanceTypes, deps: ["availability_zone"] } }}
// standard(schema) picks the loaders for the fields a schema has by name.
import { callTool } from "./api.js";

export const clusters = async () => ((await callTool("cluster_list", {})).clusters || [])
  .map((c) => ({ value: c.name, label: c.name + (c.active ? " (active)" : "") }));

export const zones = async (v = {}) => ((await callTool("aws_get_availability_zones", v.region ? { region: v.region } : {})).zones || [])
  .map((z) => ({ value: z.name, label: `${z.name} (${z.zone_id})` }));

// the instance types by accelerator: GPU first, then AWS Trainium and
// Inferentia (Neuron), then CPU; in each, by accelerators, then size
export const TYPE_GROUPS = [["gpu", "GPU"], ["neuron", "Trainium / Inferentia"], [undefined, "CPU"]];
const gib = (n) => (Number.isInteger(n) ? n : Number(n.toFixed(1)));
// typeLabel(t) -> "ml.p5.48xlarge — 8 × NVIDIA H100 80 GiB · 192 vCPU · 2048 GiB · EFA × 32"
export const typeLabel = (t) => [
  t.name + " —",
  t.accelerator_count ? `${t.accelerator_count} × ${t.accelerator || "accelerator"}${t.accelerator_memory_gib ? " " + gib(t.accelerator_memory_gib / t.accelerator_count) + " GiB" : ""} ·` : "",
  `${t.vcpus} vCPU · ${gib(t.memory_gib)} GiB`,
  t.efa_interfaces ? `· EFA × ${t.efa_interfaces}` : "",
].filter(Boolean).join(" ");

export const instanceTypes = async (v = {}) => {
  const p = {};
  if (v.availability_zone) p.zone = v.availability_zone;
  if (v.region) p.region = v.region;
  const list = (await callTool("aws_get_instance_types", p)).instance_types || [];
  const rank = (t) => TYPE_GROUPS.findIndex(([k]) => k === (t.accelerator_count ? t.accelerator_kind : undefined));
  return list.slice().sort((a, b) => rank(a) - rank(b) || (a.accelerator_count || 0) - (b.accelerator_count || 0) ||
    a.vcpus - b.vcpus || a.name.localeCompare(b.name, "en", { numeric: true }))
    .map((t) => ({ value: t.name, label: typeLabel(t), group: TYPE_GROUPS[rank(t)][1] }));
};
// why a chosen type is not listed: the zone (or region) does not offer it
const notOffered = (t, v = {}) => `${t} is not offered in ${v.availability_zone || v.region || "this region"}: choose another type or zone.`;

// standard(schema) -> the choices for the fields of a schema that name a
// cluster, a zone or an instance type (string fields without an enum)
export function standard(schema) {
  const p = (schema && schema.properties) || {};
  const plain = (k) => p[k] && p[k].type === "string" && !p[k].enum;
  const out = {};
  if (plain("cluster")) out.cluster = clusters;
  if (plain("availability_zone")) out.availability_zone = { load: zones, deps: ["region"] };
  if (plain("instance_type")) out.instance_type = { load: instanceTypes, deps: ["region", "availability_zone"], unknown: notOffered };
  return out;
}

// clusterTypes(cluster) -> a loader of the instance types the cluster's HyperPod groups have
export const clusterTypes = (cluster) => async () => ((await callTool("hyperpod_list_instance_groups", cluster ? { cluster } : {})).instance_groups || [])
  .map((g) => ({ value: g.instance_type, label: `${g.instance_type} — group ${g.name}, ${g.current_count} of ${g.target_count} nodes` }))
  .filter((g, i, all) => all.findIndex((x) => x.value === g.value) === i);
