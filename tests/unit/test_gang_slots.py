"""extender.slots.SlotWatch: which parked members can go now, what a pipelined member waits
for, and filter's short wait for the cache to catch up (issue 16). Also the cache telling its
pod listeners, the hollow kubelet's termination time, and Volcano's Pipelined task status."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord
from core.resources import ResourceVector
from extender.ledger import GangLedger, Reservation
from extender.slots import SlotWatch
from plugins.model import gang
from sim.kubelet.pods import PodView, termination_delay

_rv = itertools.count(1)
GROUP = "ns/small-0"


def node(name: str, cpu: str = "2") -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": str(next(_rv))},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}},
        }
    )


def pod(
    name: str,
    node_name: str | None = None,
    *,
    group: str | None = None,
    deleting: bool = False,
    phase: str = "Running",
) -> PodRecord:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": str(next(_rv))}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T10:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def podgroup(name: str = "small-0") -> PodGroupRecord:
    return PodGroupRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(next(_rv))},
            "spec": {"minMember": 1, "queue": "small"},
            "status": {"phase": "Inqueue"},
        }
    )


CPU = ResourceVector({"cpu": 1000})


@pytest.fixture
def full() -> tuple[ClusterCache, GangLedger, SlotWatch]:
    """Node n1 (2 cpu) full with big-0 and big-1; small-0's member reserved there."""
    cache = ClusterCache()
    ledger = GangLedger(cache.bump_node)
    watch = SlotWatch(cache, ledger)
    cache.on_node_add(node("n1"))
    cache.on_node_add(node("n2", cpu="0"))
    cache.on_podgroup_add(podgroup())
    cache.on_pod_add(pod("big-0", "n1"))
    cache.on_pod_add(pod("big-1", "n1"))
    cache.on_pod_add(pod("small-0", group="small-0", phase="Pending"))
    ledger.reserve(Reservation("ns/small-0", "n1", CPU, GROUP))
    return cache, ledger, watch


def test_a_parked_member_is_due_only_once_its_slot_is_free(full: Any) -> None:
    cache, _, watch = full
    watch.park("ns/small-0", GROUP)
    assert watch.due({GROUP}) == []  # big-0 and big-1 still hold n1
    cache.on_pod_update(cache.pods["ns/big-0"], pod("big-0", "n1", deleting=True))
    assert watch.due({GROUP}) == []  # terminating still holds its room
    cache.on_pod_delete(cache.pods["ns/big-0"])
    assert watch.due({GROUP}) == ["ns/small-0"]
    assert "ns/small-0" not in watch  # taken off: released once
    assert watch.due({GROUP}) == []


def test_parked_members_of_groups_no_longer_admitted_or_already_bound_are_dropped(
    full: Any,
) -> None:
    cache, _, watch = full
    watch.park("ns/small-0", GROUP)
    assert watch.due(set()) == [] and len(watch) == 0
    watch.park("ns/small-0", GROUP)
    cache.on_pod_update(
        cache.pods["ns/small-0"], pod("small-0", "n2", group="small-0", phase="Pending")
    )
    assert watch.due({GROUP}) == [] and len(watch) == 0


def test_a_member_refused_before_the_cache_saw_it_waits_for_it(full: Any) -> None:
    cache, _, watch = full
    watch.park("ns/small-9", GROUP)
    assert watch.due({GROUP}) == [] and "ns/small-9" in watch
    cache.on_pod_delete(cache.pods["ns/big-0"])  # room somewhere, for a member without a slot
    cache.on_pod_add(pod("small-9", group="small-0", phase="Pending"))
    assert watch.due({GROUP}) == []  # n1's free cpu is small-0's slot: no room for small-9
    cache.on_pod_delete(cache.pods["ns/big-1"])
    assert watch.due({GROUP}) == ["ns/small-9"]


def test_a_pipelined_member_says_which_victims_it_waits_for(full: Any) -> None:
    cache, _, watch = full
    watch.pipeline(GROUP, "ns/small-0", "n1", ["ns/big-1"])
    # The eviction is only asked for: the recorded victim is named.
    assert watch.waiting_members(GROUP) == {"ns/small-0": ("n1", ["ns/big-1"])}
    reason = watch.waiting_reason(GROUP, "n1", ["ns/big-1"])
    assert reason == "gang ns/small-0: waiting for ns/big-1 to terminate on n1"
    cache.on_pod_update(cache.pods["ns/big-1"], pod("big-1", "n1", deleting=True))
    assert watch.waiting_members(GROUP) == {"ns/small-0": ("n1", ["ns/big-1"])}
    cache.on_pod_delete(cache.pods["ns/big-1"])
    assert watch.waiting_members(GROUP) == {}  # the room is free: no longer pipelined


def test_blockers_fall_back_to_terminating_pods_and_only_when_they_would_make_room(
    full: Any,
) -> None:
    cache, ledger, watch = full
    assert watch.blockers("ns/small-0") is None  # nothing terminating: not pipelined
    cache.on_pod_update(cache.pods["ns/big-0"], pod("big-0", "n1", deleting=True))
    assert watch.blockers("ns/small-0") == ("n1", ["ns/big-0"])
    # Another member holds the room big-0 frees: big-0 going is not enough.
    ledger.reserve(Reservation("ns/small-1", "n1", CPU, "ns/small-1"))
    assert watch.blockers("ns/small-0") is None
    many = watch.waiting_reason(GROUP, "n1", [f"ns/big-{i}" for i in range(5)])
    assert many.endswith("ns/big-0, ns/big-1, ns/big-2 and 2 more to terminate on n1")


async def test_wait_until_free_returns_when_the_cache_sees_the_room_freed(full: Any) -> None:
    cache, _, watch = full
    waiting = asyncio.create_task(watch.wait_until_free("ns/small-0", 5.0))
    await asyncio.sleep(0)
    assert not waiting.done()
    cache.on_pod_update(cache.pods["ns/big-0"], pod("big-0", "n1", deleting=True))
    await asyncio.sleep(0)
    assert not waiting.done()  # a change that frees nothing: still waiting
    cache.on_pod_delete(cache.pods["ns/big-0"])
    assert await asyncio.wait_for(waiting, 1.0) is True


async def test_wait_until_free_gives_up_after_its_timeout(full: Any) -> None:
    _, _, watch = full
    assert await watch.wait_until_free("ns/small-0", 0.01) is False
    assert await watch.wait_until_free("ns/nobody", 1.0) is False  # holds no slot


def test_pod_listeners_hear_changes_after_the_accounting() -> None:
    cache = ClusterCache()
    cache.on_node_add(node("n1"))
    heard: list[tuple[str, int]] = []
    cache.pod_listeners.append(
        lambda key, record, old: heard.append(
            (key, cache.node_requested.get("n1", ResourceVector()).cpu)
        )
    )
    cache.on_pod_add(pod("a", "n1"))
    cache.on_pod_delete(cache.pods["ns/a"])
    assert heard == [("ns/a", 1000), ("ns/a", 0)]


def test_terminating_pods_hold_their_node_but_not_their_queue() -> None:
    cache = ClusterCache()
    cache.on_node_add(node("n1"))
    cache.on_pod_add(pod("a", "n1"))
    queue = next(iter(cache.queue_allocated))
    cache.on_pod_update(cache.pods["ns/a"], pod("a", "n1", deleting=True))
    assert cache.node_requested["n1"].cpu == 1000
    assert cache.queue_allocated.get(queue, ResourceVector()).cpu == 0
    assert cache.recompute() == (cache.node_requested, cache.queue_allocated)


def test_a_pipelined_member_is_volcanos_pipelined_task() -> None:
    member = pod("small-0", group="small-0", phase="Pending")
    assert gang.task_status(member, allocated={member.key}) == gang.ALLOCATED
    assert gang.task_status(member, {member.key}, (), {member.key}) == gang.PIPELINED


@pytest.mark.parametrize(
    ("annotation", "grace", "expected"),
    [(None, 30, 0.0), ("5s", 30, 5.0), ("forever", 20, 20.0), ("60s", 20, 20.0), ("5s", 0, 0.0)],
)
def test_termination_takes_the_annotated_time_at_most_the_grace_period(
    annotation: str | None, grace: int, expected: float
) -> None:
    meta: dict[str, Any] = {
        "name": "p",
        "namespace": "ns",
        "deletionTimestamp": "2026-11-24T10:00:00Z",
        "deletionGracePeriodSeconds": grace,
        "annotations": {},
    }
    if annotation is not None:
        meta["annotations"]["vulcan.sh/sim-termination-duration"] = annotation
    view = PodView({"metadata": meta, "spec": {"nodeName": "n1"}, "status": {}})
    assert termination_delay(view) == expected
