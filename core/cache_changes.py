"""Which changes to a node or pod record matter to scheduling: `_same_node` and
`_same_for_scheduling` compare exactly the fields a decision reads, so `ClusterCache`
(`core.cache`) can absorb a node heartbeat or a pod status write without touching its
accounting, groups or listeners.

Separate from the cache itself so the list of fields is in one short place.
"""

from __future__ import annotations

from core.records import NodeRecord, PodRecord


def _same_node(old: NodeRecord, new: NodeRecord) -> bool:
    return (
        old.uid == new.uid
        and old.ready == new.ready
        and old.unschedulable == new.unschedulable
        and old.allocatable == new.allocatable
        and old.taints == new.taints
        and old.labels == new.labels
    )


def _same_for_scheduling(old: PodRecord, new: PodRecord) -> bool:
    return (
        old.uid == new.uid
        and old.node == new.node
        and old.phase == new.phase
        and old.deleting == new.deleting
        and old.gates == new.gates
        and old.group == new.group
        and old.requests is new.requests  # shared vectors: equal requests are one object
        and old.priority == new.priority
        and old.task == new.task
        and old.nominated_node == new.nominated_node
        and old.queue_annotation == new.queue_annotation
        and old.annotations_preemptable == new.annotations_preemptable
        and old.owner == new.owner
        and old.scheduler_name == new.scheduler_name
        and old.constraints == new.constraints
        and old.labels == new.labels
    )
