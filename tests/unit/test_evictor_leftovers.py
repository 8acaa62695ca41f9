"""extender.evictor.Evictor: a member whose bind lands after its gang was evicted whole is
evicted too, before the next pass reads the cache (soak seed 20261126: an elastic member bound
while its gang of minMember 2 was preempted whole ran alone for minutes); once the gang is
admitted again (or gone) its members bind for the new placement and stay."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord
from core.resources import ResourceVector
from extender.evictor import Evictor
from extender.ledger import GangLedger
from plugins.model.victims import VictimUnit

_rv = itertools.count(1)
GROUP = "ns/g"


class Writer:
    """The gang writer's side the evictor uses: evictions and events, recorded."""

    def __init__(self) -> None:
        self.evicted: list[str] = []
        self.events: list[tuple[str, str]] = []

    async def evict(self, pod: PodRecord) -> str:
        self.evicted.append(pod.key)
        return "evicted"

    def group_event(self, group: PodGroupRecord, kind: str, reason: str, note: str) -> None:
        self.events.append((reason, note))

    def pod_event(self, pod: PodRecord, kind: str, reason: str, note: str) -> None:
        self.events.append((reason, note))


def member(name: str, node: str | None) -> PodRecord:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resourceVersion": str(next(_rv)),
        "annotations": {"scheduling.k8s.io/group-name": "g"},
    }
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": "Running"}})


async def test_a_member_bound_after_its_gang_was_evicted_whole_is_evicted_too() -> None:
    cache = ClusterCache()
    cache.on_node_add(
        NodeRecord(
            {
                "metadata": {"name": "n1", "resourceVersion": "1"},
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}},
            }
        )
    )
    group = PodGroupRecord(
        {
            "metadata": {"name": "g", "namespace": "ns", "resourceVersion": "1", "uid": "g1"},
            "spec": {"minMember": 2, "queue": "q"},
            "status": {"phase": "Running"},
        }
    )
    cache.on_podgroup_add(group)
    for name, node in (("m0", "n1"), ("m1", "n1"), ("m2", None)):
        cache.on_pod_add(member(name, node))
    writer = Writer()
    tasks: list[asyncio.Task[None]] = []
    pokes: list[int] = []

    def spawn(coro: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.ensure_future(coro))

    evictor = Evictor(cache, GangLedger(cache.bump_node), writer, spawn, lambda: pokes.append(1))  # type: ignore[arg-type]
    cache.pod_listeners.append(lambda key, pod, _old: evictor.pod_changed(key, pod))
    unit = VictimUnit(
        GROUP, "q", 0, ("ns/m0", "ns/m1"), ResourceVector({"cpu": 2000}), False, False, True, ""
    )
    evictor.evict_units(cache.live_view(), group, 10, "preempt", [unit])
    await asyncio.gather(*tasks)
    assert sorted(writer.evicted) == ["ns/m0", "ns/m1"]

    # m2's bind was on its way: it lands now, after its gang was evicted whole.
    cache.on_pod_add(member("m2", "n1"))
    assert pokes  # a pass is asked for
    evictor.evict_leftovers()
    await asyncio.gather(*tasks)
    assert writer.evicted[-1] == "ns/m2" and cache.pods["ns/m2"].deleting
    assert evictor.why_evicted("ns/m2") == evictor.why_evicted("ns/m0")
    assert ("Preempted", evictor.why_evicted("ns/m0")) in writer.events

    # Admitted again: its members bind for the new placement and stay.
    evictor.forget_whole_eviction(GROUP)
    cache.on_pod_add(member("m3", "n1"))
    evictor.evict_leftovers()
    await asyncio.gather(*tasks)
    assert "ns/m3" not in writer.evicted and not cache.pods["ns/m3"].deleting
