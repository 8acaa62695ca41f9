"""The stand-in's PodTopologySpread and InterPodAffinity scores (kube-scheduler's formulas:
normalized to 0..100 and weighted 2 each), on nodes and pods built in memory."""

from __future__ import annotations

from typing import Any

from sim.scheduler.framework import SchedNode, SchedPod
from sim.scheduler.placement import Placement


def node(name: str, zone: str) -> SchedNode:
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    return SchedNode(
        {
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}},
        }
    )


def pod(name: str, labels: dict[str, str], on: str | None = None, **spec: Any) -> SchedPod:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}], **spec}
    if on:
        body["nodeName"] = on
    return SchedPod(
        {
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": body,
        }
    )


def build(incoming: SchedPod, nodes: dict[str, SchedNode], placed: list[SchedPod]) -> Placement:
    pairs = [(p, nodes[p.node or ""]) for p in placed]
    holders = [(p, n) for p, n in pairs if p.pod_affinity is not None]
    return Placement.build(incoming, nodes, pairs, holders)


NODES = {n.name: n for n in (node("a1", "a"), node("a2", "a"), node("b1", "b"))}


def test_preferred_anti_affinity_scores_away_from_matching_pods() -> None:
    placed = [pod("web-0", {"app": "web"}, on="a1")]
    avoid = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "topology.kubernetes.io/zone",
                    },
                }
            ]
        }
    }
    incoming = pod("web-1", {"app": "web"}, affinity=avoid)
    scores = build(incoming, NODES, placed).scores(list(NODES.values()), NODES)
    # Zone a holds the matching pod: -100 there, 0 in zone b; normalized 0 and 100, times 2.
    assert scores == {"a1": 0, "a2": 0, "b1": 200}


def test_existing_pods_required_affinity_attracts_with_weight_one() -> None:
    wants_web = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    placed = [pod("cache", {"app": "cache"}, on="b1", affinity=wants_web)]
    scores = build(pod("web", {"app": "web"}), NODES, placed).scores(list(NODES.values()), NODES)
    assert scores == {"a1": 0, "a2": 0, "b1": 200}


def test_soft_spread_prefers_the_emptier_domain() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    placed = [pod("web-0", {"app": "web"}, on="a1"), pod("web-1", {"app": "web"}, on="a2")]
    incoming = pod("web-2", {"app": "web"}, topologySpreadConstraints=spread)
    state = build(incoming, NODES, placed)
    # Soft constraints never filter.
    assert all(state.filter(n) is None for n in NODES.values())
    scores = state.scores(list(NODES.values()), NODES)
    # Zone a counts 2 (raw round(2*ln 4) = 3), zone b 0: normalized 100*(3+0-s)/3.
    assert scores == {"a1": 0, "a2": 0, "b1": 200}


def test_hard_spread_with_min_domains_counts_missing_domains_as_zero() -> None:
    spread = [
        {
            "maxSkew": 1,
            "minDomains": 3,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    placed = [pod("web-0", {"app": "web"}, on="b1")]
    state = build(pod("web-1", {"app": "web"}, topologySpreadConstraints=spread), NODES, placed)
    # Two zones < minDomains 3: the global minimum is 0, so zone b (1 + 1 - 0 > 1) is out.
    assert state.filter(NODES["b1"]) is not None
    assert state.filter(NODES["a1"]) is None
