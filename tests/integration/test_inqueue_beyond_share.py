"""Issue 31's soak (seed 2026): a Volcano Job's gang, Inqueue, whose minResources exceed its
queue's deserved share (the other queues' demand keeps that share down) cannot be allocated;
it must not keep its minResources in the queue's `inqueue` then, or every other gang of the
queue is refused at enqueue ("cannot hold minResources ... inqueue 10") although it fits the
free room and the share. It goes back to Pending (issue 48: the queue's books never hold
room for a gang that cannot use it). Once its share could hold it again, it is judged at enqueue
as any Pending gang is, and runs whole when its queue has the room.

Driven pass by pass against the embedded API server, binding as kube-scheduler would."""

from __future__ import annotations

from typing import Any

from core.kube.client import PODGROUPS, PODS, KubeClient
from tests.helpers import until
from tests.integration.test_queue_scheduling import (
    add_gang,
    add_nodes,
    add_queue,
    bind_reserved,
    started,
)

BIG = "default/big"


def _member(index: int) -> dict[str, Any]:
    """A pod of the job's task, as Volcano's job controller makes it once the group is Inqueue."""
    return {
        "metadata": {
            "name": f"big-worker-{index}",
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": "big"},
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                }
            ]
        },
    }


async def _delete_gang(client: KubeClient, name: str, members: int) -> None:
    for index in range(members):
        await client.delete(PODS, f"{name}-{index}", namespace="default", grace_period=0)
    await client.delete(PODGROUPS, name, namespace="default")


async def test_an_inqueue_gang_beyond_its_share_does_not_hold_its_queue(
    client: KubeClient,
) -> None:
    await add_nodes(client, 4)  # 16 cpu
    await add_queue(client, "qa", capability={"cpu": "12"})
    await add_queue(client, "qb")
    # qb runs 4 cpu: qa may have the other 12 (its capability).
    await add_gang(client, "b-run", "qb", members=1, cpu=4)
    gangs = await started(client, 1, 1)
    try:
        gangs.schedule_pass()
        assert await bind_reserved(client, gangs) == 1
        # The Job's PodGroup: minResources 10 cpu, within qa's capability and share: enqueued.
        owner = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "big",
            "uid": "0b7e5c7a-0000-4000-8000-000000000031",
            "controller": True,
        }
        await client.create(
            PODGROUPS,
            {
                "metadata": {"name": "big", "namespace": "default", "ownerReferences": [owner]},
                "spec": {"minMember": 5, "queue": "qa", "minResources": {"cpu": "10"}},
            },
        )
        await until(lambda: BIG in gangs.cache.podgroups and len(gangs.cache.pods) == 1)
        gangs.schedule_pass()
        await until(lambda: gangs.cache.podgroups[BIG].phase == "Inqueue")
        for index in range(5):
            await client.create(PODS, _member(index))
        # qb asks 8 more (4 + 8 = 12): with qa asking 13, each queue deserves 8 now.
        await add_gang(client, "b-wait", "qb", members=2, cpu=4)
        await add_gang(client, "a-small", "qa", members=1, cpu=3)
        await until(lambda: len(gangs.cache.pods) == 9)
        gangs.schedule_pass()
        assert gangs.queue_pass is not None
        assert gangs.queue_pass.model.shares["qa"].deserved.cpu == 8_000
        assert BIG not in gangs.admitted
        assert "queue qa cannot hold minResources within its share" in gangs.reasons[BIG]
        assert "back to Pending" in gangs.reasons[BIG]
        await until(lambda: gangs.cache.podgroups[BIG].phase == "Pending")
        assert gangs.queue_pass.model.shares["qa"].inqueue.is_zero()
        # The big gang cannot use qa's room at this share: a gang that fits takes it.
        assert "default/a-small" in gangs.admitted, gangs.reasons.get("default/a-small")
        assert await bind_reserved(client, gangs) == 1

        # qb's work goes: qa may hold 12 (its capability), enough for the big gang once a-small
        # is done (3 + 10 > 12 now): small work still fits beside a-small meanwhile.
        await _delete_gang(client, "b-run", 1)
        await _delete_gang(client, "b-wait", 2)
        await until(lambda: not any(k.startswith("default/b-") for k in gangs.cache.pods))
        await add_gang(client, "late", "qa", members=1, cpu=1)
        await until(lambda: "default/late-0" in gangs.cache.pods)
        gangs.schedule_pass()
        assert gangs.queue_pass.model.shares["qa"].deserved.cpu == 12_000
        assert BIG not in gangs.admitted
        assert "cpu need 10, realCapability 12, allocated 3" in gangs.reasons[BIG]
        assert "default/late" in gangs.admitted, gangs.reasons.get("default/late")
        assert await bind_reserved(client, gangs) == 1
        await _delete_gang(client, "a-small", 1)
        await until(lambda: "default/a-small-0" not in gangs.cache.pods)
        gangs.schedule_pass()
        assert BIG in gangs.admitted, gangs.reasons.get(BIG)  # 1 + 10 <= 12: placed whole
        assert len(gangs.ledger.of_group(BIG)) == 5
        assert await bind_reserved(client, gangs) == 5
    finally:
        await gangs.stop()
