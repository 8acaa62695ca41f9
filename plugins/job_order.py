"""Job order within a queue, and queue order (spec/volcano.md §3.2, §3.12, §3.13, §3.18, §3.21).

Volcano walks the configured plugins' JobOrder functions tier by tier and the first non-zero
comparison decides (§3.2). With the default tiers (§3.21: `priority, gang, conformance` then
`overcommit, drf, predicates, proportion, nodeorder`) plus `sla` placed after drf, that is:

    1. priority     PriorityClass value, higher first
    2. gang         jobs that are not ready (fewer than minMember placed) first
    3. drf          dominant resource share (max_dim allocated/total), lower first
    4. sla          jobs with a waiting time first; among them the earlier deadline
                    (creationTimestamp + waiting time) first
    5. fallback     PodGroup creationTimestamp, older first; then UID

Because tiers vote in order, SLA never lifts a job above a higher-priority one, a not-ready one
or one with a smaller dominant share; it only reorders jobs equal on those (§3.18 is an ordering
and a Permit for enqueue, not an override). "Deadline passed first" needs no clock: a deadline
that has passed is earlier than any that has not, so `now` does not change the order.

Queue order: spec.priority higher first, then share lower first (proportion / capacity), then
(capacity) queues with a deserved amount before best-effort ones of equal share, then
creationTimestamp, then name.

Timestamps are RFC 3339 strings as Kubernetes writes them; an empty or unreadable one counts as
the epoch (oldest), so a malformed object cannot break a scheduling pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.resources import ResourceVector
from plugins.config import SchedulerConfig
from plugins.queue_share import QueueInput, QueueShare

__all__ = [
    "JOB_ORDER_PLUGINS",
    "JobInput",
    "drf_share",
    "job_order_key",
    "job_order_plugins",
    "parse_time",
    "queue_order_key",
    "sla_deadline",
    "sla_expired",
]

_NOT_A_SHARE = frozenset({"pods"})  # Volcano's MaxTaskNum is outside its Resource arithmetic


@dataclass(slots=True)
class JobInput:
    """One job (PodGroup) as the ordering sees it."""

    key: str  # "<namespace>/<podgroup>"
    queue: str
    priority: int  # PriorityClass value of spec.priorityClassName (0 when none)
    min_member: int
    ready: bool  # gang plugin's JobReady: at least minMember members placed
    allocated: ResourceVector  # Σ requests of its allocated members
    creation: str  # PodGroup creationTimestamp (RFC 3339)
    uid: str
    sla_waiting_seconds: float | None = None  # volcano.sh/sla-waiting-time (or global), seconds
    min_resources: ResourceVector | None = None  # PodGroup spec.minResources (enqueue votes)


def parse_time(text: str) -> float:
    """RFC 3339 timestamp -> POSIX seconds; "" or garbage -> 0.0 (oldest). Naive = UTC."""
    if not text:
        return 0.0
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


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


def sla_deadline(job: JobInput) -> float | None:
    """creationTimestamp + waiting time, or None when the job has no (positive) waiting time."""
    waiting = job.sla_waiting_seconds
    if waiting is None or waiting <= 0:
        return None
    return parse_time(job.creation) + waiting


def sla_expired(job: JobInput, now: float) -> bool:
    """The sla plugin's JobEnqueueable/JobPipelined Permit: now - creation >= waiting time."""
    deadline = sla_deadline(job)
    return deadline is not None and now >= deadline


# The plugins with a JobOrder function, and Volcano's default conf's order of them.
JOB_ORDER_PLUGINS: tuple[str, ...] = ("priority", "gang", "drf", "sla")


def job_order_plugins(config: SchedulerConfig) -> tuple[str, ...]:
    """The JobOrder plugins of `config` in tier and list order, those with `enableJobOrder`
    (Volcano walks them so; the first that tells two jobs apart decides)."""
    names: list[str] = []
    for tier in config.tiers:
        for option in tier.plugins:
            if (
                option.name in JOB_ORDER_PLUGINS
                and option.name not in names
                and option.is_enabled("enableJobOrder")
            ):
                names.append(option.name)
    return tuple(names)


def job_order_key(
    job: JobInput,
    total: ResourceVector,
    now: float | None = None,
    plugins: tuple[str, ...] = JOB_ORDER_PLUGINS,
) -> tuple[Any, ...]:
    """A sort key: `sorted(jobs, key=lambda j: job_order_key(j, total, now))` is JobOrder,
    voted by `plugins` in that order (`job_order_plugins` of the conf), then the fallback.

    `now` (POSIX seconds) is accepted for symmetry with `sla_expired` but cannot change the
    order (see the module docstring). Timestamps have whole seconds, so jobs created together
    tie often: vulcan then orders them by `namespace/name` (Volcano by UID, i.e. at random),
    so that what users see is predictable; the UID still separates a re-created job.
    """
    votes: list[Any] = []
    for name in plugins:
        if name == "priority":
            votes.append(-job.priority)
        elif name == "gang":
            votes.append(1 if job.ready else 0)
        elif name == "drf":
            votes.append(drf_share(job.allocated, total))
        elif name == "sla":
            deadline = sla_deadline(job)
            votes.append((0, deadline) if deadline is not None else (1, 0.0))
    return (*votes, parse_time(job.creation), job.key, job.uid)


def queue_order_key(share: QueueShare, queue: QueueInput) -> tuple[int, float, int, float, str]:
    """A sort key for QueueOrder (see the module docstring)."""
    return (
        -queue.priority,
        share.share,
        1 if share.best_effort else 0,
        parse_time(queue.creation),
        queue.name,
    )
