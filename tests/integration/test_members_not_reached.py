"""Issue 48 item 4 against the embedded API server: a gang admitted whose members never reach
filter (kube-scheduler refused them before asking the extender) loses its admission and its
reserved room after --member-reach-timeout, with a Warning event and a condition saying why,
and backs off; one whose member came, or whose members kube-scheduler has not tried yet, keeps
its admission. Passes driven one at a time."""

from __future__ import annotations

from typing import Any

from core.kube.client import EVENTS, PODGROUPS, PODS, STRATEGIC_MERGE_PATCH, KubeClient
from extender.gang_options import GangOptions
from extender.gangs import GangScheduler
from tests.helpers import member_filter, pod_info, until
from tests.integration.controller_harness import eventually
from tests.integration.test_gang_scheduler import add_gpu_node, started, worker

STUCK = "default/stuck"
NODES = ["gpu-0", "gpu-1"]


class Clock:
    """The scheduler's monotonic clock, moved by the test (the timeout without waiting it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def condition_messages(client: KubeClient, name: str) -> str:
    """The messages of PodGroup default/`name`'s conditions, joined."""
    group = await client.get(PODGROUPS, name, "default")
    found = (group.get("status") or {}).get("conditions") or []
    return " ".join(c.get("message", "") for c in found)


async def _setup(client: KubeClient, clock: Clock) -> tuple[GangScheduler, list[dict[str, Any]]]:
    for name in NODES:
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "stuck", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    pods = [await client.create(PODS, worker("stuck", index)) for index in range(2)]
    options = GangOptions(member_reach_timeout=30, backoff=60)
    cache, gangs = await started(client, options=options, clock=clock)
    await until(lambda: len(cache.pods) == 2 and len(cache.podgroups) == 1)
    gangs.schedule_pass()
    assert STUCK in gangs.admitted and len(gangs.ledger.of_group(STUCK)) == 2
    return gangs, pods


async def turn_away(client: KubeClient, pod: dict[str, Any], message: str) -> None:
    """kube-scheduler's record of a failed attempt: PodScheduled False, Unschedulable."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    await client.patch(
        PODS,
        pod["metadata"]["name"],
        {"status": {"conditions": [{**condition, "message": message}]}},
        "default",
        subresource="status",
        content_type=STRATEGIC_MERGE_PATCH,
    )


CLAIM = '0/2 nodes are available: persistentvolumeclaim "data" not found.'


async def test_a_gang_none_of_whose_members_came_gives_its_room_back_and_says_why(
    client: KubeClient,
) -> None:
    clock = Clock()
    gangs, pods = await _setup(client, clock)
    try:
        # kube-scheduler tried a member and refused it before asking the extender.
        await turn_away(client, pods[0], CLAIM)
        await until(lambda: gangs.cache.pods[f"default/{pods[0]['metadata']['name']}"].refusal)
        clock.now += 29.9
        gangs.schedule_pass()
        assert STUCK in gangs.admitted
        clock.now += 0.1
        gangs.schedule_pass()
        assert STUCK not in gangs.admitted
        assert gangs.ledger.of_group(STUCK) == []
        # The next pass tells why it waits, until when (filter says the same to its members).
        gangs.schedule_pass()
        why = gangs.reasons[STUCK]
        assert "none of its members reached vulcan's filter within 30s" in why
        assert "may be admitted again after" in why
        await gangs.status_writer.flush()

        conditions = await eventually(lambda: condition_messages(client, "stuck"))
        assert "none of its members reached" in conditions

        async def warned() -> list[dict[str, Any]]:
            events = (await client.list(EVENTS, "default"))["items"]
            return [
                e
                for e in events
                if e.get("reason") == "MembersNotReached" and e.get("type") == "Warning"
            ]

        [event] = await eventually(warned)
        assert event["regarding"]["name"] == "stuck" and event["regarding"]["kind"] == "PodGroup"
    finally:
        await gangs.stop()


async def test_a_gang_whose_member_came_keeps_its_admission(client: KubeClient) -> None:
    clock = Clock()
    gangs, pods = await _setup(client, clock)
    try:
        # One member reaches filter (the other may be held up by anything): vulcan is asked.
        assert member_filter(gangs, pod_info(pods[0]), NODES)[0]
        clock.now += 60
        gangs.schedule_pass()
        assert STUCK in gangs.admitted and len(gangs.ledger.of_group(STUCK)) == 2
    finally:
        await gangs.stop()


async def test_a_gang_whose_members_were_not_tried_yet_keeps_its_admission(
    client: KubeClient,
) -> None:
    """A busy kube-scheduler may take longer than the timeout to try them again: members
    last refused by vulcan (before their admission) are still in its queue, not turned away."""
    clock = Clock()
    gangs, pods = await _setup(client, clock)
    try:
        for pod in pods:
            await turn_away(client, pod, f"0/2 nodes are available: 2 gang {STUCK}: waiting")
        await until(lambda: all(p.refusal for p in gangs.cache.pods.values()))
        clock.now += 60
        gangs.schedule_pass()
        assert STUCK in gangs.admitted and len(gangs.ledger.of_group(STUCK)) == 2
    finally:
        await gangs.stop()
