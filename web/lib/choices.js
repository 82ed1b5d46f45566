// Loaders of a form field's choices from the read tools, for
// <SchemaForm choices={...}/>: each is (values) -> [{value, label}].
//   choices={{ availability_zone: zones, instance_type: { load: instanceTypes, deps: ["availability_zone"] } }}
// standard(schema) picks the loaders for the fields a schema has by name.
import { callTool } from "./api.js";

export const clusters = async () => ((await callTool("cluster_list", {})).clusters || [])
  .map((c) => ({ value: c.name, label: c.name + (c.active ? " (active)" : "") }));

export const zones = async (v = {}) => ((await callTool("aws_get_availability_zones", v.region ? { region: v.region } : {})).zones || [])
  .map((z) => ({ value: z.name, label: `${z.name} (${z.zone_id})` }));

export const instanceTypes = async (v = {}) => {
  const p = {};
  if (v.availability_zone) p.zone = v.availability_zone;
  if (v.region) p.region = v.region;
  return ((await callTool("aws_get_instance_types", p)).instance_types || []).map((t) => ({ value: t.name,
    label: `${t.name} — ${t.vcpus} vCPU, ${t.memory_gib} GiB${t.accelerator_count ? `, ${t.accelerator_count} × ${t.accelerator || "accelerator"}` : ""}` }));
};

// standard(schema) -> the choices for the fields of a schema that name a
// cluster, a zone or an instance type (string fields without an enum)
export function standard(schema) {
  const p = (schema && schema.properties) || {};
  const plain = (k) => p[k] && p[k].type === "string" && !p[k].enum;
  const out = {};
  if (plain("cluster")) out.cluster = clusters;
  if (plain("availability_zone")) out.availability_zone = { load: zones, deps: ["region"] };
  if (plain("instance_type")) out.instance_type = { load: instanceTypes, deps: ["region", "availability_zone"] };
  return out;
}

// clusterTypes(cluster) -> a loader of the instance types the cluster's HyperPod groups have
export const clusterTypes = (cluster) => async () => ((await callTool("hyperpod_list_instance_groups", cluster ? { cluster } : {})).instance_groups || [])
  .map((g) => ({ value: g.instance_type, label: `${g.instance_type} — group ${g.name}, ${g.current_count} of ${g.target_count} nodes` }))
  .filter((g, i, all) => all.findIndex((x) => x.value === g.value) === i);
