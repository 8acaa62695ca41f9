"""Volcano's task partition policy in the job controller (`partitionPolicy` of a task:
totalPartitions x partitionSize = replicas, minPartitions; pkg/controllers/job).

- Each pod of a partitioned task carries label `volcano.sh/partition-id` = its index //
  partitionSize (Volcano's createJobPod).
- The PodGroup gets one `subGroupPolicy` entry per partitioned task (Volcano's
  getSubGroupPolicy): name = the task, subGroupSize = partitionSize, minSubGroups =
  minPartitions, labelSelector on the task's `volcano.sh/task-spec`, matchLabelKeys
  [`volcano.sh/partition-id`], and the partition's networkTopology; rewritten when the tasks'
  policies change.
- `RestartPartition` (a policy action) kills the pods of the partition of the pod whose event
  triggered it: same task, same partition id (Volcano's TargetTypePartition); a pod with no
  partition kills nothing, as Volcano skips it.
"""

from __future__ import annotations

from typing import Any

from core.api import keys
from core.api.batch import JobSpec, TaskSpec
from core.records import PodRecord


def partition_id(task: TaskSpec, index: int) -> str | None:
    policy = task.partition_policy
    if policy is None:
        return None
    return str(index // policy.partition_size if policy.partition_size > 0 else 0)


def sub_group_policies(spec: JobSpec) -> list[dict[str, Any]]:
    policies = []
    for task in spec.tasks or ():
        policy = task.partition_policy
        if policy is None:
            continue
        entry: dict[str, Any] = {
            "name": task.name or "",
            "subGroupSize": policy.partition_size,
            "minSubGroups": policy.min_partitions,
            "labelSelector": {"matchLabels": {keys.TASK_SPEC: task.name or ""}},
            "matchLabelKeys": [keys.PARTITION_ID],
        }
        if policy.network_topology is not None:
            entry["networkTopology"] = policy.network_topology.to_dict()
        policies.append(entry)
    return policies


def pod_partition(pod: PodRecord) -> str:
    return pod.labels.get(keys.PARTITION_ID, "")


def in_partition(pod: PodRecord, task: str, partition: str) -> bool:
    """Whether `pod` is in partition `partition` of task `task` ("" matches nothing)."""
    return bool(partition) and pod.task == task and pod_partition(pod) == partition
