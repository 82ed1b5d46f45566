"""The kubectl rows of probe.py: what a user types to look at the EKS cluster
HyperPod's nodes joined (get, describe, explain, discovery, logs, auth,
raw reads, watches), and the answers Kubernetes gives for what is not
there (the error text kubectl prints)."""
import json
import shlex
import subprocess


def rows(i, kubeconfig, cache_root):
    base = ["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", cache_root + "/probe-kube-cache"]

    def row(command, has=(), code=None, gap=None, err_has=()):
        return {"label": "kubectl " + command, "argv": base + shlex.split(command), "has": has, "code": code,
                "gap": gap, "err_has": err_has}

    def names(kind, ns=None):
        argv = base + ["get", kind, "-o", "json"] + (["-n", ns] if ns else ["-A"])
        items = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)["items"]
        return [(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in items]

    node = names("nodes", "default")[0][1]
    pods = names("pods")
    op_ns, op_pod = next(p for p in pods if p[0] == "aws-hyperpod")
    ds_ns, ds_pod = next(p for p in pods if p[0] == "kube-system")
    _, deploy = next(d for d in names("deployments") if d[0] == "aws-hyperpod")
    job_crd = "hyperpodpytorchjobs.sagemaker.amazonaws.com"
    r = [
        # the client and the server
        row("version", has=["Server Version: v1."]),
        row("version -o json", has=['"serverVersion"', '"gitVersion"']),
        row("cluster-info", has=["Kubernetes control plane is running at https://"]),
        row("api-versions", has=["v1", "apps/v1", "storage.k8s.io/v1", "coordination.k8s.io/v1",
                                 "sagemaker.amazonaws.com/v1"]),
        row("api-resources", has=["pods", "deployments", "hyperpodpytorchjobs"]),
        row("api-resources --namespaced=false", has=["nodes", "storageclasses", "customresourcedefinitions"]),
        row("api-resources --api-group=apps -o name", has=["deployments.apps", "daemonsets.apps"]),
        row("api-resources --api-group=storage.k8s.io", has=["csidrivers", "csinodes", "storageclasses"]),
        row("api-resources --verbs=list -o wide", has=["VERBS"]),
        row("config current-context", has=["arn:aws:eks:"]),
        row("config view --minify", has=["server: https://"]),
        # nodes
        row("get nodes", has=[node, "Ready"]),
        row("get nodes -o wide", has=["INTERNAL-IP", node]),
        row("get nodes --show-labels", has=["sagemaker.amazonaws.com/"]),
        row("get nodes -L node.kubernetes.io/instance-type", has=["ml.g5.12xlarge"]),
        row("get node %s -o yaml" % node, has=["kind: Node", "nvidia.com/gpu"]),
        row("get node %s -o json" % node, has=['"kind": "Node"', '"allocatable"']),
        row("get nodes -o name", has=["node/" + node]),
        row("get nodes -o jsonpath={.items[*].metadata.name}", has=[node]),
        row("get nodes -o jsonpath={.items[0].status.nodeInfo.kubeletVersion}", has=["v1."]),
        row("get nodes -o 'custom-columns=NAME:.metadata.name,TYPE:.metadata.labels.node\\.kubernetes\\.io/"
            "instance-type'", has=["NAME", "TYPE", "ml.g5.12xlarge"]),
        row("get nodes --selector node.kubernetes.io/instance-type=ml.g5.12xlarge", has=[node]),
        row("get nodes --sort-by=.metadata.name", has=[node]),
        row("describe node " + node, has=["Name:", "Capacity:", "Allocatable:", "Conditions:"]),
        row("describe nodes", has=[node]),
        row("get node nope", code='Error from server (NotFound): nodes "nope" not found'),
        row("describe node nope", code='nodes "nope" not found'),
        row("top nodes", code="error: Metrics API not available"),
        # pods
        row("get pods -A", has=[op_pod, ds_pod]),
        row("get pods -A -o wide", has=["NODE", "IP"]),
        row("get pods -n %s" % op_ns, has=[op_pod, "Running"]),
        row("get pods -n %s -o json" % op_ns, has=['"kind": "List"', op_pod]),
        row("get pods -n %s -o yaml" % op_ns, has=["kind: List", op_pod]),
        row("get pod -n %s %s -o jsonpath={.status.phase}" % (op_ns, op_pod), has=["Running"]),
        row("get pods -A -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,NODE:.spec.nodeName",
            has=[op_pod]),
        row("get pods -A --field-selector spec.nodeName=" + node, has=["NAMESPACE"]),
        row("get pods -A --field-selector status.phase=Running", has=[op_pod]),
        row("get pods -n kube-system -l app.kubernetes.io/name=eks-pod-identity-agent", has=[ds_pod]),
        row("get pods -A --show-labels", has=["LABELS"]),
        row("get pods -A --sort-by=.metadata.creationTimestamp", has=[op_pod]),
        row("describe pod -n %s %s" % (op_ns, op_pod), has=["Containers:", "Events:", "Node:"]),
        row("describe pods -n " + ds_ns, has=[ds_pod]),
        row("logs -n %s %s" % (op_ns, op_pod)),
        row("logs -n %s %s --tail=5 --timestamps" % (op_ns, op_pod)),
        row("logs -n %s deployment/%s" % (op_ns, deploy)),
        row("logs -n %s %s --since=1h" % (ds_ns, ds_pod)),
        row("get pod nope", code='Error from server (NotFound): pods "nope" not found'),
        row("logs nope", code='pods "nope" not found'),
        row("get pods -n no-such-ns", err_has=["No resources found in no-such-ns namespace."]),
        # workloads
        row("get deployments -A", has=[deploy, "READY"]),
        row("get deploy -n %s %s -o yaml" % (op_ns, deploy), has=["kind: Deployment", "replicas:"]),
        row("get deploy -A -o wide", has=["CONTAINERS", "IMAGES", "SELECTOR"]),
        row("describe deployment -n %s %s" % (op_ns, deploy), has=["Replicas:", "StrategyType:"]),
        row("rollout status -n %s deployment/%s --timeout=10s" % (op_ns, deploy), has=["successfully rolled out"]),
        row("rollout history -n %s deployment/%s" % (op_ns, deploy), has=["REVISION"]),
        row("get replicasets -A", has=["DESIRED"]),
        row("get daemonsets -A", has=["eks-pod-identity-agent"]),
        row("get ds -n kube-system eks-pod-identity-agent -o json", has=['"kind": "DaemonSet"',
                                                                         '"numberReady"']),
        row("describe daemonset -n kube-system eks-pod-identity-agent", has=["Desired Number of Nodes Scheduled"]),
        row("rollout status -n kube-system daemonset/eks-pod-identity-agent --timeout=10s",
            has=["successfully rolled out"]),
        row("get statefulsets -A"),
        row("get jobs -A"),
        row("get cronjobs -A"),
        row("get deploy nope", code='Error from server (NotFound): deployments.apps "nope" not found'),
        # services, accounts, config
        row("get services -A", has=["kubernetes", "10.100.0.1"]),
        row("get svc kubernetes -o yaml", has=["kind: Service", "port: 443"]),
        row("describe svc kubernetes", has=["Endpoints:", "TargetPort:"]),
        # the API server's own Service: the control plane's interfaces, port 443
        row("get endpoints kubernetes", has=["kubernetes", ":443"]),
        row("get endpointslices -A", has=["ADDRESSTYPE", "kubernetes", "443"]),
        row("get namespaces", has=["kube-system", "kube-node-lease", "aws-hyperpod"]),
        row("describe namespace aws-hyperpod", has=["Status:", "Active"]),
        row("get serviceaccounts -A", has=["default"]),
        row("get configmaps -A", has=["kube-root-ca.crt"]),
        row("get secrets -A"),
        row("get ns nope", code='Error from server (NotFound): namespaces "nope" not found'),
        row("get svc nope", code='Error from server (NotFound): services "nope" not found'),
        # storage
        row("get storageclasses", has=["gp2", "kubernetes.io/aws-ebs"]),
        row("get sc gp2 -o yaml", has=["kind: StorageClass", "provisioner: kubernetes.io/aws-ebs"]),
        row("describe sc gp2", has=["Provisioner:", "kubernetes.io/aws-ebs"]),
        row("get csidrivers"),
        row("get csinodes", has=[node]),
        row("get csinode %s -o yaml" % node, has=["kind: CSINode"]),
        row("get pv"),
        row("get pvc -A"),
        row("get volumeattachments"),
        # leases, events
        row("get leases -n kube-node-lease", has=[node]),
        row("get lease -n kube-node-lease %s -o yaml" % node, has=["kind: Lease", "renewTime:"]),
        row("get leases -A", has=["kube-node-lease"]),
        row("get events -A", has=["LAST SEEN"]),
        row("get events -A --sort-by=.lastTimestamp", has=["REASON"]),
        row("get events -n %s --field-selector involvedObject.name=%s" % (op_ns, op_pod), has=[op_pod]),
        row("events -A", has=["LAST SEEN"]),
        # custom resources: HyperPod's
        row("get crds", has=[job_crd]),
        row("get crd %s -o yaml" % job_crd, has=["kind: CustomResourceDefinition", "group: sagemaker.amazonaws.com"]),
        row("describe crd " + job_crd, has=["HyperPodPyTorchJob"]),
        row("get hyperpodpytorchjobs -A"),
        row("get crd nope.example.com",
            code='Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io '
                 '"nope.example.com" not found'),
        row("get nope", code='error: the server doesn\'t have a resource type "nope"'),
        # explain
        row("explain pods", has=["KIND:", "Pod", "FIELDS:"]),
        row("explain pod.spec.containers", has=["FIELD:", "containers"]),
        row("explain deployment.spec.strategy", has=["strategy"]),
        row("explain nodes.status.allocatable", has=["allocatable"]),
        row("explain storageclass", has=["StorageClass"]),
        row("explain lease.spec", has=["renewTime"]),
        row("explain " + job_crd.split(".")[0], has=["HyperPodPyTorchJob"]),
        row("explain pods.spec.nope", code='field "nope" does not exist'),
        # rbac, auth
        row("auth can-i get pods", has=["yes"]),
        row("auth can-i '*' '*' --all-namespaces", has=["yes"]),
        row("auth can-i list nodes", has=["yes"]),
        row("auth whoami", has=["Username"]),
        row("get clusterroles", has=["cluster-admin", "system:discovery", "view"]),
        row("describe clusterrole view", has=["pods/log", "deployments.apps"]),
        row("get clusterrolebindings", has=["cluster-admin", "system:basic-user"]),
        row("get clusterrolebinding cluster-admin -o jsonpath={.subjects[0].name}", has=["system:masters"]),
        row("get roles -A"),
        row("get priorityclasses", has=["system-node-critical"]),
        # raw API reads
        row("get --raw /version", has=['"gitVersion"']),
        row("get --raw /healthz", has=["ok"]),
        row("get --raw /readyz", has=["ok"]),
        row("get --raw /livez", has=["ok"]),
        row("get --raw /api/v1/nodes", has=['"NodeList"', node]),
        row("get --raw /apis/apps/v1/namespaces/%s/deployments" % op_ns, has=['"DeploymentList"', deploy]),
        row("get --raw /apis", has=['"APIGroupList"']),
        row("get --raw /api/v1/nodes/nope", code="NotFound"),
        # watches, cut by a timeout
        row("get pods -A --watch --request-timeout=2s", has=[op_pod]),
        row("get nodes -w --request-timeout=2s", has=[node]),
    ]
    return r
