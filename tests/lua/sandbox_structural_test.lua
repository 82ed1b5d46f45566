-- sandbox.k8s.structural and sandbox.k8s.typed as pure functions: a CRD's
-- structural schema judged as kube-openapi judges it (each rule the
-- apiextensions API server applies, with its words), and a built-in kind
-- read as Go's encoding/json reads it into its types.
local t = require "hypd.tap"
local json = require "hypd.json"
local structural = require "sandbox.k8s.structural"
local typed = require "sandbox.k8s.typed"

local SCHEMA = { type = "object", properties = {
  spec = { type = "object", required = { "size" }, properties = {
    size = { type = "integer", minimum = 1, maximum = 8 },
    ratio = { type = "number", exclusiveMinimum = true, minimum = 0 },
    step = { type = "integer", multipleOf = 2 },
    name = { type = "string", minLength = 2, maxLength = 5, pattern = "^[a-z]+$" },
    mode = { type = "string", enum = { "fast", "slow" } },
    port = { ["x-kubernetes-int-or-string"] = true },
    note = { type = "string", nullable = true },
    other = { type = "string" },
    tags = { type = "array", maxItems = 2, items = { type = "string" } },
    labels = { type = "object", additionalProperties = { type = "string" } },
    extra = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true,
      properties = { known = { type = "boolean" } } },
    inner = { type = "object", ["x-kubernetes-embedded-resource"] = true,
      ["x-kubernetes-preserve-unknown-fields"] = true },
  } } } }

-- errs(spec) -> the "field: body" lines of the field errors of an object with that spec
local function errs(spec)
  local out = {}
  for _, e in ipairs(structural.errors(SCHEMA, json.decode(json.encode { spec = spec }))) do
    local st = structural.invalid({ group = "x.io", kind = "Thing" }, "t", { e })
    out[#out + 1] = st.details.causes[1].reason .. " " .. st.message:gsub('^Thing%.x%.io "t" is invalid: ', "")
  end
  return out
end

local CASES = {
  { "a valid object", { size = 2, ratio = 0.5, step = 4, name = "abc", mode = "fast", port = "http", note = json.null,
    tags = { "a" }, labels = { a = "b" }, extra = { known = true, anything = { 1, 2 } },
    inner = { apiVersion = "v1", kind = "ConfigMap", data = { k = "v" } } }, {} },
  { "an integer given a string", { size = "two" }, { 'FieldValueTypeInvalid spec.size: Invalid value: "string": ' ..
    'spec.size in body must be of type integer: "string"' } },
  { "an integer given a fraction", { size = 1.5 }, { 'FieldValueTypeInvalid spec.size: Invalid value: "number": ' ..
    'spec.size in body must be of type integer: "number"' } },
  { "a required field missing", { ratio = 1 }, { "FieldValueRequired spec.size: Required value" } },
  { "over the maximum", { size = 9 }, { "FieldValueInvalid spec.size: Invalid value: 9: spec.size in body should be " ..
    "less than or equal to 8" } },
  { "under the minimum", { size = 0 }, { "FieldValueInvalid spec.size: Invalid value: 0: spec.size in body should be " ..
    "greater than or equal to 1" } },
  { "at an exclusive minimum", { size = 1, ratio = 0 }, { "FieldValueInvalid spec.ratio: Invalid value: 0: " ..
    "spec.ratio in body should be greater than 0" } },
  { "not a multiple", { size = 1, step = 3 }, { "FieldValueInvalid spec.step: Invalid value: 3: spec.step in body " ..
    "should be a multiple of 2" } },
  { "too short and not matching", { size = 1, name = "A" }, {
    'FieldValueInvalid spec.name: Invalid value: "A": spec.name in body should be at least 2 chars long',
    "FieldValueInvalid spec.name: Invalid value: \"A\": spec.name in body should match '^[a-z]+$'" } },
  { "too long", { size = 1, name = "abcdef" }, { "FieldValueTooLong spec.name: Too long: may not be more than 5 bytes" } },
  { "outside the enum", { size = 1, mode = "medium" }, { 'FieldValueNotSupported spec.mode: Unsupported value: ' ..
    '"medium": supported values: "fast", "slow"' } },
  { "int-or-string given a boolean", { size = 1, port = true }, { 'FieldValueTypeInvalid spec.port: Invalid value: ' ..
    '"boolean": spec.port in body must be of type integer,string: "boolean"' } },
  { "a null where none is allowed is pruned", { size = 1, other = json.null }, {} },
  { "too many items, an item of the wrong type", { size = 1, tags = { "a", "b", 3 } }, {
    "FieldValueTooMany spec.tags: Too many: 3: must have at most 2 items",
    'FieldValueTypeInvalid spec.tags[2]: Invalid value: "integer": spec.tags[2] in body must be of type string: ' ..
    '"integer"' } },
  { "a map's value of the wrong type", { size = 1, labels = { a = 1 } }, { 'FieldValueTypeInvalid spec.labels.a: ' ..
    'Invalid value: "integer": spec.labels.a in body must be of type string: "integer"' } },
  { "below preserve-unknown-fields the declared fields are still judged", { size = 1, extra = { known = "yes" } }, {
    'FieldValueTypeInvalid spec.extra.known: Invalid value: "string": spec.extra.known in body must be of type ' ..
    'boolean: "string"' } },
  { "an embedded resource needs its apiVersion and kind", { size = 1, inner = { data = {} } }, {
    "FieldValueRequired spec.inner.apiVersion: Required value: must not be empty",
    "FieldValueRequired spec.inner.kind: Required value: must not be empty" } },
}

t.test("a custom resource is judged by its structural schema, rule by rule, in the API server's words", function()
  t.ok(#CASES > 10, "cases")
  for _, c in ipairs(CASES) do t.eq(errs(c[2]), c[3], c[1]) end
end)

local DEPLOY = { group = "apps", version = "v1", kind = "Deployment" }
local function deployment(spec) return json.decode(json.encode { apiVersion = "apps/v1", kind = "Deployment",
  metadata = { name = "web" }, spec = spec }) end
local function container(c)
  return { selector = { matchLabels = { app = "web" } }, template = { metadata = { labels = { app = "web" } },
    spec = { containers = { c } } } }
end

local DECODE = {
  { "a valid Deployment", { replicas = 2, template = { spec = { containers = { { name = "web", image = "nginx",
    ports = { { containerPort = 80 } }, resources = { limits = { cpu = "500m", memory = 1073741824 } } } } } } }, nil },
  { "replicas given a string", { replicas = "one" }, "json: cannot unmarshal string into Go struct field " ..
    "DeploymentSpec.spec.replicas of type int32" },
  { "replicas given a fraction", { replicas = 1.5 }, "json: cannot unmarshal number 1.5 into Go struct field " ..
    "DeploymentSpec.spec.replicas of type int32" },
  { "replicas past int32", { replicas = 3000000000 }, "json: cannot unmarshal number 3000000000 into Go struct field " ..
    "DeploymentSpec.spec.replicas of type int32" },
  { "a struct given a string", { template = "x" }, "json: cannot unmarshal string into Go struct field " ..
    "DeploymentSpec.spec.template of type v1.PodTemplateSpec" },
  { "a list given an object", { template = { spec = { containers = { name = "web" } } } }, "json: cannot unmarshal " ..
    "object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container" },
  { "the first error in key order is answered", { replicas = "one", paused = "yes" }, "json: cannot unmarshal string " ..
    "into Go struct field DeploymentSpec.spec.paused of type bool" },
  { "a malformed quantity stops the reading", container { name = "web", resources = { limits = { cpu = "lots" } } },
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" },
  { "an int-or-string given a boolean", { strategy = { rollingUpdate = { maxSurge = true } } }, "json: cannot " ..
    "unmarshal bool into Go struct field RollingUpdateDeployment.spec.strategy.rollingUpdate.maxSurge of type int32" },
  { "a time that is no time", { template = { metadata = { creationTimestamp = "yesterday" } } }, 'parsing time ' ..
    '"yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"' },
}

t.test("a built-in kind is read into its Go types as encoding/json reads it", function()
  for _, c in ipairs(DECODE) do t.eq(typed.error(DEPLOY, deployment(c[2])), c[3], c[1]) end
  t.eq(typed.apply_error(DEPLOY, deployment { replicas = "one" }),
    ".spec.replicas: expected numeric (int or float), got string")
  t.eq(typed.apply_error(DEPLOY, deployment(container { name = "web", ports = { { containerPort = true } } })),
    '.spec.template.spec.containers[name="web"].ports[0].containerPort: expected numeric (int or float), got bool')
end)
