"""Memoised filter and prioritize answer exactly what a fresh computation answers, whatever
changes between calls (pods bound and finished, nodes resized, reservations made and freed)."""

from __future__ import annotations

import itertools
import random
from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord, PodRecord
from core.resources import ResourceVector
from extender.ledger import GangLedger, Reservation
from extender.passthrough import ShapeMemo, attach_memo, fit_filter, prioritize
from plugins.framework.config import default_config
from plugins.framework.node_order import Framework

_rv = itertools.count(1)


def node(name: str, cpu: int) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": str(next(_rv))},
            "status": {"allocatable": {"cpu": str(cpu), "memory": "32Gi", "pods": "110"}},
        }
    )


def pod(name: str, node_name: str, cpu_m: int, phase: str = "Running") -> PodRecord:
    spec: dict[str, Any] = {
        "nodeName": node_name,
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": "1Gi"}}}
        ],
    }
    return PodRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(next(_rv))},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def test_memo_matches_fresh_computation_under_random_changes() -> None:
    rng = random.Random(11)
    cache = ClusterCache()
    memo = attach_memo(cache, ShapeMemo(max_shapes=4))
    ledger = GangLedger(cache.bump_node)
    framework = Framework(default_config())
    names = [f"n{i}" for i in range(30)]
    for name in names:
        cache.on_node_add(node(name, rng.choice((4, 8, 16))))
    shapes = [
        ResourceVector({"cpu": c, "memory": 2**30, "pods": 1})
        for c in (500, 1000, 2000, 4000, 8000, 250)
    ]
    pods: list[PodRecord] = []
    for step in range(400):
        roll = rng.random()
        if roll < 0.4:
            p = pod(f"p{step}", rng.choice(names), rng.choice((250, 1000, 3000)))
            cache.on_pod_add(p)
            pods.append(p)
        elif roll < 0.55 and pods:
            victim = pods.pop(rng.randrange(len(pods)))
            cache.on_pod_delete(victim)
        elif roll < 0.65:
            cache.on_node_update(cache.nodes["n0"], node("n0", rng.choice((2, 4, 32))))
        elif roll < 0.8:
            ledger.reserve(
                Reservation(
                    f"ns/g{rng.randrange(5)}",
                    rng.choice(names),
                    ResourceVector({"cpu": rng.choice((1000, 2000))}),
                )
            )
        else:
            ledger.release(f"ns/g{rng.randrange(5)}")
        request = rng.choice(shapes)
        asking = f"ns/g{rng.randrange(5)}"  # sometimes a pod with its own reservation
        candidates = rng.sample(names, 20)
        # The memo serves the Python path (taken when the vectorised path stands aside).
        memoised = fit_filter(
            cache, ledger, asking, request, candidates, None, memo, vectorised=False
        )
        fresh = fit_filter(cache, ledger, asking, request, candidates, None, None, vectorised=False)
        assert memoised == fresh
        memoised_scores = prioritize(
            framework, cache, ledger, asking, request, candidates, None, memo, vectorised=False
        )
        fresh_scores = prioritize(
            framework, cache, ledger, asking, request, candidates, None, None, vectorised=False
        )
        assert memoised_scores == fresh_scores
