"""Annotation and label keys, spelled exactly as Volcano spells them.

Volcano has two prefixes that are easy to confuse: `scheduling.k8s.io/group-name` is the *only*
key that attaches a pod to a PodGroup; `scheduling.volcano.sh/group-name` is not a grouping key.
Keys for behaviour Volcano does not have live under `vulcan.sh/`.
"""

from typing import Final

# --- 2.1 gang / group wiring -----------------------------------------------------------------
GROUP_NAME: Final = "scheduling.k8s.io/group-name"
"""Pod annotation: PodGroup membership (`<pod namespace>/<value>`)."""
VOLCANO_GROUP_NAME: Final = "scheduling.volcano.sh/group-name"
"""Read only by Volcano's vgpu helper; NOT a grouping key."""
GROUP_MIN_MEMBER: Final = "scheduling.volcano.sh/group-min-member"
GROUP_MIN_RESOURCES: Final = "scheduling.volcano.sh/group-min-resources"
QUEUE_NAME: Final = "scheduling.volcano.sh/queue-name"
"""Pod or Namespace annotation selecting the queue for non-vcjob workloads."""
VOLCANO_QUEUE_NAME: Final = "volcano.sh/queue-name"
"""Informational pod annotation/label written by the Job controller."""
JOB_NAME: Final = "volcano.sh/job-name"
JOB_NAMESPACE: Final = "volcano.sh/job-namespace"
TASK_SPEC: Final = "volcano.sh/task-spec"
TASK_INDEX: Final = "volcano.sh/task-index"
JOB_VERSION: Final = "volcano.sh/job-version"
JOB_RETRY_COUNT: Final = "volcano.sh/job-retry-count"
TEMPLATE_UID: Final = "volcano.sh/template-uid"
PARTITION_ID: Final = "volcano.sh/partition-id"
JOB_TYPE: Final = "volcano.sh/job-type"
JOB_FORWARDING: Final = "volcano.sh/job-forwarding"
CONTROLLER_OUT_OF_SYNC: Final = "volcano.sh/controller-out-of-sync"
CREATED_BY_JOB_FLOW: Final = "volcano.sh/createdByJobFlow"
CREATED_BY_JOB_TEMPLATE: Final = "volcano.sh/createdByJobTemplate"
CRONJOB_SCHEDULED_TIMESTAMP: Final = "volcano.sh/cronjob-scheduled-timestamp"

# The coscheduling (scheduler-plugins) label, understood as a synonym of GROUP_NAME.
COSCHEDULING_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"

# --- 2.2 scheduling behaviour knobs ----------------------------------------------------------
PREEMPTABLE: Final = "volcano.sh/preemptable"
REVOCABLE_ZONE: Final = "volcano.sh/revocable-zone"
COOLDOWN_TIME: Final = "volcano.sh/cooldown-time"
JDB_MIN_AVAILABLE: Final = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE: Final = "volcano.sh/jdb-max-unavailable"
SLA_WAITING_TIME: Final = "volcano.sh/sla-waiting-time"
SLA_WAITING_TIME_LEGACY: Final = "sla-waiting-time"
TASK_PRIORITY: Final = "volcano.sh/task-priority"
NUMA_TOPOLOGY_POLICY: Final = "volcano.sh/numa-topology-policy"
TASK_TOPOLOGY_AFFINITY: Final = "volcano.sh/task-topology-affinity"
TASK_TOPOLOGY_ANTI_AFFINITY: Final = "volcano.sh/task-topology-anti-affinity"
TASK_TOPOLOGY_TASK_ORDER: Final = "volcano.sh/task-topology-task-order"
NETWORK_TOPOLOGY_MODE: Final = "volcano.sh/network-topology-mode"
NETWORK_TOPOLOGY_HIGHEST_TIER: Final = "volcano.sh/network-topology-highest-tier"
JOB_ALLOCATED_HYPERNODE: Final = "volcano.sh/job-allocated-hypernode"
HIERARCHY: Final = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS: Final = "volcano.sh/hierarchy-weights"
CLOSED_BY_PARENT: Final = "volcano.sh/closed-by-parent"
QUEUE_ALLOCATION_GATE: Final = "scheduling.volcano.sh/queue-allocation-gate"
"""Pod annotation (value "true") and the name of the scheduling gate it adds."""
NODEGROUP_NAME: Final = "volcano.sh/nodegroup-name"
NODEGROUP_RESOURCE_LIMITS: Final = "volcano.sh/nodegroup-resource-limits"
QOS_LEVEL: Final = "volcano.sh/qos-level"
RESOURCE_GROUP: Final = "volcano.sh/resource-group"

# --- CRD metadata ----------------------------------------------------------------------------
HELM_RESOURCE_POLICY: Final = "helm.sh/resource-policy"

# --- vulcan's own keys -----------------------------------------------------------------------
VULCAN_PREFIX: Final = "vulcan.sh/"
GROUPED: Final = "vulcan.sh/grouped"
"""Pod label (value "true") the pod webhook adds to a member it gates: the pod named its PodGroup
when it was created, so the PodGroup controller (which groups pods that name none) need not
watch it."""
SIM_DURATION: Final = "vulcan.sh/sim-duration"
"""Pod annotation read by the embedded cluster's hollow kubelet: how long the pod runs."""
SIM_EXIT_CODE: Final = "vulcan.sh/sim-exit-code"
"""Pod annotation read by the hollow kubelet: the exit code the pod finishes with."""
SIM_TERMINATION = "vulcan.sh/sim-termination-duration"
SIM_POD_IP: Final = "vulcan.sh/sim-pod-ip"
"""Pod annotation read by the hollow kubelet: how long the containers take to stop after
SIGTERM when the pod is deleted (capped by its grace period; `forever`: they ignore SIGTERM and
are killed when the grace period ends)."""

# Volcano's defaults that several parts share.
DEFAULT_QUEUE: Final = "default"
ROOT_QUEUE: Final = "root"
DEFAULT_SCHEDULER_NAME: Final = "volcano"
# Kubernetes' schedulerName of a pod that names none.
KUBE_DEFAULT_SCHEDULER: Final = "default-scheduler"
# A gang's own bind-barrier timeout (Go duration), overriding the extender's --gang-timeout.
GANG_TIMEOUT: Final = "vulcan.sh/gang-timeout"

# Routing markers for the cluster-scheduler install (manifests/overlays/cluster-scheduler): the
# cluster's own kube-scheduler calls vulcan's extender entries only for pods that request their
# `managedResources` (one name per entry: kube-scheduler refuses a name listed twice), with
# `ignoredByScheduler` so no node needs to have them, and the kubelet drops requests of
# extended resources its node does not advertise. Extended resources in vulcan's domain are
# therefore markers, never capacity: vulcan leaves them out of every request it sums.
MARKER_RESOURCE_GROUP: Final = "vulcan.sh"
SCHEDULING_MARKER: Final = "vulcan.sh/managed"  # the filter/prioritize/preempt entry
BINDING_MARKER: Final = "vulcan.sh/managed-bind"  # the bind entry
MARKERS: Final = (SCHEDULING_MARKER, BINDING_MARKER)
