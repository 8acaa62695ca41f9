"""Volcano's task partition policy through the job controller on the embedded API server: the
pods' `volcano.sh/partition-id`, the PodGroup's `subGroupPolicy`, and `RestartPartition`
restarting only the failed pod's partition (the test plays scheduler and kubelet)."""

from __future__ import annotations

from typing import Any

from core.kube.client import PODGROUPS, VCJOBS, KubeClient
from tests.integration.controller_harness import events_about, eventually, get_or_none, running
from tests.integration.test_job_controller import admit, job_pods, set_phase

JOB = "job-controller"


def partitioned_job(**policy: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox"}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "pt", "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "w",
                    "replicas": 4,
                    "partitionPolicy": {
                        "totalPartitions": 2,
                        "partitionSize": 2,
                        "minPartitions": 1,
                        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                    },
                    "policies": [{"event": "PodFailed", "action": "RestartPartition"}],
                    "template": {"spec": {"containers": [container], "restartPolicy": "Never"}},
                },
                {"name": "ps", "replicas": 1, "template": {"spec": {"containers": [container]}}},
            ],
            **policy,
        },
    }


async def all_pods(client: KubeClient, count: int) -> dict[str, dict[str, Any]]:
    async def found() -> dict[str, dict[str, Any]] | None:
        pods = await job_pods(client, "pt")
        return pods if len(pods) == count else None

    return await eventually(found)


async def test_partitions_label_pods_shape_the_podgroup_and_restart_alone() -> None:
    async with running([JOB]) as (client, _):
        job = await client.create(VCJOBS, partitioned_job())
        group_name = f"pt-{job['metadata']['uid']}"
        group = await eventually(lambda: get_or_none(client, PODGROUPS, group_name, "default"))
        assert group["spec"]["subGroupPolicy"] == [
            {
                "name": "w",
                "subGroupSize": 2,
                "minSubGroups": 1,
                "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "w"}},
                "matchLabelKeys": ["volcano.sh/partition-id"],
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            }
        ]
        # minAvailable of the task: minPartitions x partitionSize.
        assert group["spec"]["minTaskMember"] == {"w": 2, "ps": 1}
        await admit(client, group_name)
        pods = await all_pods(client, 5)
        labels = {
            n: p["metadata"]["labels"].get("volcano.sh/partition-id") for n, p in pods.items()
        }
        assert labels == {
            "pt-w-0": "0",
            "pt-w-1": "0",
            "pt-w-2": "1",
            "pt-w-3": "1",
            "pt-ps-0": None,
        }
        uids = {n: p["metadata"]["uid"] for n, p in pods.items()}
        for name in pods:
            await set_phase(client, name, "Running")

        # w-3 fails: its partition (w-2, w-3) restarts, partition 0 and ps keep running.
        await set_phase(client, "pt-w-3", "Failed", exit_code=1)

        async def partition_replaced() -> dict[str, dict[str, Any]] | None:
            now = await job_pods(client, "pt")
            if len(now) != 5:
                return None
            fresh = {n for n, p in now.items() if p["metadata"]["uid"] != uids[n]}
            return now if fresh == {"pt-w-2", "pt-w-3"} else None

        now = await eventually(partition_replaced)
        for name in ("pt-w-0", "pt-w-1", "pt-ps-0"):
            assert now[name]["metadata"]["uid"] == uids[name]
            assert now[name]["status"]["phase"] == "Running"
        assert now["pt-w-3"]["metadata"]["labels"]["volcano.sh/partition-id"] == "1"


async def test_restart_partition_for_a_task_without_partitions_kills_nothing() -> None:
    """Volcano skips a partition kill it finds no partition for: nothing restarts, the job is
    only synced (its counts include the failed pod)."""
    async with running([JOB]) as (client, _):
        body = partitioned_job()
        body["spec"]["tasks"][1]["policies"] = [
            {"event": "PodFailed", "action": "RestartPartition"}
        ]
        job = await client.create(VCJOBS, body)
        group_name = f"pt-{job['metadata']['uid']}"
        await eventually(lambda: get_or_none(client, PODGROUPS, group_name, "default"))
        await admit(client, group_name)
        pods = await all_pods(client, 5)
        for name in pods:
            await set_phase(client, name, "Running")

        async def running_phase() -> bool:
            status = (await client.get(VCJOBS, "pt", "default")).get("status") or {}
            return status.get("state", {}).get("phase") == "Running"

        await eventually(running_phase)
        await set_phase(client, "pt-ps-0", "Failed", exit_code=1)

        async def restart_partition_ran() -> bool:
            notes = [e.get("note", "") for e in await events_about(client, "pt")]
            return "Start to execute action RestartPartition" in notes

        await eventually(restart_partition_ran)

        async def failed_counted() -> dict[str, Any] | None:
            status = (await client.get(VCJOBS, "pt", "default")).get("status") or {}
            return status if status.get("failed") == 1 else None

        status = await eventually(failed_counted)
        # Not Restarting, no retry counted, no pod replaced.
        assert status["state"]["phase"] == "Running"
        assert status.get("retryCount", 0) == 0
        now = await job_pods(client, "pt")
        assert {n: p["metadata"]["uid"] for n, p in now.items()} == {
            n: p["metadata"]["uid"] for n, p in pods.items()
        }
