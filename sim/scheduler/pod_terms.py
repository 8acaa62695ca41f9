"""What kube-scheduler's NodePorts, InterPodAffinity and PodTopologySpread plugins read from a
pod, parsed once per pod version: its host ports, its pod (anti-)affinity terms and its topology
spread constraints.

Selectors follow metav1.LabelSelectorAsSelector (nil matches nothing, `{}` everything). A term's
namespaces are its `namespaces` list plus its `namespaceSelector`; with neither, the namespace of
the pod that carries the term. The stand-in does not watch Namespaces, so a `namespaceSelector`
is matched against the one label every namespace has, `kubernetes.io/metadata.name` (an empty
selector still means every namespace).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim.apiserver.selector_base import SelectorError
from sim.apiserver.selector_label_parsing import label_selector_from_dict
from sim.apiserver.selector_labels import LabelSelector

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
HOSTNAME_LABEL = "kubernetes.io/hostname"
WILDCARD_IP = "0.0.0.0"

HostPort = tuple[str, str, int]  # (protocol, hostIP, hostPort)


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The ports a pod wants on its node: every container's (and sidecar's) non-zero hostPort,
    protocol TCP and address 0.0.0.0 when not given."""
    found: list[HostPort] = []
    containers = list(spec.get("containers") or ())
    containers += [
        c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"
    ]
    for container in containers:
        for port in container.get("ports") or ():
            number = port.get("hostPort") or 0
            if not isinstance(number, int) or number <= 0:
                continue
            found.append((port.get("protocol") or "TCP", port.get("hostIP") or WILDCARD_IP, number))
    return tuple(found)


def ports_conflict(wanted: Sequence[HostPort], used: Mapping[HostPort, int]) -> bool:
    """NodePorts' fitsPorts: same protocol and port, and the same address or either wildcard."""
    for protocol, ip, number in wanted:
        if ip == WILDCARD_IP:
            for other_protocol, _, other_number in used:
                if other_protocol == protocol and other_number == number:
                    return True
        elif (protocol, ip, number) in used or (protocol, WILDCARD_IP, number) in used:
            return True
    return False


def _selector(raw: Any) -> LabelSelector:
    try:
        return label_selector_from_dict(raw)
    except SelectorError:
        return LabelSelector.nothing()  # the API server's validation keeps these out


class AffinityTerm:
    """One PodAffinityTerm with the namespaces it applies to resolved."""

    __slots__ = ("all_namespaces", "namespace_selector", "namespaces", "selector", "topology_key")

    def __init__(self, raw: Mapping[str, Any], own_namespace: str) -> None:
        self.topology_key: str = raw.get("topologyKey") or ""
        self.selector = _selector(raw.get("labelSelector"))
        self.namespaces = frozenset(raw.get("namespaces") or ())
        ns_selector = raw.get("namespaceSelector")
        self.namespace_selector = _selector(ns_selector) if ns_selector is not None else None
        self.all_namespaces = self.namespace_selector is not None and self.namespace_selector.empty
        if not self.namespaces and ns_selector is None:
            self.namespaces = frozenset((own_namespace,))

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod in `namespace` with `labels` is one this term selects."""
        if (
            not self.all_namespaces
            and namespace not in self.namespaces
            and (
                self.namespace_selector is None
                or not self.namespace_selector.matches({NAMESPACE_NAME_LABEL: namespace})
            )
        ):
            return False
        return self.selector.matches(labels)


class WeightedTerm:
    __slots__ = ("term", "weight")

    def __init__(self, term: AffinityTerm, weight: int) -> None:
        self.term = term
        self.weight = weight


class PodAffinity:
    """A pod's required and preferred pod affinity and anti-affinity terms."""

    __slots__ = ("affinity", "anti_affinity", "preferred_affinity", "preferred_anti_affinity")

    def __init__(self, raw: Mapping[str, Any], namespace: str) -> None:
        affinity = raw.get("podAffinity") or {}
        anti = raw.get("podAntiAffinity") or {}
        self.affinity = _required(affinity, namespace)
        self.anti_affinity = _required(anti, namespace)
        self.preferred_affinity = _preferred(affinity, namespace)
        self.preferred_anti_affinity = _preferred(anti, namespace)

    @property
    def empty(self) -> bool:
        return not (
            self.affinity
            or self.anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


def _required(raw: Mapping[str, Any], namespace: str) -> tuple[AffinityTerm, ...]:
    terms = raw.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    return tuple(AffinityTerm(t, namespace) for t in terms)


def _preferred(raw: Mapping[str, Any], namespace: str) -> tuple[WeightedTerm, ...]:
    terms = raw.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    return tuple(
        WeightedTerm(
            AffinityTerm(t.get("podAffinityTerm") or {}, namespace), int(t.get("weight") or 0)
        )
        for t in terms
    )


def pod_affinity(spec: Mapping[str, Any], namespace: str) -> PodAffinity | None:
    parsed = PodAffinity(spec.get("affinity") or {}, namespace)
    return None if parsed.empty else parsed


class SpreadConstraint:
    """One topologySpreadConstraint, its selector merged with `matchLabelKeys` (the pod's
    values for those keys), as kube-scheduler does."""

    __slots__ = (
        "hard",
        "honor_affinity",
        "honor_taints",
        "max_skew",
        "min_domains",
        "selector",
        "topology_key",
    )

    def __init__(self, raw: Mapping[str, Any], labels: Mapping[str, str]) -> None:
        self.topology_key: str = raw.get("topologyKey") or ""
        self.max_skew = int(raw.get("maxSkew") or 1)
        self.min_domains = int(raw.get("minDomains") or 1)
        self.hard = raw.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        self.honor_affinity = raw.get("nodeAffinityPolicy", "Honor") == "Honor"
        self.honor_taints = raw.get("nodeTaintsPolicy", "Ignore") == "Honor"
        selector = raw.get("labelSelector")
        keys = [k for k in raw.get("matchLabelKeys") or () if k in labels]
        if selector is not None and keys:
            selector = dict(selector)
            expressions = list(selector.get("matchExpressions") or ())
            expressions += [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys]
            selector["matchExpressions"] = expressions
        self.selector = _selector(selector)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.selector.matches(labels)


def spread_constraints(
    spec: Mapping[str, Any], labels: Mapping[str, str]
) -> tuple[SpreadConstraint, ...]:
    return tuple(SpreadConstraint(c, labels) for c in spec.get("topologySpreadConstraints") or ())


def pod_claims(spec: Mapping[str, Any], pod_name: str) -> tuple[tuple[str, bool], ...]:
    """(claim name, is a generic ephemeral volume's) for each volume backed by a claim."""
    found: list[tuple[str, bool]] = []
    for volume in spec.get("volumes") or ():
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            found.append((claim, False))
        elif volume.get("ephemeral") is not None:
            found.append((f"{pod_name}-{volume.get('name', '')}", True))
    return tuple(found)
