"""Issue 31, item 4 of the lead's notes: a Volcano Job with `PodEvicted -> RestartJob`, once
reclaimed, stayed Pending while the extender enqueued it again every second. The job
controller restarts the job by deleting its PodGroup and creating it again under the same name
(the name comes from the job's name and uid); the status writer still remembered having written
`Inqueue` under that name, so it skipped the new group's `Inqueue` as already stored: the group
stayed Pending for ever, and no pods were made.

Driven pass by pass against the embedded API server, the status writer running."""

from __future__ import annotations

from core.kube.client import PODGROUPS, KubeClient
from tests.helpers import until
from tests.integration.test_queue_scheduling import add_nodes, add_queue, started

KEY = "default/job-a-0b7e5c7a"


async def _job_group(client: KubeClient) -> None:
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "job-a",
        "uid": "0b7e5c7a-0000-4000-8000-000000000004",
        "controller": True,
    }
    await client.create(
        PODGROUPS,
        {
            "metadata": {
                "name": "job-a-0b7e5c7a",
                "namespace": "default",
                "ownerReferences": [owner],
            },
            "spec": {"minMember": 2, "queue": "qa", "minResources": {"cpu": "2"}},
        },
    )


async def _phase(client: KubeClient) -> str:
    group = await client.get(PODGROUPS, "job-a-0b7e5c7a", namespace="default")
    return str((group.get("status") or {}).get("phase") or "")


async def test_a_podgroup_made_again_under_its_name_is_enqueued_again(client: KubeClient) -> None:
    await add_nodes(client, 2)
    await add_queue(client, "qa")
    await _job_group(client)
    gangs = await started(client, 0, 1)
    try:
        assert gangs.status_writer is not None
        gangs.schedule_pass()
        await gangs.status_writer.flush()
        assert await _phase(client) == "Inqueue"
        first = gangs.cache.podgroups[KEY].uid

        # The job restarts: its controller deletes the PodGroup and makes it again.
        await client.delete(PODGROUPS, "job-a-0b7e5c7a", namespace="default")
        await until(lambda: KEY not in gangs.cache.podgroups)
        gangs.schedule_pass()
        await _job_group(client)
        await until(lambda: KEY in gangs.cache.podgroups)
        assert gangs.cache.podgroups[KEY].uid != first
        gangs.schedule_pass()
        await gangs.status_writer.flush()
        assert await _phase(client) == "Inqueue"
    finally:
        await gangs.stop()


async def test_a_podgroup_made_again_between_two_passes_is_enqueued_again(
    client: KubeClient,
) -> None:
    await add_nodes(client, 2)
    await add_queue(client, "qa")
    await _job_group(client)
    gangs = await started(client, 0, 1)
    try:
        assert gangs.status_writer is not None
        gangs.schedule_pass()
        await gangs.status_writer.flush()
        first = gangs.cache.podgroups[KEY].uid
        await client.delete(PODGROUPS, "job-a-0b7e5c7a", namespace="default")
        await _job_group(client)
        await until(
            lambda: KEY in gangs.cache.podgroups and gangs.cache.podgroups[KEY].uid != first
        )
        gangs.schedule_pass()
        await gangs.status_writer.flush()
        assert await _phase(client) == "Inqueue"
    finally:
        await gangs.stop()
