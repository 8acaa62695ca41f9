"""Per-kind behaviour of the embedded API server that the real one implements in each
resource's strategy: selectable fields, pod defaulting and QoS, what create does with status."""

from __future__ import annotations

from typing import Any

from sim.apiserver.events import field_aliases
from sim.apiserver.registry import ResourceType

COMMON_FIELDS = ("metadata.name", "metadata.namespace")

# Field selectors each kind supports (Kubernetes' per-resource field label conversion funcs).
_SELECTABLE: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    ("", "Node"): ("spec.unschedulable",),
    ("", "Namespace"): ("status.phase",),
    ("", "Secret"): ("type",),
    ("", "Event"): (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    ("events.k8s.io", "Event"): (
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "type",
    ),
    ("batch", "Job"): ("status.successful",),
}


def selectable_fields(rtype: ResourceType) -> tuple[str, ...]:
    return COMMON_FIELDS + _SELECTABLE.get((rtype.group, rtype.kind), ())


def _dig(obj: dict[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def field_values(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, str]:
    """The object's selectable field values as strings (absent -> "")."""
    out = {}
    for path in selectable_fields(rtype):
        value = _dig(obj, path)
        if value is None:
            out[path] = ""
        elif isinstance(value, bool):
            out[path] = "true" if value else "false"
        else:
            out[path] = str(value)
    if rtype.kind == "Event" and rtype.group == "":
        if isinstance(obj.get("source"), dict):
            out["source"] = str(obj["source"].get("component") or "")
        field_aliases(out)  # the events.k8s.io/v1 API selects on the same stored objects
    return out


# ------------------------------------------------------------------------------ namespaces

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def label_namespace(namespace: dict[str, Any]) -> None:
    """Every namespace carries `kubernetes.io/metadata.name: <name>` (the namespace strategy
    sets it on create and update), so webhooks' namespaceSelectors can name namespaces."""
    meta = namespace["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), NAMESPACE_NAME_LABEL: meta["name"]}


# ------------------------------------------------------------------------------------ pods


def pod_qos_class(spec: dict[str, Any]) -> str:
    """Guaranteed / Burstable / BestEffort, as Kubernetes' GetPodQOS decides."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests_seen = limits_seen = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests = {
            k: v for k, v in (resources.get("requests") or {}).items() if k in ("cpu", "memory")
        }
        limits = {
            k: v for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")
        }
        requests_seen = requests_seen or bool(requests)
        limits_seen = limits_seen or bool(limits)
        if set(limits) != {"cpu", "memory"}:
            guaranteed = False
        for name, amount in requests.items():
            if str(limits.get(name)) != str(amount):
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300  # kube-apiserver's --default-*-toleration-seconds default


def default_pod(
    pod: dict[str, Any],
    priority_of: Any,
    *,
    not_ready_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
    unreachable_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
    preemption_policy_of: Any = None,
) -> None:
    """API-server defaulting and admission for a new pod, in place.

    `priority_of(name) -> int | None` resolves a PriorityClass (None: not found, which the
    Priority admission plugin rejects); `preemption_policy_of(name) -> str | None` its
    preemptionPolicy (or the global default class's). The toleration seconds are what the
    DefaultTolerationSeconds plugin adds for the not-ready and unreachable NoExecute taints
    (kube-apiserver's --default-not-ready-toleration-seconds and
    --default-unreachable-toleration-seconds)."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        if not isinstance(container, dict):
            continue
        resources = container.get("resources")
        if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
            # Requests default to limits (core/v1 defaulting), which schedulers rely on.
            requests = resources.setdefault("requests", {})
            for name, amount in resources["limits"].items():
                requests.setdefault(name, amount)
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("imagePullPolicy", "IfNotPresent")
    # DefaultTolerationSeconds admission plugin.
    tolerations = spec.setdefault("tolerations", [])
    present = {(t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, dict)}
    for key, seconds in (
        (NOT_READY_TAINT, not_ready_toleration_seconds),
        (UNREACHABLE_TAINT, unreachable_toleration_seconds),
    ):
        if (key, "NoExecute") not in present:
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": seconds,
                }
            )
    # Priority admission plugin: the class's value and preemption policy.
    name = spec.get("priorityClassName")
    if "priority" not in spec:
        value = priority_of(name) if name else priority_of(None)
        spec["priority"] = value if value is not None else 0
    if "preemptionPolicy" not in spec:
        policy = preemption_policy_of(name) if preemption_policy_of is not None else None
        spec["preemptionPolicy"] = policy or "PreemptLowerPriority"
    pod["status"] = {"phase": "Pending", "qosClass": pod_qos_class(spec)}
    if spec.get("schedulingGates"):
        # The pod strategy's applySchedulingGatedCondition: why the pod waits, before any
        # scheduler looks at it (`kubectl get pod` shows SchedulingGated).
        pod["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
                "lastProbeTime": None,
                "lastTransitionTime": None,
            }
        ]


def default_node(node: dict[str, Any]) -> None:
    """The TaintNodesByCondition admission plugin, in place: every new Node starts with the
    `node.kubernetes.io/not-ready:NoSchedule` taint, which the node lifecycle controller removes
    once the node reports Ready."""
    spec = node.get("spec")
    if not isinstance(spec, dict):
        spec = node["spec"] = {}
    taints = spec.get("taints")
    if not isinstance(taints, list):
        taints = spec["taints"] = []
    if not any(
        isinstance(t, dict) and t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoSchedule"
        for t in taints
    ):
        taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})


def validate_pod(pod: dict[str, Any]) -> list[dict[str, str]]:
    """The parts of pod validation that clients of the embedded cluster can trip over."""
    causes = []
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        causes.append(
            {
                "reason": "FieldValueRequired",
                "message": "Required value",
                "field": "spec.containers",
            }
        )
        return causes
    names: set[str] = set()
    for index, container in enumerate(containers):
        if not isinstance(container, dict) or not container.get("name"):
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                    "field": f"spec.containers[{index}].name",
                }
            )
            continue
        if container["name"] in names:
            causes.append(
                {
                    "reason": "FieldValueDuplicate",
                    "message": f'Duplicate value: "{container["name"]}"',
                    "field": f"spec.containers[{index}].name",
                }
            )
        names.add(container["name"])
        if not container.get("image"):
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                    "field": f"spec.containers[{index}].image",
                }
            )
    return causes


def pod_is_terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
