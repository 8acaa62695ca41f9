"""Issue 31's 30-min soak (seed 2026): a Volcano Job with `minAvailable: 1` and tasks t0 (2 pods,
1 cpu, done in 9 s) and t1 (1 pod, 2 cpu) ran its t0 pods to Succeeded while t1's pod waited;
its PodGroup then read Completed and t1's pod stayed Pending for good (28 stall violations,
"PodGroup phase=Completed", job-200 / job-595 / job-648). The pass skipped admission for any
gang with a finished member (`not view.completed` on a count), so a gang that had lost its
admission (its bound members finished) was never admitted again for the members it still has.
Only a gang whose every member finished is done.

Driven pass by pass against the embedded API server, binding as kube-scheduler would."""

from __future__ import annotations

from typing import Any

from core.kube.client import PODGROUPS, PODS, KubeClient
from tests.helpers import until
from tests.integration.test_queue_scheduling import add_nodes, add_queue, bind_reserved, started

KEY = "default/job-a"


def _pod(name: str, task: str, cpu: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {
                "scheduling.k8s.io/group-name": "job-a",
                "volcano.sh/task-spec": task,
            },
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


async def test_a_gang_with_finished_members_still_places_the_ones_waiting(
    client: KubeClient,
) -> None:
    await add_nodes(client, 2)
    await add_queue(client, "qa")
    await client.create(
        PODGROUPS,
        {
            "metadata": {"name": "job-a", "namespace": "default"},
            "spec": {"minMember": 1, "queue": "qa"},
        },
    )
    for index in range(2):
        await client.create(PODS, _pod(f"job-a-t0-{index}", "t0", 1))
    gangs = await started(client, 2, 1)
    try:
        gangs.schedule_pass()
        assert KEY in gangs.admitted
        assert await bind_reserved(client, gangs) == 2
        # Both t0 pods run to their end, then t1's pod arrives (a later task of the job).
        for index in range(2):
            await client.patch(
                PODS,
                f"job-a-t0-{index}",
                {"status": {"phase": "Succeeded"}},
                "default",
                subresource="status",
            )
        await until(
            lambda: all(gangs.cache.pods[f"default/job-a-t0-{i}"].terminal for i in range(2))
        )
        # The job restarts its gang (its controller deletes the PodGroup and makes it again,
        # keeping the finished pods of its last run), and t1's pod arrives.
        await client.delete(PODGROUPS, "job-a", namespace="default")
        await until(lambda: KEY not in gangs.cache.podgroups)
        gangs.schedule_pass()
        await client.create(
            PODGROUPS,
            {
                "metadata": {"name": "job-a", "namespace": "default"},
                "spec": {"minMember": 1, "queue": "qa"},
            },
        )
        await client.create(PODS, _pod("job-a-t1-0", "t1", 2))
        await until(
            lambda: KEY in gangs.cache.podgroups and "default/job-a-t1-0" in gangs.cache.pods
        )
        gangs.schedule_pass()
        assert KEY in gangs.admitted, gangs.reasons.get(KEY)
        assert gangs.ledger.reservation_of("default/job-a-t1-0") is not None
    finally:
        await gangs.stop()
