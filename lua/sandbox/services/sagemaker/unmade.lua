-- SageMaker resources the simulated account never has, listed as SageMaker
-- lists them: training jobs (hypd trains with HyperPodPyTorchJobs on the
-- cluster, not SageMaker training jobs), models (the endpoints the HyperPod
-- inference operator registers are in endpoints.lua; no CreateModel is
-- simulated) and cluster scheduler configs (no CreateClusterSchedulerConfig
-- is simulated). Each answers an empty page in the API's shape; the generic
-- constraint checks have already refused a MaxResults, SortBy or status
-- filter outside the model's range.
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops = M.operations

function ops.ListTrainingJobs() return { TrainingJobSummaries = json.array() } end

function ops.ListModels() return { Models = json.array() } end

function ops.ListClusterSchedulerConfigs() return { ClusterSchedulerConfigSummaries = json.array() } end

return M
