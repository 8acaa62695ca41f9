"""The vectorised filter and scoring answer exactly what the per-node Python path answers."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from core.cache import ClusterCache
from core.records import NodeRecord, PodRecord
from core.resources import ResourceVector
from extender import fastpath
from extender.ledger import GangLedger, Reservation
from extender.passthrough import fit_filter, prioritize
from plugins.framework.config import default_config, parse_scheduler_config
from plugins.framework.node_order import Framework

_rv = itertools.count(1)


def node(name: str, cpu: int, memory_gi: int, gpus: int) -> NodeRecord:
    allocatable = {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": str(next(_rv))},
            "status": {"allocatable": allocatable},
        }
    )


def pod(name: str, node_name: str, cpu_m: int, memory_mi: int, gpus: int) -> PodRecord:
    requests: dict[str, Any] = {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    return PodRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(next(_rv))},
            "spec": {
                "nodeName": node_name,
                "containers": [{"name": "c", "resources": {"requests": requests}}],
            },
            "status": {"phase": "Running"},
        }
    )


BINPACK_GPU = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: binpack
    arguments: {binpack.weight: 3, binpack.cpu: 2, binpack.memory: 1,
                binpack.resources: nvidia.com/gpu, binpack.resources.nvidia.com/gpu: 5}
  - name: nodeorder
    arguments: {leastrequested.weight: 2, balancedresource.weight: 1}
"""


@pytest.mark.parametrize("config_text", [None, BINPACK_GPU])
def test_vectorised_equals_python(config_text: str | None) -> None:
    rng = random.Random(5)
    framework = Framework(parse_scheduler_config(config_text) if config_text else default_config())
    cache = ClusterCache()
    ledger = GangLedger(cache.bump_node)
    names = [f"n{i}" for i in range(120)]
    for name in names:
        cache.on_node_add(
            node(name, rng.choice((4, 16, 64)), rng.choice((8, 64, 256)), rng.choice((0, 0, 4, 8)))
        )
    vectorised_answers = vectorised_scores = 0
    for step in range(300):
        target = rng.choice(names)
        cache.on_pod_add(
            pod(
                f"p{step}",
                target,
                rng.randrange(100, 9000),
                rng.randrange(100, 60000),
                rng.choice((0, 0, 1, 2)),
            )
        )
        if step % 50 == 25:
            ledger.reserve(
                Reservation("ns/gang-0", rng.choice(names), ResourceVector({"cpu": 1000}))
            )
        if step % 50 == 40:
            ledger.release("ns/gang-0")
        request = ResourceVector(
            {
                "cpu": rng.randrange(100, 20000),
                "memory": rng.randrange(1, 100) * 2**28,
                "pods": 1,
                **({"nvidia.com/gpu": rng.choice((1, 2, 4))} if rng.random() < 0.4 else {}),
            }
        )
        candidates = rng.sample(names, 60)
        fast_filter = fastpath.fit_filter(cache, ledger, request, candidates)
        slow_filter = fit_filter(cache, ledger, "ns/asker", request, candidates, vectorised=False)
        fast_scores = fastpath.scores(framework, cache, ledger, request, candidates)
        slow = prioritize(
            framework, cache, ledger, "ns/asker", request, candidates, vectorised=False
        )
        if fast_filter is not None:
            vectorised_answers += 1
            assert sorted(fast_filter[0]) == sorted(slow_filter[0])
            assert fast_filter[1] == slow_filter[1]
        if fast_scores is not None:
            vectorised_scores += 1
            assert (candidates, fast_scores) == (slow[0], slow[1])
        # The public entry points give the same answer either way.
        assert fit_filter(cache, ledger, "ns/asker", request, candidates)[1] == slow_filter[1]
        assert prioritize(framework, cache, ledger, "ns/asker", request, candidates) == slow
    assert vectorised_answers > 200  # the fast path really ran (reservations aside)
    assert vectorised_scores > 200  # and so did the plugins' own column scorers


def test_fast_path_stands_aside_for_unknown_nodes_and_reservations() -> None:
    cache = ClusterCache()
    ledger = GangLedger(cache.bump_node)
    cache.on_node_add(node("a", 8, 16, 0))
    request = ResourceVector({"cpu": 1000, "pods": 1})
    assert fastpath.fit_filter(cache, ledger, request, ["a", "ghost"]) is None
    ledger.reserve(Reservation("ns/g", "a", ResourceVector({"cpu": 1000})))
    assert fastpath.fit_filter(cache, ledger, request, ["a"]) is None
    assert fit_filter(cache, ledger, "ns/p", request, ["a", "ghost"])[1] == {
        "ghost": "node unknown to vulcan (not in its cache yet)"
    }
