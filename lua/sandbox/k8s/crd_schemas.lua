-- sandbox.k8s.crd_schemas: the openAPIV3Schema of the HyperPod CRDs the
-- sandbox installs (HyperPodPyTorchJob with the training operator,
-- InferenceEndpointConfig with the inference operator), with short field
-- descriptions for kubectl explain, after the shapes in hyperpod-notes
-- §10.5 and §10.6. The fields listed are known; an object whose fields the
-- notes do not list in full keeps x-kubernetes-preserve-unknown-fields (so
-- strict field validation refuses a misspelled field where the shape is
-- known, and lets through what the sandbox cannot judge). Pod templates
-- and status are open.
local M = {}

local function str(d, enum) return { type = "string", description = d, enum = enum } end
local function int(d) return { type = "integer", format = "int32", description = d } end
local function bool(d) return { type = "boolean", description = d } end
local function arr(items, d) return { type = "array", items = items, description = d } end
local function obj(d, props, required) return { type = "object", description = d, properties = props, required = required } end
local function open(d) return { type = "object", description = d, ["x-kubernetes-preserve-unknown-fields"] = true } end

local TEMPLATE = open("The pod template of the replicas (a PodTemplateSpec: metadata and spec), as in a Deployment.")

M.HyperPodPyTorchJob = obj("HyperPodPyTorchJob runs a PyTorch job on a SageMaker HyperPod EKS cluster under the " ..
  "HyperPod training operator, which starts its pods, watches their health and logs, and restarts the job after a " ..
  "fault within its recovery budget.", {
  spec = obj("The desired job: its replicas, processes per node, recovery policy and elastic scaling.", {
    nprocPerNode = str("The number of processes per node (usually the GPUs of a node), as a string: \"8\", or " ..
      "\"auto\"."),
    replicaSpecs = arr(obj("A group of identical pods of the job.", {
      name = str("The name of the replica group (for example \"pods\")."),
      replicas = int("The number of pods (nodes) of this group."),
      maxReplicas = int("The most pods this group may grow to under elastic training."),
      spares = int("Spare pods kept ready to replace a faulty one without waiting for scheduling."),
      template = TEMPLATE,
    }), "The replica groups of the job; each group's pods come from its template."),
    runPolicy = obj("How the operator runs, restarts and cleans up the job.", {
      jobMaxRetryCount = int("The recovery budget: how many times the job is restarted after a failure before " ..
        "it is marked Failed."),
      cleanPodPolicy = str("Which pods are deleted when the job ends: All, Running or None.", { "All", "Running", "None" }),
      activeDeadlineSeconds = { type = "integer", format = "int64",
        description = "How long the job may run, in seconds, before it is stopped." },
      faultDeadlineSeconds = int("How long a faulty job may take to recover, in seconds."),
      startupDeadlineSeconds = int("How long the pods may take to start, in seconds."),
      ttlSecondsAfterFinished = int("How long a finished job is kept before it is deleted, in seconds."),
      suspend = bool("Whether the job is suspended (its pods are not running)."),
      workloadMode = str("The operator's workload mode for this job."),
      restartPolicy = obj("When a fault restarts only the faulty processes and when the whole job.", {
        evalPeriodSeconds = int("The window, in seconds, over which restarts are counted."),
        maxFullJobRestarts = int("The most full-job restarts allowed."),
        numRestartBeforeFullJobRestart = int("How many process-level restarts happen before the whole job is " ..
          "restarted."),
        maxNumRepeatOffendersToAvoid = int("How many repeatedly faulty nodes are avoided when pods are placed " ..
          "again."),
        scaleUpSnoozeTimeInSeconds = int("How long, in seconds, scaling up waits after a restart."),
      }),
      logMonitoringConfiguration = arr(obj("A rule on the job's log lines: a job that never logs the pattern, " ..
        "stops logging it, or logs a metric past its threshold is treated as hung or faulty and restarted.", {
        name = str("The name of the rule."),
        logPattern = str("The regular expression the log lines are matched against; a capture group is the metric."),
        expectedStartCutOffInSeconds = int("How long, in seconds, after the start the pattern must first appear."),
        expectedRecurringFrequencyInSeconds = int("How often, in seconds, the pattern must appear again."),
        metricThreshold = { type = "number", description = "The threshold the captured metric is compared with." },
        operator = str("How the metric is compared with the threshold: gt, gteq, lt, lteq, eq."),
        metricEvaluationDataPoints = int("How many consecutive data points must cross the threshold."),
        stopPattern = str("A pattern after which the rule stops being evaluated."),
      }, { "name", "logPattern" }), "Hang and stall detection rules on the job's logs."),
    }),
    elasticPolicy = obj("Elastic training: the job runs with between minReplicas and maxReplicas pods and scales " ..
      "as capacity comes and goes.", {
      minReplicas = int("The fewest pods the job runs with."),
      maxReplicas = int("The most pods the job runs with."),
      replicaIncrementStep = int("The step, in pods, by which the job grows or shrinks."),
      replicaDiscreteValues = arr({ type = "integer", format = "int32" }, "The only pod counts the job may run with."),
      scalingTimeoutInSeconds = int("How long, in seconds, a scaling step may take."),
      gracefulShutdownTimeoutInSeconds = int("How long, in seconds, pods get to stop when the job shrinks."),
      faultyScaleDownTimeoutInSeconds = int("How long, in seconds, the job waits before shrinking after a fault."),
    }),
  }),
  status = open("The observed state: conditions, pods, restart counts, start and completion times."),
})

local AUTOSCALING = open("Autoscaling (KEDA): minimum and maximum replicas, polling and cooldown, and Prometheus or " ..
  "CloudWatch triggers.")

M.InferenceEndpointConfig = obj("InferenceEndpointConfig deploys a model from S3, FSx or Hugging Face as an " ..
  "inference endpoint on a SageMaker HyperPod EKS cluster under the HyperPod inference operator, which creates its " ..
  "Deployment, Service and load balancer, and optionally registers a SageMaker endpoint.", {
  spec = obj("The desired endpoint: the model, where it runs, how it scales and how it is reached.", {
    modelName = str("The name of the model."),
    modelVersion = str("The version of the model."),
    modelSourceConfig = open("Where the model's files come from: modelSourceType (fsx, s3, huggingface, " ..
      "kubernetesVolume) with s3Storage {bucketName, region}, fsxStorage {fileSystemId, dnsName, mountName} or " ..
      "huggingFaceModel {modelId, commitSHA, tokenSecretRef}; modelLocation, the path of the model in the source; " ..
      "prefetchEnabled."),
    endpointName = str("The name of the SageMaker endpoint to register for the model."),
    instanceType = str("The ml. instance type the worker pods run on."),
    instanceTypes = arr({ type = "string" }, "Instance types in order of preference, tried in turn."),
    replicas = int("The number of worker pods."),
    InitialReplicaCount = int("The number of worker pods to start with."),
    nodeAffinity = open("Node affinity for the worker pods, as in a pod spec."),
    maxDeployTimeInSeconds = int("How long, in seconds, the deployment may take before it is marked failed."),
    invocationEndpoint = str("The path the model is invoked on (for example v1/chat/completions)."),
    loadBalancer = open("The load balancer in front of the workers: healthCheckPath and routingAlgorithm " ..
      "(least_outstanding_requests or round_robin)."),
    tlsConfig = open("TLS for the endpoint: tlsCertificateOutputS3Uri, or customCertificateConfig {acmArn, " ..
      "domainName}."),
    dnsConfig = open("DNS for the endpoint: hostedZoneId."),
    autoScalingSpec = AUTOSCALING,
    kvCacheSpec = open("The KV cache: enableL1Cache, enableL2Cache, l2CacheSpec {l2CacheBackend, l2CacheLocalUrl}, " ..
      "cacheConfigFile."),
    intelligentRoutingSpec = open("Intelligent routing: enabled and routingStrategy (prefixaware, kvaware, session, " ..
      "roundrobin), with its own autoScalingSpec."),
    pdSpec = open("Prefill/decode disaggregation: prefillSpec, decodingSpec, routingThreshold, topologySpec, " ..
      "autoScalingSpec."),
    metrics = open("Metrics: enabled, metricsScrapeIntervalSeconds and modelMetrics {port, path}."),
    dataCapture = open("Capture of requests and responses."),
    kubernetes = open("Pod-level extras: initContainers, volumes, serviceAccountName, schedulerName."),
    tags = arr(obj("A tag.", { name = str("The tag's key."), value = str("The tag's value.") }),
      "Tags of the SageMaker resources the operator creates."),
    worker = obj("The container that serves the model.", {
      image = str("The container image of the model server."),
      args = arr({ type = "string" }, "The arguments of the model server."),
      command = arr({ type = "string" }, "The command of the model server (the image's entrypoint if left out)."),
      environmentVariables = arr(open("An environment variable, as in a container (name, value)."),
        "The environment of the model server."),
      modelInvocationPort = obj("The port the model server listens on.", {
        containerPort = int("The port number."), name = str("The port's name."),
      }, { "containerPort" }),
      modelVolumeMount = obj("Where the model's files are mounted in the container.", {
        name = str("The volume's name."), mountPath = str("The path in the container."),
      }, { "name" }),
      resources = open("The compute resources of the container (requests and limits: cpu, memory, nvidia.com/gpu)."),
      probes = open("Liveness, readiness and startup probes of the container."),
      requestLimits = open("Limits on requests: maxConcurrentRequests, maxQueueSize, overflowStatusCode."),
      workingDir = str("The working directory of the model server."),
    }, { "image", "modelInvocationPort", "modelVolumeMount", "resources" }),
  }, { "modelName", "modelSourceConfig", "worker" }),
  status = open("The observed state: conditions, the deployment's and endpoint's states."),
})

-- the worker's fields are described, not enforced: the notes may not list
-- every field the operator's CRD has
M.InferenceEndpointConfig.properties.spec.properties.worker["x-kubernetes-preserve-unknown-fields"] = true

-- the add-ons' other CRDs, after their upstream schemas (KEDA 2, Karpenter
-- v1, cert-manager v1, the HyperPod inference and Karpenter CRDs): the
-- typed fields hypd and its users write, the rest open
local function map_of(items, d) return { type = "object", additionalProperties = items, description = d } end
local function with(s, extra) for k, v in pairs(extra) do s[k] = v end return s end
local DURATION = "^(([0-9]+(s|m|h))+|Never)$"

M.ScaledObject = obj("ScaledObject scales a Deployment (or another scalable target) between minReplicaCount and " ..
  "maxReplicaCount on the values of its triggers, under KEDA.", {
  spec = obj("The scaling of the target.", {
    scaleTargetRef = obj("The object scaled.", {
      apiVersion = str("The API version of the target."), kind = str("The kind of the target (Deployment)."),
      name = str("The name of the target."), envSourceContainerName = str("The container whose environment the " ..
        "triggers read."),
    }, { "name" }),
    pollingInterval = int("How often, in seconds, the triggers are read."),
    cooldownPeriod = int("How long, in seconds, after the last active trigger before scaling to minReplicaCount."),
    initialCooldownPeriod = int("How long, in seconds, after creation before the first cooldown."),
    idleReplicaCount = int("The replicas while no trigger is active."),
    minReplicaCount = int("The fewest replicas."),
    maxReplicaCount = int("The most replicas."),
    advanced = open("The HPA's behavior and scaling modifiers."),
    fallback = obj("The replicas kept while the triggers fail.", {
      failureThreshold = int("How many failed reads before the fallback."), replicas = int("The fallback replicas."),
    }, { "failureThreshold", "replicas" }),
    triggers = arr(obj("A source of a metric.", {
      type = str("The scaler: prometheus, aws-cloudwatch, cpu, memory..."),
      name = str("The trigger's name."),
      metadata = map_of({ type = "string" }, "The scaler's settings, every value a string."),
      metricType = str("How the metric is compared: AverageValue, Value or Utilization."),
      useCachedMetrics = bool("Whether the metric is cached between polls."),
      authenticationRef = obj("The TriggerAuthentication of the trigger.", {
        name = str("Its name."), kind = str("TriggerAuthentication or ClusterTriggerAuthentication."),
      }, { "name" }),
    }, { "metadata", "type" }), "What the replicas follow."),
  }, { "scaleTargetRef", "triggers" }),
  status = open("The observed state: conditions, the HPA's name, the health of the triggers."),
})

local TAINT = obj("A taint of the nodes.", {
  key = str("The taint's key."), value = str("The taint's value."),
  effect = str("The taint's effect.", { "NoSchedule", "PreferNoSchedule", "NoExecute" }),
  timeAdded = { type = "string", format = "date-time", description = "When the taint was added." },
}, { "effect", "key" })

M.NodePool = obj("NodePool is a Karpenter pool of nodes: the template of the nodes it launches, the limits of " ..
  "the pool and when its nodes are disrupted.", {
  spec = obj("The pool.", {
    template = obj("The nodes the pool launches.", {
      metadata = obj("The labels and annotations of the nodes.", {
        labels = map_of({ type = "string" }, "Labels."), annotations = map_of({ type = "string" }, "Annotations."),
      }),
      spec = obj("The nodes' class, requirements and taints.", {
        nodeClassRef = obj("The node class of the pool's nodes.", {
          group = str("The node class's API group."), kind = str("The node class's kind."),
          name = str("The node class's name."),
        }, { "group", "kind", "name" }),
        requirements = arr(obj("A requirement on the nodes' labels.", {
          key = with(str("The label's key."), { maxLength = 316 }),
          operator = str("How the label is matched.", { "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt" }),
          values = arr({ type = "string" }, "The values of In, NotIn, Gt and Lt."),
          minValues = with(int("The fewest distinct values the pool's instance types must offer."),
            { minimum = 1, maximum = 50 }),
        }, { "key", "operator" }), "The labels the launched nodes must have."),
        taints = arr(TAINT, "The taints of the nodes."),
        startupTaints = arr(TAINT, "The taints the nodes start with."),
        expireAfter = with(str("How long a node lives before it is replaced, or Never."), { pattern = DURATION }),
        terminationGracePeriod = str("How long a node's draining may take."),
      }, { "nodeClassRef", "requirements" }),
    }, { "spec" }),
    disruption = obj("When the pool's nodes are disrupted.", {
      consolidationPolicy = str("Which nodes consolidation may remove.", { "WhenEmpty", "WhenEmptyOrUnderutilized" }),
      consolidateAfter = with(str("How long after a pod was added or removed a node may be consolidated, or Never."),
        { pattern = DURATION }),
      budgets = arr(obj("How many nodes may be disrupted at once.", {
        nodes = with(str("A number or a percentage of the pool's nodes."),
          { pattern = "^((100|[0-9]{1,2})%|[0-9]+)$" }),
        schedule = str("A cron schedule when the budget applies."), duration = str("How long it applies."),
        reasons = arr(str("A disruption reason.", { "Underutilized", "Empty", "Drifted" }), "The reasons it limits."),
      }, { "nodes" }), "The disruption budgets."),
    }),
    limits = map_of({ ["x-kubernetes-int-or-string"] = true }, "The most resources (cpu, memory, nvidia.com/gpu) " ..
      "the pool's nodes may have together."),
    weight = with(int("The pool's priority among pools."), { minimum = 1, maximum = 100 }),
  }, { "template" }),
  status = open("The observed state: the resources of the pool's nodes, conditions."),
})

M.HyperpodNodeClass = obj("HyperpodNodeClass names the HyperPod instance groups whose instances a Karpenter " ..
  "NodePool of the cluster launches.", {
  spec = with(obj("The node class.", {
    instanceGroups = arr({ type = "string" }, "The instance groups of the HyperPod cluster."),
  }), { ["x-kubernetes-preserve-unknown-fields"] = true }),
  status = open("The observed state: each instance group's instance types, capacity and subnets, conditions."),
})

M.JumpStartModel = obj("JumpStartModel deploys a model of the SageMaker JumpStart hub as an inference endpoint " ..
  "on a HyperPod EKS cluster under the HyperPod inference operator.", {
  spec = with(obj("The model, the server it runs on and the endpoint.", {
    model = with(obj("The JumpStart model.", {
      modelHubName = str("The hub (SageMakerPublicHub)."), modelId = str("The model's id."),
      modelVersion = str("The model's version."), acceptEula = bool("Whether the model's EULA is accepted."),
    }), { ["x-kubernetes-preserve-unknown-fields"] = true }),
    server = with(obj("The model server.", { instanceType = str("The ml. instance type the server runs on.") }),
      { ["x-kubernetes-preserve-unknown-fields"] = true }),
    replicas = int("The number of model server pods."),
    maxDeployTimeInSeconds = int("How long, in seconds, the deployment may take."),
    sageMakerEndpoint = obj("The SageMaker endpoint to register.", { name = str("The endpoint's name.") }),
    tlsConfig = open("TLS for the endpoint: tlsCertificateOutputS3Uri."),
  }), { ["x-kubernetes-preserve-unknown-fields"] = true }),
  status = open("The observed state: conditions, the deployment's and endpoint's states."),
})

local ISSUER_REF = obj("The issuer of the certificate.", {
  name = str("The issuer's name."), kind = str("Issuer or ClusterIssuer."), group = str("The issuer's API group."),
}, { "name" })

M.Certificate = obj("Certificate asks cert-manager for a TLS certificate from an issuer, kept in a Secret.", {
  spec = with(obj("The certificate.", {
    secretName = str("The Secret the certificate and its key are written to."),
    issuerRef = ISSUER_REF,
    commonName = str("The certificate's common name."),
    dnsNames = arr({ type = "string" }, "The DNS names of the certificate."),
    ipAddresses = arr({ type = "string" }, "The IP addresses of the certificate."),
    uris = arr({ type = "string" }, "The URIs of the certificate."),
    duration = str("How long the certificate is valid (a Go duration)."),
    renewBefore = str("How long before its expiry it is renewed."),
    isCA = bool("Whether the certificate is a CA's."),
    usages = arr({ type = "string" }, "The key usages."),
    revisionHistoryLimit = int("How many CertificateRequests are kept."),
    privateKey = obj("The certificate's key.", {
      algorithm = str("The key's algorithm.", { "RSA", "ECDSA", "Ed25519" }),
      encoding = str("The key's encoding.", { "PKCS1", "PKCS8" }),
      rotationPolicy = str("Whether a renewal makes a new key.", { "Never", "Always" }),
      size = { type = "integer", description = "The key's size in bits." },
    }),
  }, { "issuerRef", "secretName" }), { ["x-kubernetes-preserve-unknown-fields"] = true }),
  status = open("The observed state: conditions, notBefore, notAfter, renewalTime, revision."),
})

M.Issuer = obj("Issuer is a cert-manager issuer of certificates in its namespace: self-signed, a CA, ACME, Vault.", {
  spec = with(obj("The issuer.", {
    selfSigned = obj("A self-signed issuer.", { crlDistributionPoints = arr({ type = "string" }, "CRL URLs.") }),
    ca = with(obj("An issuer signing with a CA kept in a Secret.", { secretName = str("The CA's Secret.") },
      { "secretName" }), { ["x-kubernetes-preserve-unknown-fields"] = true }),
    acme = open("An ACME issuer."), vault = open("A Vault issuer."), venafi = open("A Venafi issuer."),
  }), { ["x-kubernetes-preserve-unknown-fields"] = true }),
  status = open("The observed state: conditions."),
})

return M
