-- Log monitoring rules for hang and stall detection: the recipes'
-- log_monitoring and hang_detection parameters render into
-- runPolicy.logMonitoringConfiguration (the CRD's field names); bad rules
-- are refused naming the field and the rule; hypd.regex gives a rule's
-- captured value; in the sandbox a rule whose start cutoff passes without a
-- matching line restarts the job (a retry of its budget) and past the budget
-- fails it, a metric rule marks it SLOW, hang_detection's rules match what
-- the simulated programs print, and training_get_job names the rule that
-- fired.
local t = require "hypd.tap"
local TH = dofile("tests/lua/training_helpers.lua")
local call = TH.start()
local H = TH.H
local dispatch = require "hypd.tool.dispatch"
local json = require "hypd.json"
local ADMIN = { name = "monitor-tester", scope = "admin", front = "test" }
local EKS, HP = "mon-a", "mon-a-hp"
local field_rules = H.field_rules

local function params(extra)
  local a = json.object()
  a.job_name, a.instance_type, a.script, a.replicas = "mon", "ml.g5.12xlarge", "scripts/train.py", 1
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

local rule = TH.obj

local function render(recipe, p)
  return dispatch.call("training_render", { recipe = recipe, params = p }, ADMIN)
end

t.test("log_monitoring rules render into runPolicy.logMonitoringConfiguration with the CRD's names", function()
  local r, err = render("pytorch-torchrun", params { log_monitoring = {
    rule { name = "JobStart", log_pattern = ".*Experiment configuration.*", expected_start_cutoff_seconds = 120 },
    rule { name = "HighLoss", log_pattern = ".*loss=(\\d+\\.\\d+).*", metric_threshold = 5, operator = "gteq",
      metric_evaluation_data_points = 10, stop_pattern = ".*Training completed.*" } } })
  t.ok(r, err and err.message)
  if not r then return end
  local lm = r.objects[1].spec.runPolicy.logMonitoringConfiguration
  t.eq(lm, { { name = "JobStart", logPattern = ".*Experiment configuration.*", expectedStartCutOffInSeconds = 120 },
    { name = "HighLoss", logPattern = ".*loss=(\\d+\\.\\d+).*", metricThreshold = 5, operator = "gteq",
      metricEvaluationDataPoints = 10, stopPattern = ".*Training completed.*" } })
  local plain = assert(render("pytorch-torchrun", params()))
  t.eq(plain.objects[1].spec.runPolicy.logMonitoringConfiguration, nil, "no rules unless asked")
end)

t.test("hang_detection adds JobStart and JobHangingDetection with the patterns of the recipe's program", function()
  local lf = json.object()
  lf.job_name, lf.instance_type, lf.model, lf.dataset_dir, lf.dataset = "lf", "ml.g5.12xlarge", "models/qwen",
    "datasets/alpaca", "alpaca"
  lf.hang_detection = true
  local r = assert(render("llama-factory", lf))
  local lm = r.objects[1].spec.runPolicy.logMonitoringConfiguration
  t.eq(#lm, 2)
  t.eq({ lm[1].name, lm[1].expectedStartCutOffInSeconds }, { "JobStart", 600 })
  t.like(lm[1].logPattern, "Running training")
  t.eq({ lm[2].name, lm[2].expectedRecurringFrequencyInSeconds, lm[2].expectedStartCutOffInSeconds },
    { "JobHangingDetection", 1800, 2400 })
  local tuned = assert(render("pytorch-torchrun", params { hang_detection = rule { start_cutoff_seconds = 60,
    progress_frequency_seconds = 30, progress_pattern = ".*iter (\\d+).*" } }))
  lm = tuned.objects[1].spec.runPolicy.logMonitoringConfiguration
  t.eq({ lm[1].logPattern, lm[1].expectedStartCutOffInSeconds, lm[2].logPattern,
    lm[2].expectedRecurringFrequencyInSeconds }, { ".*Experiment configuration.*", 60, ".*iter (\\d+).*", 30 })
end)

t.test("bad rules are refused naming the field and the rule: pattern, requires, capture, condition, unique, enum",
  function()
    local cases = {
      { rule { name = "a", log_pattern = ".*(oops", expected_start_cutoff_seconds = 5 },
        "params.log_monitoring[0].log_pattern:pattern" },
      { rule { name = "a", log_pattern = ".*x.*", expected_start_cutoff_seconds = 5, stop_pattern = "[z" },
        "params.log_monitoring[0].stop_pattern:pattern" },
      { rule { name = "a", log_pattern = ".*loss=(\\d+).*", operator = "gt" },
        "params.log_monitoring[0].metric_threshold:requires" },
      { rule { name = "a", log_pattern = ".*loss=\\d+.*", operator = "gt", metric_threshold = 3 },
        "params.log_monitoring[0].log_pattern:capture" },
      { rule { name = "a", log_pattern = ".*x.*" }, "params.log_monitoring[0].expected_start_cutoff_seconds:condition" },
      { rule { name = "a", log_pattern = ".*x.*", expected_start_cutoff_seconds = 5, operator = "gte",
        metric_threshold = 1 }, "params.log_monitoring[0].operator:enum" },
      { rule { name = "a", log_pattern = ".*x.*", expected_start_cutoff_seconds = 0 },
        "params.log_monitoring[0].expected_start_cutoff_seconds:minimum" },
      { rule { log_pattern = ".*x.*", expected_start_cutoff_seconds = 5 }, "params.log_monitoring[0].name:required" },
    }
    for _, c in ipairs(cases) do
      local _, err = render("pytorch-torchrun", params { log_monitoring = { c[1] } })
      t.eq(field_rules(err), { c[2] }, c[2])
    end
    local _, err = render("pytorch-torchrun", params { log_monitoring = {
      rule { name = "JobStart", log_pattern = ".*x.*", expected_start_cutoff_seconds = 5 } }, hang_detection = true })
    t.eq(field_rules(err), { "params.log_monitoring[0].name:unique" }, "a name hang_detection uses")
    local v = json.object()
    v.job_name, v.instance_type, v.model = "rl", "ml.g5.12xlarge", "models/qwen"
    v.train_files, v.val_files = "a.parquet", "b.parquet"
    v.log_monitoring = { rule { name = "a", log_pattern = "x", expected_start_cutoff_seconds = 5 } }
    _, err = render("verl", v)
    t.eq(field_rules(err), { "params.log_monitoring:unknown" }, "a RayJob has no log monitoring")
  end)

t.test("hypd.regex gives the capturing groups of a match (the value a metric rule compares)", function()
  local re = assert(require("hypd.regex").compile(".*Loss: (\\d+\\.\\d+).*"))
  t.eq(re:match("[train.py:88] Batch 7 Loss: 1.2345 lr=3e-4"), { "1.2345" })
  t.eq(re:match("no loss here"), nil)
  local two = assert(require("hypd.regex").compile("loss=(\\d+(\\.\\d+)?)|(nan)"))
  t.eq(two:match("step 3 loss=2"), { "2", false, false })
  t.eq(two:match("step 3 loss=nan"), { false, false, "nan" })
end)

local conn
local function submit(extra)
  return TH.run("training_submit", { recipe = "pytorch-torchrun", params = params(extra), cluster = EKS }, ADMIN)
end

local function follow(name) return TH.follow({ name = name, cluster = EKS }, ADMIN) end

t.test("a cluster with the training operator's CRD", function()
  conn = TH.cluster(call, EKS, HP, 85)
  TH.training_operator(conn)
  t.ok(conn:get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "hyperpodpytorchjobs.sagemaker.amazonaws.com"))
end)

t.test("a start cutoff passing without its line restarts the job within the budget, then fails it, naming the rule",
  function()
    local r, err = submit { job_name = "stuck", max_retries = 1, log_monitoring = {
      rule { name = "ModelLoaded", log_pattern = ".*Model loaded.*", expected_start_cutoff_seconds = 5 } } }
    t.ok(r, err and err.message)
    if not r then return end
    local g = follow("stuck")
    t.eq({ g.phase, g.restarts, g.max_retries }, { "Failed", 1, 1 })
    t.eq(g.log_monitoring and g.log_monitoring.rules, { "ModelLoaded" })
    local fired = g.log_monitoring and g.log_monitoring.fired or {}
    t.eq(#fired, 2, "it fired on the first run and on the retry")
    t.eq({ fired[1] and fired[1].rule, fired[1] and fired[1].state }, { "ModelLoaded", "HANGING" })
    t.like(fired[1] and fired[1].why, "no line matched \".%*Model loaded.%*\" within 5 s of the start")
    t.like(g.conditions[#g.conditions].message, "log monitoring rule ModelLoaded found the job HANGING")
  end)

t.test("a metric rule marks the job SLOW after its data points in a row; hang_detection's rules let a job finish",
  function()
    local r, err = submit { job_name = "slow", max_retries = 0, log_monitoring = {
      rule { name = "LossTooHigh", log_pattern = ".*loss=(\\d+(\\.\\d+)?).*", metric_threshold = 0, operator = "gt",
        metric_evaluation_data_points = 3 } } }
    t.ok(r, err and err.message)
    local g = r and follow("slow")
    t.eq(g and g.phase, "Failed")
    local fired = g and g.log_monitoring.fired or {}
    t.eq({ fired[1] and fired[1].rule, fired[1] and fired[1].state }, { "LossTooHigh", "SLOW" })
    t.like(fired[1] and fired[1].why, "gt 0 for 3 line")
    r, err = submit { job_name = "watched", hang_detection = rule { start_cutoff_seconds = 30,
      progress_frequency_seconds = 5 } }
    t.ok(r, err and err.message)
    g = r and follow("watched")
    t.eq({ g and g.phase, g and g.restarts }, { "Completed", 0 }, "the recipe's patterns match what it prints")
    t.eq(g and #g.log_monitoring.fired, 0)
  end)
