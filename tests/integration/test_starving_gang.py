"""Issue 31's soak (seed 2026, t=1096 s on): a big Volcano Job's gang, Inqueue, whose minimum
fits its queue's deserved share but not beside the queue's running work, waits for the queue to
drain. The queue's later gangs and the elastic members of its running gangs must not take each
bit of room that frees (they did: the queue's allocated grew 28 -> 35 cpu while the 36-cpu job
waited, and its `inqueue` refused every new gang of the queue for good). The queue is held for
it, as Volcano's big-job reservation holds a target job's room (`plugins.actions.starvation`); it
runs whole once the room is there.

Driven pass by pass against the embedded API server, binding as kube-scheduler would."""

from __future__ import annotations

from typing import Any

from core.kube.client import PODGROUPS, PODS, KubeClient
from extender.debug_view import queues_view
from tests.helpers import until
from tests.integration.test_queue_scheduling import (
    add_gang,
    add_nodes,
    add_queue,
    admit_until_stable,
    bind_reserved,
    started,
)

BIG = "default/big"
SMALL = "default/small"


async def _job_group(client: KubeClient, name: str, queue: str, *, cpu: int, members: int) -> None:
    """A Volcano Job's PodGroup: its pods are made once the group is Inqueue."""
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": name,
        "uid": f"0b7e5c7a-0000-4000-8000-{len(name):04d}{ord(name[0]):08d}",
        "controller": True,
    }
    await client.create(
        PODGROUPS,
        {
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [owner]},
            "spec": {"minMember": members, "queue": queue, "minResources": {"cpu": str(cpu)}},
        },
    )


def _pod(name: str, group: str, cpu: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}},
                }
            ]
        },
    }


async def test_a_starving_gang_gets_the_room_its_queue_frees(client: KubeClient) -> None:
    await add_nodes(client, 4)  # 16 cpu
    await add_queue(client, "qa", weight=3)
    await add_queue(client, "qb", weight=1)
    await add_gang(client, "b-run", "qb", members=1, cpu=2)
    await add_gang(client, "r1", "qa", members=1, cpu=2)
    await add_gang(client, "r2", "qa", members=1, cpu=2)
    gangs = await started(client, 3, 3)
    try:
        await admit_until_stable(client, gangs)  # qa runs 4 cpu, qb 2
        # qb asks 4 more: with qa asking more than 12, qa deserves 12 and qb 4.
        await add_gang(client, "b-wait", "qb", members=2, cpu=2)
        await _job_group(client, "big", "qa", cpu=10, members=5)
        await _job_group(client, "small", "qa", cpu=2, members=1)
        await until(lambda: {BIG, SMALL} <= gangs.cache.podgroups.keys())
        gangs.schedule_pass()
        await until(lambda: all(gangs.cache.podgroups[k].phase == "Inqueue" for k in (BIG, SMALL)))
        # Their job makes the pods; a running gang of qa gets one more (elastic) member.
        for index in range(5):
            await client.create(PODS, _pod(f"big-{index}", "big", 2))
        await client.create(PODS, _pod("small-0", "small", 2))
        await client.create(PODS, _pod("r2-1", "r2", 2))
        await until(lambda: len(gangs.cache.pods) == 12)
        gangs.schedule_pass()
        assert gangs.queue_pass is not None
        assert gangs.queue_pass.model.shares["qa"].deserved.cpu == 12_000
        # big (older) needs 10 of qa's 12 beside the 4 running: it waits for qa's room, and
        # neither the younger gang nor the elastic member takes what frees meanwhile.
        assert BIG not in gangs.admitted
        assert "queue qa over its share" in gangs.reasons[BIG]
        assert SMALL not in gangs.admitted
        assert f"keeps the room its work frees for gang {BIG}" in gangs.reasons[SMALL]
        assert gangs.ledger.reservation_of("default/r2-1") is None
        # Passes where nothing changes keep big elected, and its hold's phases keep counting
        # from when qa began to starve (were it dropped and elected again, the hold would start
        # over in a hold phase each time, and the queue's elastic members never grow).
        since = gangs.starving.since("qa", -1.0)
        assert since > 0
        for _ in range(3):
            gangs.schedule_pass()
            assert gangs.starving.target("qa") == BIG
            assert gangs.starving.since("qa", -1.0) == since
            assert f"keeps the room its work frees for gang {BIG}" in gangs.reasons[SMALL]
        view = queues_view(gangs)
        assert view is not None
        row = next(q for q in view["queues"] if q["name"] == "qa")
        assert row["starving"]["gang"] == BIG and row["starving"]["holding"] is True
        # qb (deserving 4, holding 2) starves for b-wait's 4 as well.
        assert next(q for q in view["queues"] if q["name"] == "qb")["starving"]["gang"] == (
            "default/b-wait"
        )

        await client.delete(PODS, "r1-0", namespace="default", grace_period=0)
        await client.delete(PODGROUPS, "r1", namespace="default")
        await until(lambda: "default/r1-0" not in gangs.cache.pods)
        gangs.schedule_pass()
        assert BIG in gangs.admitted, gangs.reasons.get(BIG)
        assert len(gangs.ledger.of_group(BIG)) == 5
        assert await bind_reserved(client, gangs) == 5
        # qa holds its share now: the others wait on it, no longer on big.
        gangs.schedule_pass()
        assert SMALL not in gangs.admitted
        assert "queue qa over its share" in gangs.reasons[SMALL]
        assert gangs.ledger.reservation_of("default/r2-1") is None
    finally:
        await gangs.stop()
