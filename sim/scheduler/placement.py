"""kube-scheduler's PodTopologySpread and InterPodAffinity plugins (filter and score), the two
default plugins that look at the pods of other nodes.

`Placement.build` is their PreFilter: it counts, once per scheduling attempt, the pods that match
the incoming pod's spread constraints per topology domain and the pods that match its (anti-)
affinity terms (or whose required anti-affinity terms match it) per topology pair. `filter`
judges one node from those counts in the default profile's order (PodTopologySpread before
InterPodAffinity), with kube-scheduler's reasons and codes; `scores` is their PreScore, Score
and NormalizeScore, weighted as the default profile weighs them (2 each).

Left out: the system default spread constraints (kube-scheduler applies `maxSkew: 3` per
hostname and `maxSkew: 5` per zone, both ScheduleAnyway, to pods of a Service, ReplicaSet or
StatefulSet that declare none); the stand-in does not watch those owners, so such pods get no
spread score, which changes only the order of equally fitting nodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sim.scheduler.framework import (
    MAX_NODE_SCORE,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    SchedNode,
    SchedPod,
    node_affinity_matches,
)
from sim.scheduler.pod_terms import HOSTNAME_LABEL, SpreadConstraint
from sim.taints import untolerated

SPREAD_MISMATCH = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING_LABEL = f"{SPREAD_MISMATCH} (missing required label)"
AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_MISMATCH = "node(s) didn't satisfy existing pods anti-affinity rules"

SPREAD_WEIGHT = 2
INTER_POD_AFFINITY_WEIGHT = 2
HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs.hardPodAffinityWeight's default

Pair = tuple[str, str]  # (topology key, value)
PlacedPods = Iterable[tuple[SchedPod, SchedNode]]


def needs_placement(pod: SchedPod, affinity_holders: bool) -> bool:
    """Whether either plugin has anything to do for `pod`: its own constraints or terms, or
    placed pods that carry pod (anti-)affinity terms (`affinity_holders`)."""
    return bool(pod.spread) or pod.pod_affinity is not None or affinity_holders


def _has_keys(node: SchedNode, constraints: Sequence[SpreadConstraint]) -> bool:
    return all(c.topology_key in node.labels for c in constraints)


def _counts_node(pod: SchedPod, node: SchedNode, constraint: SpreadConstraint) -> bool:
    """The node inclusion policies: nodeAffinityPolicy (Honor by default), nodeTaintsPolicy
    (Ignore by default)."""
    if constraint.honor_affinity and not node_affinity_matches(pod, node):
        return False
    if constraint.honor_taints:
        return untolerated(pod.tolerations, node.taints, ("NoSchedule", "NoExecute")) is None
    return True


def _matching(pods: Iterable[SchedPod], pod: SchedPod, constraint: SpreadConstraint) -> int:
    return sum(
        1
        for other in pods
        if other.namespace == pod.namespace
        and not other.deleting
        and constraint.matches(other.labels)
    )


@dataclass
class Placement:
    pod: SchedPod
    # PodTopologySpread's PreFilter: per hard constraint, matching pods per domain.
    hard: tuple[SpreadConstraint, ...] = ()
    domain_counts: list[dict[str, int]] = field(default_factory=list)
    # InterPodAffinity's PreFilter.
    affinity_counts: dict[Pair, int] = field(default_factory=dict)
    anti_affinity_counts: dict[Pair, int] = field(default_factory=dict)
    existing_anti_affinity: dict[Pair, int] = field(default_factory=dict)
    pods_by_node: dict[str, list[SchedPod]] = field(default_factory=dict)
    holders: list[tuple[SchedPod, SchedNode]] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        pod: SchedPod,
        nodes: Mapping[str, SchedNode],
        placed: PlacedPods,
        holders: PlacedPods,
    ) -> Placement:
        """`placed`: every pod on a node (bound or assumed) with its node; `holders`: those
        of them that carry pod (anti-)affinity terms."""
        state = cls(pod, holders=list(holders))
        for existing, node in state.holders:
            terms = existing.pod_affinity
            assert terms is not None
            for term in terms.anti_affinity:
                value = node.labels.get(term.topology_key)
                if value is not None and term.matches(pod.namespace, pod.labels):
                    pair = (term.topology_key, value)
                    state.existing_anti_affinity[pair] = (
                        state.existing_anti_affinity.get(pair, 0) + 1
                    )
        if pod.spread or pod.pod_affinity is not None:
            for existing, node in placed:
                state.pods_by_node.setdefault(node.name, []).append(existing)
        state.hard = tuple(c for c in pod.spread if c.hard)
        if state.hard:
            state._count_domains(nodes)
        if pod.pod_affinity is not None:
            state._count_terms(nodes)
        return state

    def _count_domains(self, nodes: Mapping[str, SchedNode]) -> None:
        self.domain_counts = [{} for _ in self.hard]
        for node in nodes.values():
            if not _has_keys(node, self.hard):
                continue
            on_node = self.pods_by_node.get(node.name, ())
            for i, constraint in enumerate(self.hard):
                if not _counts_node(self.pod, node, constraint):
                    continue
                value = node.labels[constraint.topology_key]
                counts = self.domain_counts[i]
                counts[value] = counts.get(value, 0) + _matching(on_node, self.pod, constraint)

    def _count_terms(self, nodes: Mapping[str, SchedNode]) -> None:
        terms = self.pod.pod_affinity
        assert terms is not None
        for name, on_node in self.pods_by_node.items():
            node = nodes.get(name)
            if node is None:
                continue
            for existing in on_node:
                if terms.affinity and all(
                    t.matches(existing.namespace, existing.labels) for t in terms.affinity
                ):
                    for t in terms.affinity:
                        _add(self.affinity_counts, node, t.topology_key, 1)
                for t in terms.anti_affinity:
                    if t.matches(existing.namespace, existing.labels):
                        _add(self.anti_affinity_counts, node, t.topology_key, 1)

    # ------------------------------------------------------------------ filters

    def filter(self, node: SchedNode) -> tuple[str, list[str]] | None:
        failure = self._spread_filter(node)
        if failure is not None:
            return failure
        return self._affinity_filter(node)

    def _spread_filter(self, node: SchedNode) -> tuple[str, list[str]] | None:
        for i, constraint in enumerate(self.hard):
            value = node.labels.get(constraint.topology_key)
            if value is None:
                return UNRESOLVABLE, [SPREAD_MISSING_LABEL]
            counts = self.domain_counts[i]
            # Fewer eligible domains than minDomains: the global minimum is taken as 0.
            minimum = min(counts.values()) if len(counts) >= constraint.min_domains else 0
            own = 1 if constraint.matches(self.pod.labels) else 0
            if counts.get(value, 0) + own - minimum > constraint.max_skew:
                return UNSCHEDULABLE, [SPREAD_MISMATCH]
        return None

    def _affinity_filter(self, node: SchedNode) -> tuple[str, list[str]] | None:
        terms = self.pod.pod_affinity
        labels = node.labels
        if terms is not None and terms.affinity:
            found = True
            for term in terms.affinity:
                value = labels.get(term.topology_key)
                if value is None:
                    return UNRESOLVABLE, [AFFINITY_MISMATCH]
                if self.affinity_counts.get((term.topology_key, value), 0) <= 0:
                    found = False
            # The first pod of a group with affinity to itself: no pod anywhere matches,
            # and the pod matches its own terms.
            if not found and not (
                not self.affinity_counts
                and all(t.matches(self.pod.namespace, self.pod.labels) for t in terms.affinity)
            ):
                return UNRESOLVABLE, [AFFINITY_MISMATCH]
        if terms is not None:
            for term in terms.anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and self.anti_affinity_counts.get((term.topology_key, value)):
                    return UNSCHEDULABLE, [ANTI_AFFINITY_MISMATCH]
        for (key, value), count in self.existing_anti_affinity.items():
            if count > 0 and labels.get(key) == value:
                return UNSCHEDULABLE, [EXISTING_ANTI_AFFINITY_MISMATCH]
        return None

    # ------------------------------------------------------------------ scores

    def scores(
        self, feasible: Sequence[SchedNode], nodes: Mapping[str, SchedNode]
    ) -> dict[str, int]:
        """Both plugins' normalized scores times their weights, per feasible node."""
        totals = dict.fromkeys((n.name for n in feasible), 0)
        for name, score in self._spread_scores(feasible, nodes).items():
            totals[name] += SPREAD_WEIGHT * score
        for name, score in self._affinity_scores(feasible, nodes).items():
            totals[name] += INTER_POD_AFFINITY_WEIGHT * score
        return totals

    def _spread_scores(
        self, feasible: Sequence[SchedNode], nodes: Mapping[str, SchedNode]
    ) -> dict[str, int]:
        soft = tuple(c for c in self.pod.spread if not c.hard)
        if not soft:
            return {}
        ignored = {n.name for n in feasible if not _has_keys(n, soft)}
        values: list[dict[str, int]] = [{} for _ in soft]
        for node in feasible:
            if node.name not in ignored:
                for i, c in enumerate(soft):
                    if c.topology_key != HOSTNAME_LABEL:
                        values[i][node.labels[c.topology_key]] = 0
        weights = []
        for i, c in enumerate(soft):
            if c.topology_key == HOSTNAME_LABEL:
                size = len(feasible) - len(ignored)
            else:
                size = len(values[i])
            weights.append(math.log(size + 2))
        for node in nodes.values():
            if not _has_keys(node, soft):
                continue
            on_node = self.pods_by_node.get(node.name, ())
            for i, c in enumerate(soft):
                value = node.labels[c.topology_key]
                if c.topology_key == HOSTNAME_LABEL or value not in values[i]:
                    continue
                if _counts_node(self.pod, node, c):
                    values[i][value] += _matching(on_node, self.pod, c)
        raw: dict[str, int] = {}
        for node in feasible:
            if node.name in ignored:
                continue
            score = 0.0
            for i, c in enumerate(soft):
                if c.topology_key == HOSTNAME_LABEL:
                    count = _matching(self.pods_by_node.get(node.name, ()), self.pod, c)
                else:
                    count = values[i][node.labels[c.topology_key]]
                score += count * weights[i] + (c.max_skew - 1)
            raw[node.name] = round(score)
        result = dict.fromkeys(ignored, 0)
        if not raw:
            return result
        low, high = min(raw.values()), max(raw.values())
        for name, score in raw.items():
            if high == 0:
                result[name] = MAX_NODE_SCORE
            else:
                result[name] = MAX_NODE_SCORE * (high + low - score) // high
        return result

    def _affinity_scores(
        self, feasible: Sequence[SchedNode], nodes: Mapping[str, SchedNode]
    ) -> dict[str, int]:
        terms = self.pod.pod_affinity
        own = terms is not None and bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        topology: dict[Pair, int] = {}
        pod = self.pod
        if own:
            placed = [
                (p, nodes[name])
                for name, pods in self.pods_by_node.items()
                if name in nodes
                for p in pods
            ]
        else:
            placed = self.holders
        for existing, node in placed:
            if own:
                assert terms is not None
                for w in terms.preferred_affinity:
                    if w.term.matches(existing.namespace, existing.labels):
                        _add(topology, node, w.term.topology_key, w.weight)
                for w in terms.preferred_anti_affinity:
                    if w.term.matches(existing.namespace, existing.labels):
                        _add(topology, node, w.term.topology_key, -w.weight)
            theirs = existing.pod_affinity
            if theirs is None:
                continue
            for t in theirs.affinity:
                if t.matches(pod.namespace, pod.labels):
                    _add(topology, node, t.topology_key, HARD_POD_AFFINITY_WEIGHT)
            for w in theirs.preferred_affinity:
                if w.term.matches(pod.namespace, pod.labels):
                    _add(topology, node, w.term.topology_key, w.weight)
            for w in theirs.preferred_anti_affinity:
                if w.term.matches(pod.namespace, pod.labels):
                    _add(topology, node, w.term.topology_key, -w.weight)
        if not topology:
            return {}
        raw = {
            n.name: sum(s for (key, value), s in topology.items() if n.labels.get(key) == value)
            for n in feasible
        }
        low, high = min(raw.values()), max(raw.values())
        spread = high - low
        return {
            name: int(MAX_NODE_SCORE * (score - low) / spread) if spread > 0 else 0
            for name, score in raw.items()
        }


def _add(counts: dict[Pair, int], node: SchedNode, key: str, amount: int) -> None:
    value = node.labels.get(key)
    if value is not None:
        pair = (key, value)
        counts[pair] = counts.get(pair, 0) + amount
