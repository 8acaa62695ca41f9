"""Issue 48 items 3 and 4 against the embedded API server: a PodGroup is enqueued before its pods
exist (Volcano's enqueue); one whose pods are still not made --member-reach-timeout later gives
its queue's room back (back to Pending, a Warning event, a condition saying why) and backs off;
once its pods come it is enqueued again and placed whole. Passes driven one at a time."""

from __future__ import annotations

from typing import Any

from core.kube.client import EVENTS, PODGROUPS, PODS, KubeClient
from extender.gang_options import GangOptions
from tests.helpers import until
from tests.integration.controller_harness import eventually
from tests.integration.test_gang_scheduler import add_gpu_node, started, worker
from tests.integration.test_members_not_reached import Clock, condition_messages

EARLY = "default/early"


async def _phase(client: KubeClient) -> str:
    group = await client.get(PODGROUPS, "early", "default")
    return str((group.get("status") or {}).get("phase") or "Pending")


async def test_a_podgroup_whose_pods_never_come_gives_its_room_back_then_runs_when_they_do(
    client: KubeClient,
) -> None:
    for name in ("gpu-0", "gpu-1"):
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS,
        {
            "metadata": {"name": "early", "namespace": "default"},
            "spec": {"minMember": 2, "minResources": {"cpu": "2"}},
        },
    )
    clock = Clock()
    options = GangOptions(member_reach_timeout=30, backoff=0.2)
    cache, gangs = await started(client, options=options, clock=clock)
    try:
        await until(lambda: len(cache.podgroups) == 1)
        gangs.schedule_pass()  # enqueued on its minResources, no pods yet
        await gangs.status_writer.flush()
        assert await _phase(client) == "Inqueue"
        await until(lambda: cache.podgroups[EARLY].phase == "Inqueue")

        gangs.schedule_pass()  # Inqueue, waiting for its pods: timed from here
        clock.now += 29.9
        gangs.schedule_pass()
        await gangs.status_writer.flush()
        assert await _phase(client) == "Inqueue"
        clock.now += 0.1
        gangs.schedule_pass()  # 30 s without its pods: back to Pending
        await gangs.status_writer.flush()
        assert await _phase(client) == "Pending"
        why = gangs.reasons[EARLY]
        assert "its pods were not all made within 30s of its enqueue" in why
        assert "the room it held in queue default is released" in why

        conditions = await eventually(lambda: condition_messages(client, "early"))
        assert "its pods were not all made" in conditions

        async def warned() -> list[dict[str, Any]]:
            events = (await client.list(EVENTS, "default"))["items"]
            return [e for e in events if e.get("reason") == "MembersNotMade"]

        [event] = await eventually(warned)
        assert event["type"] == "Warning" and event["regarding"]["name"] == "early"

        # Its pods come: once its backoff is over it is enqueued again and placed whole.
        for index in range(2):
            await client.create(PODS, worker("early", index))
        await until(lambda: len(cache.pods) == 2 and cache.podgroups[EARLY].phase == "Pending")

        async def admitted() -> bool:
            gangs.schedule_pass()
            await gangs.status_writer.flush()
            return EARLY in gangs.admitted

        assert await eventually(admitted)
        assert len(gangs.ledger.of_group(EARLY)) == 2
    finally:
        await gangs.stop()
        await cache.stop()
