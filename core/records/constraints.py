"""A pod's placement constraints: what kube-scheduler's default filter plugins read of a pod
besides its resource request (tolerations, nodeSelector, required node affinity, host ports,
required pod affinity / anti-affinity, hard topology spread constraints).

Decoded once per pod into hashable tuples (`PlacementConstraints`), shared between the pods of
a workload (one memo keyed by the raw spec parts and the namespace), and None for a pod with
none of them, so the common pod costs one dict lookup and the planner keeps its fast path.
Evaluated by `plugins.model.feasibility` (records only hold data: core imports no plugin).

Left out, on purpose: PVC-based rules (VolumeBinding / VolumeZone need PVCs and PVs, which
the cache does not watch), preferred (soft) affinity and ScheduleAnyway spreads (they only
score), and a non-empty `namespaceSelector` of an affinity term (namespace labels are not in
the cache: such a term matches the namespaces it lists, none if it lists none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from core.records.common import intern

__all__ = [
    "AffinityTerm",
    "HostPort",
    "LabelSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PlacementConstraints",
    "SpreadConstraint",
    "Toleration",
    "placement_constraints",
]


class Toleration(NamedTuple):
    key: str
    operator: str  # "Equal" or "Exists" ("" reads as Equal)
    value: str
    effect: str  # "" matches every effect


class NodeSelectorRequirement(NamedTuple):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]


class NodeSelectorTerm(NamedTuple):
    """Requirements ANDed; a term with none matches no node (as kube-scheduler reads it)."""

    match_expressions: tuple[NodeSelectorRequirement, ...]
    match_fields: tuple[NodeSelectorRequirement, ...]  # only metadata.name is defined


class LabelSelector(NamedTuple):
    """A metav1.LabelSelector; the empty selector matches every label set."""

    match_labels: tuple[tuple[str, str], ...]
    match_expressions: tuple[NodeSelectorRequirement, ...]  # In, NotIn, Exists, DoesNotExist


class AffinityTerm(NamedTuple):
    """A required pod (anti-)affinity term. `selector` None matches no pod. `namespaces` are
    resolved: an empty list with no namespaceSelector means the pod's own namespace;
    `all_namespaces` is an empty namespaceSelector ({}), which selects every namespace."""

    selector: LabelSelector | None
    namespaces: frozenset[str]
    all_namespaces: bool
    topology_key: str


class SpreadConstraint(NamedTuple):
    """A topologySpreadConstraint with whenUnsatisfiable: DoNotSchedule (matchLabelKeys already
    merged into `selector`; None matches no pod)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int  # 1 when unset
    honor_node_affinity: bool  # nodeAffinityPolicy, default Honor
    honor_node_taints: bool  # nodeTaintsPolicy, default Ignore


class HostPort(NamedTuple):
    ip: str  # "0.0.0.0" when unset
    protocol: str  # "TCP" when unset
    port: int


class PlacementConstraints(NamedTuple):
    """Everything beyond resources that decides which nodes can take a pod."""

    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None  # None: no required affinity
    host_ports: tuple[HostPort, ...] = ()
    pod_affinity: tuple[AffinityTerm, ...] = ()
    pod_anti_affinity: tuple[AffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()

    @property
    def dynamic(self) -> bool:
        """Whether the answer for a node depends on the pods placed on it (or near it)."""
        return bool(self.host_ports or self.pod_affinity or self.pod_anti_affinity or self.spread)


def _s(value: Any) -> str:
    return intern(str(value)) if value is not None else ""


def _requirements(items: Any) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(
            _s(r.get("key")), _s(r.get("operator")), tuple(_s(v) for v in r.get("values") or ())
        )
        for r in items or ()
        if isinstance(r, Mapping)
    )


def _selector(raw: Any) -> LabelSelector | None:
    if not isinstance(raw, Mapping):
        return None
    labels = raw.get("matchLabels") or {}
    return LabelSelector(
        tuple(sorted((_s(k), _s(v)) for k, v in labels.items())),
        _requirements(raw.get("matchExpressions")),
    )


def _with_label_keys(
    selector: LabelSelector | None, keys: Any, labels: Mapping[str, str]
) -> LabelSelector | None:
    """matchLabelKeys: the pod's own values of those labels join the selector (keys the pod
    does not carry are ignored, as kube-scheduler ignores them)."""
    extra = tuple(
        NodeSelectorRequirement(_s(k), "In", (_s(labels[k]),)) for k in keys or () if k in labels
    )
    if not extra or selector is None:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + extra)


def _terms(raw: Any, namespace: str, labels: Mapping[str, str]) -> tuple[AffinityTerm, ...]:
    out: list[AffinityTerm] = []
    for term in raw or ():
        if not isinstance(term, Mapping):
            continue
        ns_selector = term.get("namespaceSelector")
        listed = frozenset(_s(n) for n in term.get("namespaces") or ())
        everywhere = isinstance(ns_selector, Mapping) and not (
            ns_selector.get("matchLabels") or ns_selector.get("matchExpressions")
        )
        if not listed and ns_selector is None:
            listed = frozenset({namespace})
        selector = _with_label_keys(
            _selector(term.get("labelSelector")), term.get("matchLabelKeys"), labels
        )
        if selector is not None and term.get("mismatchLabelKeys"):
            extra = tuple(
                NodeSelectorRequirement(_s(k), "NotIn", (_s(labels[k]),))
                for k in term["mismatchLabelKeys"]
                if k in labels
            )
            selector = LabelSelector(selector.match_labels, selector.match_expressions + extra)
        out.append(AffinityTerm(selector, listed, everywhere, _s(term.get("topologyKey"))))
    return tuple(out)


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Host ports of the containers and of sidecars (init containers with restartPolicy
    Always), as kube-scheduler's NodePorts collects them."""
    containers = list(spec.get("containers") or ())
    containers += [
        c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"
    ]
    ports: list[HostPort] = []
    for container in containers:
        for port in container.get("ports") or ():
            number = int(port.get("hostPort") or 0)
            if number <= 0:
                continue
            ports.append(
                HostPort(
                    _s(port.get("hostIP") or "0.0.0.0"), _s(port.get("protocol") or "TCP"), number
                )
            )
    return tuple(ports)


def _spread(raw: Any, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    out: list[SpreadConstraint] = []
    for item in raw or ():
        if not isinstance(item, Mapping) or item.get("whenUnsatisfiable") != "DoNotSchedule":
            continue  # ScheduleAnyway only scores
        out.append(
            SpreadConstraint(
                max_skew=int(item.get("maxSkew") or 1),
                topology_key=_s(item.get("topologyKey")),
                selector=_with_label_keys(
                    _selector(item.get("labelSelector")), item.get("matchLabelKeys"), labels
                ),
                min_domains=int(item.get("minDomains") or 1),
                honor_node_affinity=item.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_node_taints=item.get("nodeTaintsPolicy") == "Honor",
            )
        )
    return tuple(out)


def _decode(spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]):  # type: ignore[no-untyped-def]
    affinity = spec.get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    node_affinity = None
    if isinstance(required, Mapping):
        node_affinity = tuple(
            NodeSelectorTerm(
                _requirements(t.get("matchExpressions")), _requirements(t.get("matchFields"))
            )
            for t in required.get("nodeSelectorTerms") or ()
            if isinstance(t, Mapping)
        )
    pod_affinity = (affinity.get("podAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    pod_anti = (affinity.get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    constraints = PlacementConstraints(
        tolerations=tuple(
            Toleration(
                _s(t.get("key")),
                _s(t.get("operator") or "Equal"),
                _s(t.get("value")),
                _s(t.get("effect")),
            )
            for t in spec.get("tolerations") or ()
            if isinstance(t, Mapping)
        ),
        node_selector=tuple(
            sorted((_s(k), _s(v)) for k, v in (spec.get("nodeSelector") or {}).items())
        ),
        node_affinity=node_affinity,
        host_ports=_host_ports(spec),
        pod_affinity=_terms(pod_affinity, namespace, labels),
        pod_anti_affinity=_terms(pod_anti, namespace, labels),
        spread=_spread(spec.get("topologySpreadConstraints"), labels),
    )
    return None if constraints == _NONE else constraints


def _port_parts(spec: Mapping[str, Any]) -> list[Any] | None:
    """The containers' ports when one of them asks for a host port (None: none does, the
    common case even for pods that declare container ports)."""
    found = False
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            ports = container.get("ports") if isinstance(container, Mapping) else None
            if ports and any(isinstance(p, Mapping) and p.get("hostPort") for p in ports):
                found = True
    if not found:
        return None
    return [
        [c.get("ports"), c.get("restartPolicy")]
        for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ()))
        if isinstance(c, Mapping)
    ]


_NONE = PlacementConstraints()
_MEMO: dict[bytes, PlacementConstraints | None] = {}
_MEMO_SIZE = 4096


def placement_constraints(
    spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]
) -> PlacementConstraints | None:
    """The pod's constraints (None when it has none), shared between pods with the same
    scheduling-relevant spec parts. Malformed parts are read leniently (the API server has
    validated stored pods)."""
    parts = (
        spec.get("tolerations"),
        spec.get("nodeSelector"),
        spec.get("affinity"),
        spec.get("topologySpreadConstraints"),
    )
    ports = _port_parts(spec)
    if ports is None and not any(parts):
        return None
    label_keys = bool(parts[2] or parts[3])  # matchLabelKeys read the pod's labels
    try:
        # The API server writes a pod's fields in one order: equal specs give equal keys.
        key: bytes | None = orjson.dumps([parts, ports, namespace, labels if label_keys else None])
    except (TypeError, orjson.JSONEncodeError):
        key = None
    if key is not None and key in _MEMO:
        return _MEMO[key]
    try:
        decoded = _decode(spec, namespace, labels)
    except (TypeError, ValueError, AttributeError):
        decoded = None
    if key is not None:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        _MEMO[key] = decoded
    return decoded
