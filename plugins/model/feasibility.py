"""Can this node take this pod? kube-scheduler's default filter plugins, as pure predicates over
the slim records (`core.records.constraints` holds what a pod asks for).

The one model the gang planner (`plugins.model.placement`, through `plugins.model.gang_fit`),
reclaim / preempt victim selection and `vulcan explain` use, so vulcan never reserves a node that
kube-scheduler's own filters refuse. Plugins, in kube-scheduler's order, with their reasons in
its words (pkg/scheduler/framework/plugins/...):

- NodeUnschedulable: a cordoned node, unless the pod tolerates
  `node.kubernetes.io/unschedulable:NoSchedule`.                 "node(s) were unschedulable"
- NodeName: spec.nodeName (a pending pod has none: always passes).
- TaintToleration: every NoSchedule / NoExecute taint must be tolerated (PreferNoSchedule only
  scores). A toleration with an effect matches only that effect, with a key only that key;
  operator Exists matches any value, Equal (or "") the same value; an empty key with Exists
  tolerates everything.                     "node(s) had untolerated taint {<key>: <value>}"
- NodeAffinity: nodeSelector (every label equal) and required nodeSelectorTerms (ORed; each
  term's matchExpressions In/NotIn/Exists/DoesNotExist/Gt/Lt and matchFields metadata.name
  ANDed).                                  "node(s) didn't match Pod's node affinity/selector"
- NodePorts: host port + protocol + host IP against the ports of the pods on the node
  (0.0.0.0 conflicts with every IP).   "node(s) didn't have free ports for the requested pod ports"
- NodeResourcesFit: "Insufficient <resource>" / "Too many pods" (the planner's vectors).
- PodTopologySpread, InterPodAffinity: need the pods around the node: `plugins.model.gang_fit`.
- Not Ready nodes are left out too ("node(s) were not ready"): a real cluster taints them
  (`node.kubernetes.io/not-ready`), and the embedded one does not.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from core.records import NodeRecord
from core.records.constraints import (
    AffinityTerm,
    HostPort,
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PlacementConstraints,
    Toleration,
)

__all__ = [
    "AFFINITY_RULES",
    "ANTI_AFFINITY_RULES",
    "EXISTING_ANTI_AFFINITY",
    "NODE_AFFINITY",
    "NOT_READY",
    "PORTS",
    "SPREAD",
    "SPREAD_MISSING_LABEL",
    "UNSCHEDULABLE",
    "fit_error",
    "node_affinity_matches",
    "ports_conflict",
    "selector_matches",
    "static_reason",
    "term_matches",
    "tolerates",
    "untolerated_taint",
]

UNSCHEDULABLE = "node(s) were unschedulable"
NOT_READY = "node(s) were not ready"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
PORTS = "node(s) didn't have free ports for the requested pod ports"
AFFINITY_RULES = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_RULES = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING_LABEL = SPREAD + " (missing required label)"

UNSCHEDULABLE_TAINT = ("node.kubernetes.io/unschedulable", "", "NoSchedule")
_ANY_IP = "0.0.0.0"

Taint = tuple[str, str, str]  # key, value, effect (NodeRecord.taints)


# ------------------------------------------------------------------------------ taints


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    key, value, effect = taint
    if toleration.effect and toleration.effect != effect:
        return False
    if toleration.key and toleration.key != key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("", "Equal"):
        return toleration.value == value
    return False


def untolerated_taint(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first of `taints` no toleration tolerates (the caller passes the blocking ones)."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint[0]}: {taint[1]}}}"


# ---------------------------------------------------------------------- label matching


def _requirement_matches(req: NodeSelectorRequirement, value: str | None) -> bool:
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False  # unknown operators match nothing


def _term_matches(term: NodeSelectorTerm, node: NodeRecord) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term selects no node
    labels = node.labels
    for req in term.match_expressions:
        if not _requirement_matches(req, labels.get(req.key)):
            return False
    for req in term.match_fields:
        if req.key != "metadata.name" or not _requirement_matches(req, node.name):
            return False
    return True


def node_affinity_matches(constraints: PlacementConstraints, node: NodeRecord) -> bool:
    """NodeAffinity's filter: nodeSelector and the required nodeSelectorTerms (any term)."""
    labels = node.labels
    for key, value in constraints.node_selector:
        if labels.get(key) != value:
            return False
    terms = constraints.node_affinity
    if terms is None:
        return True
    return any(_term_matches(term, node) for term in terms)


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: None matches nothing, {} matches everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels:
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        if req.operator in ("Gt", "Lt"):
            return False  # not label-selector operators
        if not _requirement_matches(req, labels.get(req.key)):
            return False
    return True


def term_matches(term: AffinityTerm, namespace: str, labels: Mapping[str, str]) -> bool:
    """An affinity term selects a pod (its namespace, then its labels)."""
    if not term.all_namespaces and namespace not in term.namespaces:
        return False
    return selector_matches(term.selector, labels)


# ---------------------------------------------------------------------------- host ports


def ports_conflict(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> bool:
    """NodePorts: a wanted port is taken when the same protocol and port is in use on the same
    IP, or either side binds every IP (0.0.0.0)."""
    used = tuple(used)
    if not used:
        return False
    for port in wanted:
        for other in used:
            if port.port != other.port or port.protocol != other.protocol:
                continue
            if port.ip == _ANY_IP or other.ip == _ANY_IP or port.ip == other.ip:
                return True
    return False


def ports_self_conflict(ports: Iterable[HostPort]) -> bool:
    """Two of one pod's own ports collide (the pod fits no node)."""
    seen: list[HostPort] = []
    for port in ports:
        if ports_conflict((port,), seen):
            return True
        seen.append(port)
    return False


# ------------------------------------------------------------------------ static filters


def static_reason(node: NodeRecord, constraints: PlacementConstraints | None) -> str | None:
    """Why `node` cannot take a pod with `constraints` whatever runs there (None: it can, as
    far as the node itself decides): readiness, NodeUnschedulable, TaintToleration and
    NodeAffinity, in kube-scheduler's order."""
    if not node.ready:
        return NOT_READY
    tolerations = constraints.tolerations if constraints is not None else ()
    if node.unschedulable and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in tolerations):
        return UNSCHEDULABLE
    if node.blocking_taints:
        taint = untolerated_taint(node.blocking_taints, tolerations)
        if taint is not None:
            return taint_reason(taint)
    if constraints is not None and not node_affinity_matches(constraints, node):
        return NODE_AFFINITY
    return None


def insufficient(name: str) -> str:
    """NodeResourcesFit's reason for one resource."""
    return "Too many pods" if name == "pods" else f"Insufficient {name}"


def fit_error(total_nodes: int, reasons: Mapping[str, int]) -> str:
    """kube-scheduler's FitError text: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s)
    had untolerated taint {nvidia.com/gpu: present}." (reason counts, sorted as strings)."""
    text = f"0/{total_nodes} nodes are available:"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"{text} {', '.join(parts)}." if parts else text
