"""A queue drains for its starving gang in hold phases and lets its small work in between
(backfill phases). bench/soak.py, seed 37 (soak-q4): beside the starving 30-cpu job, a
second enqueued job (10 cpu, enqueued on a promise whose victim another job took) waited for
the same share; a backfill phase lifted only the starving job's minResources from the queue's
`inqueue`, so the second's kept refusing a 2-cpu gang that fitted the queue's share at enqueue,
in every backfill phase, for 206 s. Every enqueued gang that waits only for the queue's share is
lifted now (the session's `plugins.framework.starvation_book.Starvation`).

Driven pass by pass against the embedded API server, binding as kube-scheduler would."""

from __future__ import annotations

import dataclasses

from core.kube.client import PODGROUPS, PODS, KubeClient
from extender.gangs import GangScheduler
from plugins.actions.starvation import HOLD_SECONDS
from tests.helpers import until
from tests.integration.test_queue_scheduling import (
    add_gang,
    add_nodes,
    add_queue,
    admit_until_stable,
    pod_body,
    started,
)
from tests.integration.test_starving_gang import _job_group, _pod

BIG = "default/big"
MID = "default/mid"
SMALL = "default/small"


def earlier(gangs: GangScheduler, queue: str, seconds: float) -> None:
    """The queue began to starve `seconds` earlier (its hold and backfill phases move on)."""
    wait = gangs.starving.queues[queue]
    gangs.starving.queues = {
        **gangs.starving.queues,
        queue: dataclasses.replace(wait, since=wait.since - seconds),
    }


async def test_a_backfill_phase_lifts_every_gang_waiting_for_the_queues_share(
    client: KubeClient,
) -> None:
    nodes = await add_nodes(client, 4)  # 16 cpu
    await add_queue(client, "qa", weight=3)
    await add_queue(client, "qb", weight=1)
    await add_gang(client, "b-run", "qb", members=1, cpu=2)
    gangs = await started(client, 1, 1)
    try:
        await admit_until_stable(client, gangs)
        # Two Volcano Jobs of qa enqueued while qa runs nothing: 10 + 6 of its 16 cpu.
        await _job_group(client, "big", "qa", cpu=10, members=5)
        await _job_group(client, "mid", "qa", cpu=6, members=3)
        await until(lambda: {BIG, MID} <= gangs.cache.podgroups.keys())
        gangs.schedule_pass()
        await gangs.status_writer.flush()
        await until(lambda: all(gangs.cache.podgroups[k].phase == "Inqueue" for k in (BIG, MID)))
        # Then work of qa that no gang admits (pods kube-scheduler bound): 9 cpu.
        taken = {pod.node for pod in gangs.cache.pods.values() if pod.node}
        free = [name for name in nodes if name not in taken]
        for name, cpu, node in zip(
            ("plain-a", "plain-b", "plain-c"), (4, 4, 1), free, strict=False
        ):
            await client.create(
                PODS, pod_body(name, {"scheduling.volcano.sh/queue-name": "qa"}, cpu, 0)
            )
            await client.bind_pod("default", name, node)
        # The jobs make their pods; qb asks 4 more (so qa deserves 12 of the 16, qb 4); a
        # small gang of qa comes last.
        for index in range(5):
            await client.create(PODS, _pod(f"big-{index}", "big", 2))
        for index in range(3):
            await client.create(PODS, _pod(f"mid-{index}", "mid", 2))
        await add_gang(client, "b-wait", "qb", members=2, cpu=2)
        await add_gang(client, "small", "qa", members=1, cpu=2)
        await until(lambda: len(gangs.cache.pods) == 15 and SMALL in gangs.cache.podgroups)
        await until(lambda: all(gangs.cache.pods[f"default/plain-{x}"].node for x in "abc"))

        gangs.schedule_pass()  # a hold phase: qa drains for big
        assert gangs.queue_pass is not None
        assert gangs.queue_pass.model.shares["qa"].deserved.cpu == 12_000
        assert gangs.starving.target("qa") == BIG
        assert "queue qa over its share" in gangs.reasons[BIG]
        assert "queue qa over its share" in gangs.reasons[MID]  # held, in its own words
        assert f"keeps the room its work frees for gang {BIG}" in gangs.reasons[SMALL]
        assert SMALL not in gangs.admitted

        # A backfill phase. mid (9 + 6 > 12) waits for qa's share beside big, its 6 cpu in
        # qa's `inqueue` with big's 10: small (2 + 9 <= 12) fits the share, and is judged at
        # enqueue without either (2 + 9 + 16 > 16 with them).
        earlier(gangs, "qa", HOLD_SECONDS + 1)
        gangs.schedule_pass()
        assert gangs.starving.target("qa") == BIG  # still the one the queue drains for
        assert set(gangs.starving.queues["qa"].waiters) == {BIG, MID}
        assert "queue qa over its share" in gangs.reasons[MID]
        assert SMALL in gangs.admitted, gangs.reasons.get(SMALL)
        assert BIG not in gangs.admitted and MID not in gangs.admitted

        # Back in a hold phase the waiting gangs stay noted (held, not decided), and leave
        # once decided otherwise: mid deleted.
        earlier(gangs, "qa", HOLD_SECONDS)
        gangs.schedule_pass()
        assert set(gangs.starving.queues["qa"].waiters) == {BIG, MID}
        for index in range(3):
            await client.delete(PODS, f"mid-{index}", namespace="default", grace_period=0)
        await client.delete(PODGROUPS, "mid", namespace="default")
        await until(lambda: MID not in gangs.cache.podgroups)
        gangs.schedule_pass()
        assert set(gangs.starving.queues["qa"].waiters) == {BIG}
    finally:
        await gangs.stop()
