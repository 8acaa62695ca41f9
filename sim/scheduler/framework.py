"""The stand-in's view of nodes and pods, and kube-scheduler's in-tree filters and scoring.

Pure functions and small records; no I/O. Filters run in kube-scheduler's default order
(NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit; the filters that
look at other nodes' pods, PodTopologySpread and InterPodAffinity, follow in
`sim.scheduler.placement`) and a node's first failing
filter gives its reasons, with kube-scheduler's wording, so `FailedScheduling` messages read as on
a real cluster. NotReady nodes are kept out the way kube-scheduler does it: through the
`node.kubernetes.io/not-ready` / `unreachable` taints the node lifecycle controller sets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from core.resources import CPU, MEMORY, PODS, ResourceVector, pod_nonzero_requests, pod_requests
from sim.scheduler.pod_terms import (
    HostPort,
    host_ports,
    pod_affinity,
    pod_claims,
    ports_conflict,
    spread_constraints,
)
from sim.taints import untolerated

# Status codes (framework.Code).
UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
MAX_NODE_SCORE = 100
FREE_PORTS = "node(s) didn't have free ports for the requested pod ports"
MAX_EXTENDER_PRIORITY = 10
_NO_LABELS: Mapping[str, str] = {}


class SchedNode:
    """A node as the scheduler cache holds it: spec facts plus what its pods (bound and
    assumed) request."""

    __slots__ = (
        "alloc",
        "allocatable",
        "labels",
        "name",
        "nonzero_requested",
        "nz_cpu",
        "nz_memory",
        "on_change",
        "open",
        "pod_keys",
        "ports",
        "raw",
        "requested",
        "taints",
        "unschedulable",
        "used",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        self.name: str = obj["metadata"]["name"]
        self.requested = ResourceVector()
        self.nonzero_requested = ResourceVector()
        # Plain ints and dicts of the same numbers for the filter and score loops, which run
        # for hundreds of nodes per pod (a method call per resource and node was a quarter of
        # the stand-in's time).
        self.used: dict[str, int] = {}
        self.nz_cpu = 0
        self.nz_memory = 0
        self.pod_keys: set[str] = set()
        # Host ports taken by its pods, counted (NodePorts), as kube-scheduler's NodeInfo.
        self.ports: dict[HostPort, int] = {}
        # Told the node's name whenever what the filters read changes (the scheduler's
        # vector columns); None for a copy such as preemption's dry run.
        self.on_change: Callable[[str], None] | None = None
        self.update(obj)

    def update(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        self.raw = obj  # sent to extenders that are not nodeCacheCapable
        self.labels: Mapping[str, str] = meta.get("labels") or _NO_LABELS
        self.taints: list[dict[str, Any]] = list(spec.get("taints") or ())
        self.unschedulable = bool(spec.get("unschedulable"))
        # Neither NodeUnschedulable nor TaintToleration can fail on this node, for any pod.
        self.open = not self.unschedulable and not self.taints
        try:
            self.allocatable = ResourceVector.from_resource_list(
                status.get("allocatable") or status.get("capacity") or {}
            )
        except ValueError:
            self.allocatable = ResourceVector()
        self.alloc: dict[str, int] = self.allocatable.as_dict()
        if self.on_change is not None:
            self.on_change(self.name)

    def add(self, pod: SchedPod) -> None:
        self.pod_keys.add(pod.key)
        if pod.host_ports:
            # Replaced, never mutated: preemption's dry-run copies share the dict.
            ports = self.ports = dict(self.ports)
            for port in pod.host_ports:
                ports[port] = ports.get(port, 0) + 1
        self._set(self.requested + pod.requests, self.nonzero_requested + pod.nonzero)

    def remove(self, pod: SchedPod) -> None:
        if pod.key in self.pod_keys:
            self.pod_keys.discard(pod.key)
            if pod.host_ports:
                ports = self.ports = dict(self.ports)
                for port in pod.host_ports:
                    left = ports.get(port, 0) - 1
                    if left > 0:
                        ports[port] = left
                    else:
                        ports.pop(port, None)
            self._set(
                self.requested.saturating_sub(pod.requests),
                self.nonzero_requested.saturating_sub(pod.nonzero),
            )

    def _set(self, requested: ResourceVector, nonzero: ResourceVector) -> None:
        self.requested = requested
        self.nonzero_requested = nonzero
        self.used = requested.as_dict()
        self.nz_cpu = nonzero.get(CPU)
        self.nz_memory = nonzero.get(MEMORY)
        if self.on_change is not None:
            self.on_change(self.name)


class SchedPod:
    """A pod as the stand-in reads it. `raw` is kept for pending pods only (it is what
    extenders receive, as kube-scheduler sends the pod its informer holds)."""

    __slots__ = (
        "claims",
        "created",
        "deleting",
        "fit_items",
        "gated",
        "host_ports",
        "key",
        "labels",
        "limits_names",
        "name",
        "namespace",
        "node",
        "node_affinity",
        "node_selector",
        "nominated_node",
        "nonzero",
        "nz_cpu",
        "nz_memory",
        "phase",
        "placeable_anywhere",
        "pod_affinity",
        "preemption_policy",
        "priority",
        "raw",
        "requests",
        "rv",
        "scheduler_name",
        "signature",
        "spread",
        "tolerations",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.created: str = meta.get("creationTimestamp", "")
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.node: str | None = spec.get("nodeName") or None
        self.nominated_node: str | None = status.get("nominatedNodeName") or None
        self.phase: str = status.get("phase") or "Pending"
        self.priority = int(spec.get("priority") or 0)
        self.preemption_policy: str = spec.get("preemptionPolicy") or "PreemptLowerPriority"
        self.scheduler_name: str = spec.get("schedulerName") or "default-scheduler"
        self.gated = bool(spec.get("schedulingGates"))
        self.requests = pod_requests(spec)
        self.nonzero = pod_nonzero_requests(spec)
        # What NodeResourcesFit compares, as plain pairs: every requested resource but the pod
        # slot (checked on its own), zero requests skipped as kube-scheduler skips them.
        self.fit_items = tuple((n, a) for n, a in self.requests.items() if n != PODS and a > 0)
        self.nz_cpu = self.nonzero.get(CPU)
        self.nz_memory = self.nonzero.get(MEMORY)
        self.node_selector: Mapping[str, str] = spec.get("nodeSelector") or _NO_LABELS
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        self.node_affinity: list[dict[str, Any]] | None = (
            list(affinity.get("nodeSelectorTerms") or ()) if affinity is not None else None
        )
        self.tolerations: list[dict[str, Any]] = list(spec.get("tolerations") or ())
        self.labels: Mapping[str, str] = meta.get("labels") or _NO_LABELS
        self.host_ports = host_ports(spec)
        self.pod_affinity = pod_affinity(spec, self.namespace)
        self.spread = spread_constraints(spec, self.labels)
        self.claims = pod_claims(spec, self.name)
        # NodeAffinity, NodePorts and the inter-pod plugins cannot fail for this pod: on an
        # `open` node only NodeResourcesFit can (unless other pods' anti-affinity rules it out,
        # which the cycle checks).
        self.placeable_anywhere = (
            not self.node_selector
            and self.node_affinity is None
            and not self.host_ports
            and self.pod_affinity is None
            and not self.spread
            and not self.claims
        )
        self.limits_names = frozenset(_resource_names(spec))
        # What an update must change to count as one for scheduling (kube-scheduler ignores
        # updates of status, resourceVersion and managedFields, e.g. its own condition writes).
        self.signature = hash(
            orjson.dumps(
                [spec, meta.get("labels"), meta.get("annotations")], option=orjson.OPT_SORT_KEYS
            )
        )
        # Strip what kube-scheduler's informer transform strips before the pod reaches extenders.
        meta.pop("managedFields", None)
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        self.raw: dict[str, Any] | None = obj if self.node is None else None

    @property
    def assigned(self) -> bool:
        return self.node is not None

    def reference(self) -> dict[str, str]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }


def _resource_names(spec: Mapping[str, Any]) -> Iterable[str]:
    for group in ("containers", "initContainers"):
        for container in spec.get(group) or ():
            resources = container.get("resources") or {}
            yield from resources.get("requests") or ()
            yield from resources.get("limits") or ()


# --------------------------------------------------------------------------- filters


def _match_expression(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = expr.get("values") or ()
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term_matches(term: Mapping[str, Any], node: SchedNode) -> bool:
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False  # an empty term matches no objects
    for expr in expressions:
        if not _match_expression(expr, node.labels.get(expr.get("key", ""))):
            return False
    for expr in fields:
        value = node.name if expr.get("key") == "metadata.name" else None
        if not _match_expression(expr, value):
            return False
    return True


def node_affinity_matches(pod: SchedPod, node: SchedNode) -> bool:
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    if pod.node_affinity is not None:
        return any(_term_matches(term, node) for term in pod.node_affinity)
    return True


def insufficient(
    pod: SchedPod, node: SchedNode, ignored: frozenset[str] = frozenset()
) -> list[str]:
    """NodeResourcesFit's reasons (`Too many pods`, `Insufficient cpu`, ...); empty if it fits."""
    reasons: list[str] = []
    alloc, used = node.alloc, node.used
    if used.get(PODS, 0) + 1 > alloc.get(PODS, 0):
        reasons.append("Too many pods")
    for name, amount in pod.fit_items:
        if used.get(name, 0) + amount > alloc.get(name, 0) and name not in ignored:
            reasons.append(f"Insufficient {name}")
    return reasons


def fits(pod: SchedPod, node: SchedNode, ignored: frozenset[str] = frozenset()) -> bool:
    """NodeResourcesFit alone, without building reasons: the common case of the filter loop
    (`insufficient` says why when this is False)."""
    alloc, used = node.alloc, node.used
    if used.get(PODS, 0) + 1 > alloc.get(PODS, 0):
        return False
    for name, amount in pod.fit_items:
        if used.get(name, 0) + amount > alloc.get(name, 0) and name not in ignored:
            return False
    return True


def run_filters(
    pod: SchedPod, node: SchedNode, ignored: frozenset[str] = frozenset()
) -> tuple[str, list[str]] | None:
    """None if the node passes every in-tree filter, else (code, reasons) of the first failing
    one, in the default profile's plugin order."""
    if node.unschedulable and not _tolerates_unschedulable(pod):
        return UNRESOLVABLE, ["node(s) were unschedulable"]
    taint = untolerated(pod.tolerations, node.taints, ("NoSchedule", "NoExecute"))
    if taint is not None:
        return UNRESOLVABLE, [
            f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"
        ]
    if not node_affinity_matches(pod, node):
        return UNRESOLVABLE, ["node(s) didn't match Pod's node affinity/selector"]
    if pod.host_ports and ports_conflict(pod.host_ports, node.ports):
        return UNSCHEDULABLE, [FREE_PORTS]
    reasons = insufficient(pod, node, ignored)
    if reasons:
        return UNSCHEDULABLE, reasons
    return None


def _tolerates_unschedulable(pod: SchedPod) -> bool:
    taint = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    return untolerated(pod.tolerations, [taint], ("NoSchedule",)) is None


# --------------------------------------------------------------------------- sampling


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind (minFeasibleNodesToFind 100, adaptive default
    50 - n/125 floored at 5 %)."""
    if num_all_nodes < 100:
        return num_all_nodes
    if percentage <= 0:
        percentage = max(5, 50 - num_all_nodes // 125)
    if percentage >= 100:
        return num_all_nodes
    found = num_all_nodes * percentage // 100
    return max(found, 100)


# --------------------------------------------------------------------------- scoring


def least_allocated(pod: SchedPod, node: SchedNode) -> int:
    """NodeResourcesFit LeastAllocated over cpu and memory (weight 1 each), 0..100, using the
    non-zero requests kube-scheduler's scorers use."""
    total = 0
    alloc = node.alloc
    for capacity, requested in (
        (alloc.get(CPU, 0), node.nz_cpu + pod.nz_cpu),
        (alloc.get(MEMORY, 0), node.nz_memory + pod.nz_memory),
    ):
        if capacity == 0 or requested > capacity:
            continue
        total += (capacity - requested) * MAX_NODE_SCORE // capacity
    return total // 2


# --------------------------------------------------------------------------- messages


def fit_error_message(
    num_all_nodes: int,
    statuses: Mapping[str, tuple[str, Sequence[str]]],
    post_filter: str = "",
    pre_filter: str = "",
) -> str:
    """FitError.Error(): `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were
    unschedulable. preemption: ...` (reasons counted, then sorted as strings, like Go)."""
    # A plain dict: Counter.update per status was most of the cost with hundreds of nodes.
    counts: dict[str, int] = {}
    for _, reasons in statuses.values():
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
    message = f"0/{num_all_nodes} nodes are available:"
    histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
    if pre_filter:
        # A PreFilter's rejection stands for every node: its reason alone, no histogram.
        message += f" {pre_filter}."
    elif histogram:
        message += f" {', '.join(histogram)}."
    if post_filter:
        message += f" {post_filter}."
    return message
