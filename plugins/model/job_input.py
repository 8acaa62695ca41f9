"""The job (PodGroup) as the session's job-level hooks see it (`JobInput`), from a snapshot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.api import keys
from core.records import PodGroupRecord
from plugins.model import gang as gangs
from plugins.model.job_order import JobInput
from plugins.model.queue_inputs import members_request

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = ["group_priority", "job_input"]


def job_input(snapshot: Snapshot, group: PodGroupRecord) -> JobInput:
    """The job (PodGroup) as the session's plugins see it."""
    members = snapshot.pods_by_group.get(group.key, ())
    priority = max(
        (snapshot.pods[k].priority for k in members if k in snapshot.pods),
        default=group_priority(snapshot, group),
    )
    return JobInput(
        key=group.key,
        queue=group.queue,
        priority=priority,
        ready=group.phase in ("Running", "Completed"),
        allocated=members_request(snapshot, group, placed=True),
        creation=group.created,
        uid=group.uid,
        sla_waiting_seconds=gangs.annotation_duration(
            group, keys.SLA_WAITING_TIME, keys.SLA_WAITING_TIME_LEGACY
        ),
        min_resources=group.min_resources,
    )


def group_priority(snapshot: Snapshot, group: PodGroupRecord) -> int:
    """The PodGroup's own priority, as Volcano's scheduler cache reads it: the value of the
    PriorityClass its `priorityClassName` names, the globalDefault class's when it names none
    (or one that does not exist), else 0. A job with pods takes its members' priority (the API
    server resolved the same class into each pod's spec.priority)."""
    classes = snapshot.priority_classes
    value = classes.get(group.priority_class) if group.priority_class else None
    if value is None:
        value = classes.get("", 0)
    return value
