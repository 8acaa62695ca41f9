"""extender.member_release.MemberRelease.release_late: members that reach an admitted gang
behind the queue-allocation gate (a dependent task's pods, elastic members, replacements, an
adopted gang's members) lose it, one write per pod version; members parked for their victims'
room keep it until the room is free."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord
from core.resources import ResourceVector
from extender.ledger import GangLedger, Reservation
from extender.member_release import MemberRelease
from extender.slots import SlotWatch
from plugins.model.gang import GangView, gang_view

NS = "team-a"
GATE = "scheduling.volcano.sh/queue-allocation-gate"


def pod(
    name: str, *, gates: tuple[str, ...] = (), node: str | None = None, rv: str = "1"
) -> PodRecord:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    }
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node:
        spec["nodeName"] = node
    meta = {
        "name": name,
        "namespace": NS,
        "resourceVersion": rv,
        "annotations": {"scheduling.k8s.io/group-name": "train"},
    }
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": "Pending"}})


class Writer:
    """What MemberRelease asks of the GangWriter: the admission write, recorded."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str, tuple[str, ...]]] = []
        self.fail = False

    async def admit_pod(self, pod: PodRecord, stamp: str) -> bool:
        self.written.append((pod.key, pod.rv, pod.gates))
        return not self.fail


class Harness:
    def __init__(self, pods: list[PodRecord]) -> None:
        self.cache = ClusterCache()
        self.cache.on_node_add(
            NodeRecord({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "64"}}})
        )
        self.cache.on_podgroup_add(
            PodGroupRecord(
                {"metadata": {"name": "train", "namespace": NS}, "spec": {"minMember": 1}}
            )
        )
        for p in pods:
            self.cache.on_pod_add(p)
        self.ledger = GangLedger()
        self.slots = SlotWatch(self.cache, self.ledger)
        self.writer = Writer()
        self.spawned: list[Coroutine[Any, Any, None]] = []
        self.release = MemberRelease(
            self.cache,
            self.slots,
            self.writer,
            self.spawned.append,
            writes=True,  # type: ignore[arg-type]
        )

    def view(self) -> GangView:
        view = gang_view(self.cache.snapshot(), f"{NS}/train", allocated=set())
        assert view is not None
        return view

    async def run_spawned(self) -> None:
        work, self.spawned[:] = list(self.spawned), []
        await asyncio.gather(*work)


async def test_only_gated_pending_members_are_released_once_per_version() -> None:
    h = Harness(
        [
            pod("bound", node="n1"),
            pod("late", gates=(GATE,)),
            pod("both", gates=("example.com/wait", GATE)),
            pod("users", gates=("example.com/wait",)),
            pod("free"),
        ]
    )
    assert h.release.release_late(h.view(), slotted_only=False)
    await h.run_spawned()
    assert sorted(key for key, _, _ in h.writer.written) == [f"{NS}/both", f"{NS}/late"]
    # The same versions again (the cache has not seen the writes yet): no second write, and
    # the gang is still waiting on them.
    assert h.release.release_late(h.view(), slotted_only=False)
    assert h.spawned == []


async def test_a_failed_write_is_tried_again_by_the_next_call() -> None:
    h = Harness([pod("late", gates=(GATE,))])
    h.writer.fail = True
    h.release.release_late(h.view(), slotted_only=False)
    await h.run_spawned()
    h.writer.fail = False
    h.release.release_late(h.view(), slotted_only=False)
    await h.run_spawned()
    assert [key for key, _, _ in h.writer.written] == [f"{NS}/late", f"{NS}/late"]


async def test_a_new_version_of_a_still_gated_member_is_written_again() -> None:
    h = Harness([pod("late", gates=(GATE,))])
    h.release.release_late(h.view(), slotted_only=False)
    await h.run_spawned()
    newer = pod("late", gates=(GATE,), rv="2")  # changed by someone else, gate still on
    h.cache.on_pod_update(h.cache.pods[newer.key], newer)
    h.release.pod_changed(newer.key, newer)
    h.release.release_late(h.view(), slotted_only=False)
    await h.run_spawned()
    assert [rv for _, rv, _ in h.writer.written] == ["1", "2"]


async def test_a_member_parked_for_its_victims_room_keeps_its_gate() -> None:
    h = Harness([pod("late", gates=(GATE,))])
    h.slots.park(f"{NS}/late", f"{NS}/train")
    assert not h.release.release_late(h.view(), slotted_only=False)
    assert h.spawned == []


async def test_nothing_is_released_when_no_member_is_gated() -> None:
    h = Harness([pod("a"), pod("b", node="n1")])
    assert not h.release.release_late(h.view(), slotted_only=False)
    assert h.spawned == []


async def test_with_the_gang_plugin_only_members_holding_a_slot_are_released() -> None:
    """Admitted members made again under a reserved name (or whose write was lost) go; the
    others are elastic members, placed by the pass one at a time (`plugins.actions.backfill`)."""
    h = Harness([pod("slotted", gates=(GATE,)), pod("elastic", gates=(GATE,))])
    h.ledger.reserve(Reservation(f"{NS}/slotted", "n1", ResourceVector(), f"{NS}/train"))
    assert h.release.release_late(h.view(), slotted_only=True)
    await h.run_spawned()
    assert [key for key, _, _ in h.writer.written] == [f"{NS}/slotted"]
