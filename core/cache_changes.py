"""Which changes to a node, pod or PodGroup record matter to scheduling: `_same_node`,
`_same_for_scheduling` and `_same_podgroup` compare exactly the fields a decision reads, so
`ClusterCache` (`core.cache`) can absorb a node heartbeat, a pod status write or a PodGroup
status write (conditions, member counts) without touching its accounting, groups or listeners.

Separate from the cache itself so the list of fields is in one short place.
"""

from __future__ import annotations

from core.records import NodeRecord, PodGroupRecord, PodRecord, QueueRecord


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


def _same_podgroup(old: PodGroupRecord, new: PodGroupRecord) -> bool:
    """Of a PodGroup's status a decision reads only the phase; its conditions and counts are
    written by the extender (each new reason of a waiting gang) and the controllers. Taken for
    changes, each such write woke a scheduling pass that decided the group again, whose new
    reason was written again (issue 31's soak: ~50 such writes a second against ~2 that changed
    anything, the passes ~60% of the extender's time and its filter answers late)."""
    return (
        old.uid == new.uid
        and old.phase == new.phase
        and old.spec == new.spec
        and old.annotations == new.annotations
        and old.labels == new.labels
        and old.owner == new.owner
    )


def _same_queue(old: QueueRecord, new: QueueRecord) -> bool:
    """A Queue as scheduling reads it: its spec and state; its status counts and allocated are
    the extender's own writes, every pass."""
    return (
        old.uid == new.uid
        and old.weight == new.weight
        and old.capability == new.capability
        and old.deserved == new.deserved
        and old.guarantee == new.guarantee
        and old.reclaimable == new.reclaimable
        and old.parent == new.parent
        and old.priority == new.priority
        and old.state == new.state
        and old.closed_by_parent == new.closed_by_parent
    )


def plain_change(pod: PodRecord | None, old: PodRecord | None) -> bool:
    """A change of a pod in no group that frees no room: new, bound, or changed in place.
    A deletion, or a bound pod leaving its node, finishing or terminating, frees room a
    waiting gang may fit in, and is no plain change."""
    if pod is None or pod.group is not None or (old is not None and old.group is not None):
        return False
    if old is None or old.node is None or old.terminal:
        return True
    return pod.node == old.node and not pod.terminal and pod.deleting == old.deleting
