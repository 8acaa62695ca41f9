"""The feasibility model for one gang being planned: `plugins.model.feasibility`'s node filters plus
the rules that depend on the pods around a node (NodePorts, InterPodAffinity,
PodTopologySpread), with the gang's own members counted as they are placed.

Built once per plan (`GangFit(snapshot, members, held)`). Members are grouped into profiles
(same constraints object, labels and namespace: the pods of one task share all three), and
each profile keeps what kube-scheduler's PreFilter computes for a pod:
- forbidden (topology key, value) pairs: existing or placed pods whose required anti-affinity
  selects this pod (InterPodAffinity's "existing pods anti-affinity");
- per own affinity / anti-affinity term, how many matching pods each topology value holds;
- per hard spread constraint, the matching pods per domain of the eligible nodes.

"Existing" pods are those bound to a node (not finished) and those holding another gang's
reservation (`held`: pod key -> reserved node), as kube-scheduler sees assumed pods.

Cost: the common gang (one profile, no dynamic rule, no pod with anti-affinity in the cluster)
builds nothing and the planner keeps its vectorised walk (`fast`). Affinity and spread walk
every pod once per plan; ports and existing anti-affinity walk only the pods that have them.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from core.records import NodeRecord, PodRecord
from core.records.constraints import HostPort, PlacementConstraints, SpreadConstraint
from plugins.model.feasibility import (
    AFFINITY_RULES,
    ANTI_AFFINITY_RULES,
    EXISTING_ANTI_AFFINITY,
    PORTS,
    SPREAD,
    SPREAD_MISSING_LABEL,
    node_affinity_matches,
    ports_conflict,
    ports_self_conflict,
    selector_matches,
    static_reason,
    term_matches,
    untolerated_taint,
)
from plugins.model.numa_fit import numa_nodes

if TYPE_CHECKING:
    from core.cache import Snapshot

__all__ = ["GangFit", "Held"]

Held = Callable[[str], "str | None"]  # pod key -> node of its reservation, if any


def _no_slot(_key: str) -> str | None:
    return None


class _Spread:
    """One hard spread constraint of a profile: matching pods per domain."""

    __slots__ = ("constraint", "counts", "eligible", "self_match")

    def __init__(self, constraint: SpreadConstraint, self_match: bool) -> None:
        self.constraint = constraint
        self.self_match = 1 if self_match else 0
        self.counts: dict[str, int] = {}  # domain -> matching pods (every eligible domain)
        self.eligible: set[str] = set()  # node names counted

    def minimum(self) -> int:
        c = self.constraint
        if len(self.counts) < c.min_domains:
            return 0
        return min(self.counts.values(), default=0)


class _Profile:
    __slots__ = (
        "affinity",
        "anti",
        "any_affinity_match",
        "constraints",
        "forbidden",
        "labels",
        "namespace",
        "spreads",
        "static",
    )

    def __init__(self, pod: PodRecord) -> None:
        self.constraints: PlacementConstraints | None = pod.constraints
        self.labels = pod.labels
        self.namespace = pod.namespace
        self.forbidden: set[tuple[str, str]] = set()
        c = self.constraints
        self.affinity: list[dict[str, int]] = [{} for _ in (c.pod_affinity if c else ())]
        self.anti: list[dict[str, int]] = [{} for _ in (c.pod_anti_affinity if c else ())]
        self.any_affinity_match = False
        self.spreads = [
            _Spread(s, selector_matches(s.selector, self.labels)) for s in (c.spread if c else ())
        ]
        self.static: dict[str, str | None] = {}  # node -> static reason (memo)


class GangFit:
    """Feasibility of a gang's members on the nodes of `snapshot` (see the module docstring)."""

    def __init__(
        self,
        snapshot: Snapshot,
        members: Sequence[PodRecord],
        held: Held | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.nodes = snapshot.nodes
        held = held or _no_slot
        self._profiles: dict[tuple[int, int, str], _Profile] = {}
        self._of: dict[str, _Profile] = {}
        # Labels and namespace only tell members apart when some rule selects pods: a gang
        # whose pods differ only in a per-pod label (an index, a name) stays one profile.
        anti_pods = snapshot.anti_affinity_pods
        labels_matter = bool(anti_pods) or any(
            pod.constraints is not None and pod.constraints.dynamic for pod in members
        )
        # Guaranteed members' cpus aligned with nodes' NUMA cells (`numa_fit`), when nodes
        # report them; members asking different cpus then answer apart.
        self.numa = numa_nodes(snapshot, members, held)
        for pod in members:
            if labels_matter:
                key = (id(pod.constraints), id(pod.labels), pod.namespace, pod.numa)
            else:
                key = (id(pod.constraints), 0, "", pod.numa if self.numa else None)
            profile = self._profiles.get(key)
            if profile is None:
                profile = self._profiles[key] = _Profile(pod)
            self._of[pod.key] = profile
        profiles = list(self._profiles.values())
        self.dynamic = any(p.constraints is not None and p.constraints.dynamic for p in profiles)
        self.ports: dict[str, list[HostPort]] = {}  # node -> host ports in use
        own = {pod.key for pod in members}
        needs_ports = any(p.constraints is not None and p.constraints.host_ports for p in profiles)
        needs_all = any(
            p.constraints is not None
            and (p.constraints.pod_affinity or p.constraints.pod_anti_affinity or p.spreads)
            for p in profiles
        )
        if needs_all:
            self._prepare_spreads(profiles)
            located = self._located(snapshot.pods.values(), own, held)
        else:
            pods = snapshot.pods
            keys = set(anti_pods) | (set(snapshot.host_port_pods) if needs_ports else set())
            located = self._located((pods[k] for k in keys if k in pods), own, held)
        for pod, node in located:
            self._count(pod, node, profiles, initial=True)
        # One profile, nothing that changes as members land: a node filter is all it takes.
        self.fast = len(profiles) <= 1 and not self.dynamic and self.numa is None
        # Some pod's required anti-affinity keeps members away from some nodes.
        self.repelled = any(p.forbidden for p in profiles)

    # ----------------------------------------------------------------- building

    def _located(
        self, pods: Iterable[PodRecord], own: set[str], held: Held
    ) -> list[tuple[PodRecord, NodeRecord]]:
        out: list[tuple[PodRecord, NodeRecord]] = []
        for pod in pods:
            if pod.key in own or pod.terminal:
                continue
            name = pod.node if pod.node is not None else held(pod.key)
            if name is None or (pod.deleting and pod.node is None):
                continue
            node = self.nodes.get(name)
            if node is not None:
                out.append((pod, node))
        return out

    def _prepare_spreads(self, profiles: list[_Profile]) -> None:
        for profile in profiles:
            if not profile.spreads:
                continue
            c = profile.constraints
            assert c is not None
            keys = [s.constraint.topology_key for s in profile.spreads]
            for node in self.nodes.values():
                labels = node.labels
                if any(k not in labels for k in keys):
                    continue  # nodes without every key are no domain (nodeLabelsMatchSpread...)
                for spread in profile.spreads:
                    sc = spread.constraint
                    if sc.honor_node_affinity and not node_affinity_matches(c, node):
                        continue
                    if sc.honor_node_taints and untolerated_taint(
                        node.blocking_taints, c.tolerations
                    ):
                        continue
                    spread.eligible.add(node.name)
                    spread.counts.setdefault(labels[sc.topology_key], 0)

    def _count(
        self, pod: PodRecord, node: NodeRecord, profiles: Iterable[_Profile], *, initial: bool
    ) -> None:
        """`pod` is (or is now planned) on `node`: update every profile's state."""
        c = pod.constraints
        labels = node.labels
        if c is not None and c.host_ports:
            self.ports.setdefault(node.name, []).extend(c.host_ports)
        for profile in profiles:
            if c is not None and c.pod_anti_affinity:
                for term in c.pod_anti_affinity:
                    value = labels.get(term.topology_key)
                    if value is not None and term_matches(term, profile.namespace, profile.labels):
                        profile.forbidden.add((term.topology_key, value))
            pc = profile.constraints
            if pc is None:
                continue
            for i, term in enumerate(pc.pod_affinity):
                if term_matches(term, pod.namespace, pod.labels):
                    profile.any_affinity_match = True
                    value = labels.get(term.topology_key)
                    if value is not None:
                        profile.affinity[i][value] = profile.affinity[i].get(value, 0) + 1
            for i, term in enumerate(pc.pod_anti_affinity):
                if term_matches(term, pod.namespace, pod.labels):
                    value = labels.get(term.topology_key)
                    if value is not None:
                        profile.anti[i][value] = profile.anti[i].get(value, 0) + 1
            for spread in profile.spreads:
                sc = spread.constraint
                if (
                    node.name in spread.eligible
                    and pod.namespace == profile.namespace
                    and not (initial and pod.deleting)
                    and selector_matches(sc.selector, pod.labels)
                ):
                    domain = labels[sc.topology_key]
                    spread.counts[domain] = spread.counts.get(domain, 0) + 1

    # ----------------------------------------------------------------- questions

    def static_reason(self, pod: PodRecord, node: NodeRecord) -> str | None:
        """What decides for the common gang: the node-only filters (readiness, cordon, taints,
        node affinity), then the anti-affinity of the pods already there."""
        profile = self._of[pod.key]
        reason = self._node_only(profile, node)
        if reason is None and profile.forbidden:
            reason = self._forbidden(profile, node)
        return reason

    @staticmethod
    def _node_only(profile: _Profile, node: NodeRecord) -> str | None:
        memo = profile.static
        if node.name in memo:
            return memo[node.name]
        reason = memo[node.name] = static_reason(node, profile.constraints)
        return reason

    @staticmethod
    def _forbidden(profile: _Profile, node: NodeRecord) -> str | None:
        labels = node.labels
        for key, value in profile.forbidden:
            if labels.get(key) == value:
                return EXISTING_ANTI_AFFINITY
        return None

    def profile_id(self, pod: PodRecord) -> int:
        """Members with the same id get the same answers (one profile)."""
        return id(self._of[pod.key])

    def node_ok(self, pod: PodRecord) -> Callable[[NodeRecord], bool]:
        """A node filter for `pod` (the fast path: no rule changes as members land)."""
        return lambda node: self.static_reason(pod, node) is None

    def any_ok(self, node: NodeRecord) -> bool:
        """Some member could use `node` (as far as the node itself decides)."""
        return any(self._static_for(p, node) is None for p in self._profiles.values())

    def _static_for(self, profile: _Profile, node: NodeRecord) -> str | None:
        reason = self._node_only(profile, node)
        if reason is None and profile.forbidden:
            reason = self._forbidden(profile, node)
        return reason

    def reason(self, pod: PodRecord, node: NodeRecord, *, static: bool = True) -> str | None:
        """Why `node` cannot take `pod` now, resources aside (None: it can): the node's own
        filters (unless `static` is False: the caller judged the node), then NodePorts,
        PodTopologySpread and InterPodAffinity."""
        profile = self._of[pod.key]
        if static:
            own = self._node_only(profile, node)
            if own is not None:
                return own
        if self.numa is not None and (why := self.numa.reason(pod.numa, node.name)):
            return why
        c = profile.constraints
        if c is None or not c.dynamic:
            return self._forbidden(profile, node) if profile.forbidden else None
        if c.host_ports and (
            ports_self_conflict(c.host_ports)
            or ports_conflict(c.host_ports, self.ports.get(node.name, ()))
        ):
            return PORTS
        labels = node.labels
        for spread in profile.spreads:
            if spread.constraint.topology_key not in labels:
                return SPREAD_MISSING_LABEL
        for spread in profile.spreads:
            sc = spread.constraint
            count = spread.counts.get(labels[sc.topology_key], 0)
            if count + spread.self_match - spread.minimum() > sc.max_skew:
                return SPREAD
        if c.pod_affinity and not self._affinity_ok(profile, node):
            return AFFINITY_RULES
        for i, term in enumerate(c.pod_anti_affinity):
            value = labels.get(term.topology_key)
            if value is not None and profile.anti[i].get(value, 0) > 0:
                return ANTI_AFFINITY_RULES
        return self._forbidden(profile, node) if profile.forbidden else None

    @staticmethod
    def _affinity_ok(profile: _Profile, node: NodeRecord) -> bool:
        c = profile.constraints
        assert c is not None
        labels = node.labels
        exist = True
        for i, term in enumerate(c.pod_affinity):
            value = labels.get(term.topology_key)
            if value is None:
                return False  # every topology key must be on the node
            if profile.affinity[i].get(value, 0) <= 0:
                exist = False
        if exist:
            return True
        # The first pod of a series with affinity to itself may go anywhere (no pod matches yet).
        return not profile.any_affinity_match and all(
            term_matches(term, profile.namespace, profile.labels) for term in c.pod_affinity
        )

    def ok(self, pod: PodRecord, node: NodeRecord) -> bool:
        return self.reason(pod, node) is None

    def place(self, pod: PodRecord, node: NodeRecord) -> None:
        """`pod` is planned on `node`: later members see it as they see existing pods."""
        self._count(pod, node, self._profiles.values(), initial=False)
        if self.numa is not None:
            self.numa.place(pod.numa, node.name)
