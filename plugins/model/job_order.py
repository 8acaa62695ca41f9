"""What job order and queue order are computed from: the job as the session's plugins see it
(`JobInput`), the dominant resource
share (`drf_share`), and the queue-order key of the share plugins (`queue_order_key`: spec.
priority higher first, then share lower first, then (capacity) queues with a deserved amount
before best-effort ones of equal share, then creationTimestamp, then name). The job order
itself is the session's (`plugins.framework.policy.Session.job_order_key`): the conf's priority,
gang, drf and sla plugins, each in its own module, voting in the conf's order.

Timestamps are RFC 3339 strings as Kubernetes writes them; an empty or unreadable one counts as
the epoch (oldest), so a malformed object cannot break a scheduling pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.resources import ResourceVector
from core.timestamps import epoch_seconds
from plugins.model.queue_share import QueueInput, QueueShare

__all__ = [
    "JobInput",
    "drf_share",
    "parse_time",
    "queue_order_key",
]

_NOT_A_SHARE = frozenset({"pods"})  # Volcano's MaxTaskNum is outside its Resource arithmetic


@dataclass(slots=True)
class JobInput:
    """One job (PodGroup) as the session's job-level hooks see it (order, enqueue, the queue
    checks, victims): what Volcano's JobInfo sums up. Its members, their task statuses and the
    gang counts (minMember, minTaskMember) are the job's `plugins.model.gang.GangView`, which the
    gang hooks read: a job has this summary and that view, and nothing is held in both."""

    key: str  # "<namespace>/<podgroup>"
    queue: str
    priority: int  # PriorityClass value of spec.priorityClassName (0 when none)
    ready: bool  # gang plugin's JobReady: at least minMember members placed
    allocated: ResourceVector  # Σ requests of its allocated members
    creation: str  # PodGroup creationTimestamp (RFC 3339)
    uid: str
    sla_waiting_seconds: float | None = None  # volcano.sh/sla-waiting-time (or global), seconds
    min_resources: ResourceVector | None = None  # PodGroup spec.minResources (enqueue votes)
    # What its queue's `inqueue` counts for it in this session (its admitted minimum not placed
    # yet): allocated, it leaves `inqueue` as it enters `allocated` (counted once).
    inqueue: ResourceVector | None = None


def parse_time(text: str) -> float:
    """RFC 3339 timestamp -> POSIX seconds; "" or garbage -> 0.0 (oldest). Naive = UTC."""
    seconds = epoch_seconds(text)
    return seconds if seconds is not None else 0.0


def drf_share(allocated: ResourceVector, total: ResourceVector) -> float:
    """Dominant resource share: max over the cluster's dimensions of allocated/total.

    Dimensions the cluster has none of are skipped (Volcano iterates the total's resource
    names, which leave out zeros), and so is `pods`.
    """
    share = 0.0
    for name, amount in total.items():
        if amount <= 0 or name in _NOT_A_SHARE:
            continue
        share = max(share, allocated.get(name) / amount)
    return share


def queue_order_key(share: QueueShare, queue: QueueInput) -> tuple[int, float, int, float, str]:
    """A sort key for QueueOrder (see the module docstring)."""
    return (
        -queue.priority,
        share.share,
        1 if share.best_effort else 0,
        parse_time(queue.creation),
        queue.name,
    )
