"""Enqueue refusals kept on their queue (issue 37: `bench/queue_admission.py`'s backlog): a
gang its full queue refuses is not decided again on passes where neither it nor its queue
changed — its queue's numbers, pods and groups — so thousands of them cost a pass nothing;
and it is decided again, and admitted, the moment any of those changes, including the one
change the queue's numbers do not show: lower-priority work taking the place of work of its
own priority (which the promise of preemption could answer).

Driven pass by pass against the embedded API server, binding as kube-scheduler would."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from core.kube.client import PODS, KubeClient
from extender.gangs import GangScheduler
from plugins.framework.memo import Memo
from tests.helpers import until
from tests.integration.test_queue_scheduling import (
    add_gang,
    add_nodes,
    add_queue,
    bind_reserved,
    pod_body,
    started,
)


@contextmanager
def decided(gangs: GangScheduler) -> Iterator[list[str]]:
    """The groups each pass decided (what the memo kept is not decided again), in order."""
    seen: list[str] = []
    original = Memo.record

    def record(memo: Memo, ssn: Any, decision: Any, *args: Any) -> bool:
        seen.append(decision.key)
        return original(memo, ssn, decision, *args)

    Memo.record = record  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Memo.record = original  # type: ignore[method-assign]


def plain_pod(name: str, queue: str, priority: int, cpu: int) -> dict[str, Any]:
    """A pod of no gang, in `queue` by its annotation."""
    return pod_body(name, {"scheduling.volcano.sh/queue-name": queue}, cpu, priority)


async def test_a_full_queues_waiting_gangs_are_decided_again_only_when_their_queue_changes(
    client: KubeClient,
) -> None:
    await add_nodes(client, 4)  # 16 cpu
    await add_queue(client, "capped", capability={"cpu": "2"})
    await add_queue(client, "other")
    for index in range(2):
        await add_gang(client, f"run-{index}", "capped")
    gangs = await started(client, 2, 2)
    try:
        gangs.schedule_pass()
        assert await bind_reserved(client, gangs) == 2
        for index in range(3):
            await add_gang(client, f"wait-{index}", "capped")
        await until(lambda: len(gangs.cache.podgroups) == 5 and len(gangs.cache.pods) == 5)
        waiting = {f"default/wait-{index}" for index in range(3)}
        running = ("default/run-0", "default/run-1")
        with decided(gangs) as seen:
            gangs.schedule_pass()
            assert waiting <= set(seen)
            for key in waiting:
                assert "queue capped cannot hold minResources" in gangs.reasons[key]
            # The running gangs' phase (Running, written by that pass) comes back: nothing a
            # waiting gang's refusal read changed (the queue's numbers, its lower-priority
            # work), so none is decided again.
            await gangs.status_writer.flush()
            await until(lambda: all(gangs.cache.podgroups[k].phase == "Running" for k in running))
            seen.clear()
            gangs.schedule_pass()
            assert not waiting & set(seen)
            # Work in another queue comes and is placed: nothing of `capped` changed.
            await add_gang(client, "elsewhere", "other", members=2)
            await until(lambda: "default/elsewhere" in gangs.cache.podgroups)
            await until(lambda: len(gangs.cache.pods_by_group.get("default/elsewhere", ())) == 2)
            seen.clear()
            gangs.schedule_pass()
            assert "default/elsewhere" in gangs.admitted
            assert not waiting & set(seen)
            assert await bind_reserved(client, gangs) == 2
            seen.clear()
            gangs.schedule_pass()
            assert not waiting & set(seen)
            # A running gang of `capped` ends: its queue changed, the first in line goes.
            await client.delete(PODS, "run-0-0", namespace="default", grace_period=0)
            await until(lambda: "default/run-0-0" not in gangs.cache.pods)
            seen.clear()
            gangs.schedule_pass()
            assert "default/wait-0" in seen  # the others read what they read before
            assert gangs.admitted & waiting == {"default/wait-0"}
    finally:
        await gangs.stop()


async def test_lower_priority_work_in_its_place_lets_a_refused_gang_preempt(
    client: KubeClient,
) -> None:
    """A 2-cpu queue holds a plain pod of priority 100; a gang of priority 50 waits (it may
    not preempt its betters). That pod goes and one of priority 0 of the same size runs in
    its place between two passes: the queue's numbers are the same, but the gang now has
    something to preempt, and must be decided again to see it."""
    await add_nodes(client, 4)
    await add_queue(client, "capped", capability={"cpu": "2"})
    await client.create(PODS, plain_pod("high", "capped", 100, 2))
    await client.bind_pod("default", "high", "node-0")
    await add_gang(client, "urgent", "capped", cpu=2, priority=50)
    gangs = await started(client, 2, 1)
    try:
        await until(lambda: gangs.cache.pods["default/high"].node == "node-0")
        gangs.schedule_pass()
        assert "queue capped cannot hold minResources" in gangs.reasons["default/urgent"]
        await gangs.status_writer.flush()
        gangs.schedule_pass()
        assert "default/urgent" not in gangs.admitted
        await client.delete(PODS, "high", namespace="default", grace_period=0)
        await client.create(PODS, plain_pod("low", "capped", 0, 2))
        await client.bind_pod("default", "low", "node-1")
        await until(
            lambda: (
                "default/high" not in gangs.cache.pods
                and gangs.cache.pods.get("default/low") is not None
                and gangs.cache.pods["default/low"].node == "node-1"
            )
        )
        gangs.schedule_pass()
        assert "default/urgent" in gangs.admitted
        assert gangs.ledger.reservation_of("default/urgent-0") is not None
    finally:
        await gangs.stop()
