"""The scheduling loop under a stream of changes: a change after a quiet spell gets a pass at
once, and passes stay `min_pass_interval` apart, so the changes heard in between share one; a
pass is followed by a rest of `idle_ratio` times its own duration (the verbs' share)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord, PodRecord
from extender.gang_options import GangOptions, PassPacing
from extender.gangs import GangScheduler
from extender.ledger import GangLedger


def node(name: str, rv: int) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": str(rv)},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
        }
    )


async def _commit(_args: Any) -> None:
    return None


async def loop_with(
    interval: float, idle_ratio: float = 0.0
) -> tuple[ClusterCache, GangScheduler, asyncio.Queue[float]]:
    cache = ClusterCache()
    passes: asyncio.Queue[float] = asyncio.Queue()
    gangs = GangScheduler(
        cache,
        GangLedger(cache.bump_node),
        None,
        _commit,
        # no timed passes: only changes wake the loop here
        options=GangOptions(
            pacing=PassPacing(period=3600.0, min_pass_interval=interval, idle_ratio=idle_ratio)
        ),
        observe_pass=passes.put_nowait,
    )
    cache.synced.set()
    gangs.start()
    return cache, gangs, passes


async def test_changes_within_the_interval_share_one_pass() -> None:
    cache, gangs, passes = await loop_with(3600.0)
    try:
        cache.on_node_add(node("n0", 1))
        await asyncio.wait_for(passes.get(), 10)  # the first change: a pass at once
        for rv in range(2, 200):
            cache.on_node_add(node(f"n{rv % 7}", rv))
            await asyncio.sleep(0)  # each change on its own: the loop hears every one
        for _ in range(50):
            await asyncio.sleep(0)
        assert passes.empty()  # all of them wait for the one pass after the interval
    finally:
        await gangs.stop()


async def test_without_an_interval_each_change_heard_gets_its_pass() -> None:
    cache, gangs, passes = await loop_with(0.0)
    try:
        for rv in range(1, 6):
            cache.on_node_add(node(f"n{rv}", rv))
            await asyncio.wait_for(passes.get(), 10)
    finally:
        await gangs.stop()


async def test_a_change_after_the_interval_is_served_at_once() -> None:
    cache, gangs, passes = await loop_with(0.05)
    try:
        cache.on_node_add(node("n0", 1))
        await asyncio.wait_for(passes.get(), 10)
        cache.on_node_add(node("n1", 2))  # within the interval: waits for it to end
        await asyncio.wait_for(passes.get(), 10)
    finally:
        await gangs.stop()


async def test_a_pass_leaves_the_loop_to_the_verbs_for_a_share_of_its_duration() -> None:
    cache, gangs, passes = await loop_with(0.0, idle_ratio=1e9)  # a rest of hours
    try:
        cache.on_node_add(node("n0", 1))
        assert await asyncio.wait_for(passes.get(), 10) > 0  # a quiet spell's change: at once
        cache.on_node_add(node("n1", 2))
        for _ in range(50):
            await asyncio.sleep(0)
        assert passes.empty()  # the next waits out its rest
    finally:
        await gangs.stop()


def pod(name: str, rv: int, node_name: str | None = None, group: str | None = None) -> PodRecord:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "resourceVersion": str(rv)}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return PodRecord({"metadata": meta, "spec": spec})


async def test_a_plain_pods_change_waits_for_the_delay_and_room_freed_does_not() -> None:
    cache, gangs, passes = await loop_with(0.0)
    gangs.options = dataclasses.replace(
        gangs.options, pacing=dataclasses.replace(gangs.options.pacing, plain_pod_delay=3600.0)
    )
    try:
        cache.on_node_add(node("n0", 1))
        await asyncio.wait_for(passes.get(), 10)
        cache.on_pod_add(pod("plain", 2))  # created, then bound: no gang's input
        cache.on_pod_update(pod("plain", 2), pod("plain", 3, "n0"))
        for _ in range(50):
            await asyncio.sleep(0)
        assert passes.empty()
        # Its room freed (deleted): a waiting gang may fit now, so a pass at once.
        cache.on_pod_delete(pod("plain", 3, "n0"))
        await asyncio.wait_for(passes.get(), 10)
        cache.on_pod_add(pod("member", 4, group="g"))  # a gang's member: at once
        await asyncio.wait_for(passes.get(), 10)
    finally:
        await gangs.stop()


async def test_a_plain_pods_change_is_served_once_the_delay_is_over() -> None:
    cache, gangs, passes = await loop_with(0.0)
    gangs.plain_pod_delay = 0.01
    try:
        cache.on_pod_add(pod("plain", 1))
        await asyncio.wait_for(passes.get(), 10)
    finally:
        await gangs.stop()
