"""Partition policy in the job controller's objects (`flow_controller.job.partitions`)."""

from __future__ import annotations

import asyncio

from core.api.batch import JobSpec
from core.api.defaults import default_job_spec
from flow_controller.job import objects
from flow_controller.job import state as js
from flow_controller.job.delays import DelayedActions

META = {"name": "pt", "namespace": "default", "uid": "u"}


def spec(partition: dict | None) -> JobSpec:
    task = {"name": "w", "replicas": 6, "template": {"spec": {"containers": [{"name": "c"}]}}}
    if partition is not None:
        task["partitionPolicy"] = partition
    return default_job_spec(JobSpec.model_validate({"tasks": [task]}))


def test_partition_id_is_the_index_over_the_partition_size() -> None:
    partitioned = spec({"totalPartitions": 2, "partitionSize": 3})
    task = partitioned.tasks[0]  # type: ignore[index]
    ids = [
        objects.build_pod(META, partitioned, task, i, version=0, retry_count=0)["metadata"][
            "labels"
        ]["volcano.sh/partition-id"]
        for i in range(6)
    ]
    assert ids == ["0", "0", "0", "1", "1", "1"]
    plain = spec(None)
    pod = objects.build_pod(META, plain, plain.tasks[0], 0, version=0, retry_count=0)  # type: ignore[index]
    assert "volcano.sh/partition-id" not in pod["metadata"]["labels"]


def test_subgroup_policy_follows_the_partition_policy() -> None:
    group = objects.build_podgroup(META, spec({"totalPartitions": 3, "partitionSize": 2}))
    assert group["spec"]["subGroupPolicy"] == [
        {
            "name": "w",
            "subGroupSize": 2,
            "minSubGroups": 0,
            "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "w"}},
            "matchLabelKeys": ["volcano.sh/partition-id"],
        }
    ]
    assert group["spec"]["minTaskMember"] == {"w": 6}  # minPartitions 0: all replicas
    assert "subGroupPolicy" not in objects.build_podgroup(META, spec(None))["spec"]


def test_subgroup_policy_is_rewritten_and_removed_with_the_tasks() -> None:
    with_partitions = objects.build_podgroup(
        META, spec({"totalPartitions": 3, "partitionSize": 2, "minPartitions": 2})
    )["spec"]
    without = objects.build_podgroup(META, spec(None))["spec"]
    assert objects.podgroup_changes(with_partitions, with_partitions) == {}
    assert objects.podgroup_changes(without, without) == {}
    assert (
        objects.podgroup_changes(without, with_partitions)["subGroupPolicy"][0]["minSubGroups"] == 2
    )
    removed = objects.podgroup_changes(with_partitions, without)
    assert "subGroupPolicy" in removed and removed["subGroupPolicy"] is None


async def test_restart_partition_cancels_only_its_partitions_delays() -> None:
    fired: list[js.Request] = []
    delays = DelayedActions(lambda _job, request: fired.append(request))
    for pod, partition in (("pt-w-0", "0"), ("pt-w-3", "1")):
        request = js.Request(js.POD_FAILED, task="w", pod=pod, partition=partition)
        assert delays.add("default/pt", request, js.RESTART_PARTITION, "1h")
    ran = js.Request(js.POD_FAILED, task="w", pod="pt-w-4", partition="1")
    delays.executed("default/pt", js.RESTART_PARTITION, ran)
    assert len(delays) == 1  # partition 0's delay stays
    delays.forget_all()
    await asyncio.sleep(0)
    assert fired == []
