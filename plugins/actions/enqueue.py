"""Volcano's enqueue action: a Pending job whose pods are not all there yet (any PodGroup: a
Volcano Job's pods, or an operator's, are made once it is Inqueue) and, without the conf's
`gang` plugin, every job (its members are then placed one by one) is enqueued when the
session's JobEnqueueable votes let it (overcommit, proportion/capacity, sla), booked with
JobEnqueued. Beyond Volcano, a job the votes refuse is enqueued when evicting work it may take
would make them pass (`plugins.actions.promise`); those units are then promised to it. Nothing
is reserved."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.records import PodGroupRecord
from plugins.actions import preempt
from plugins.actions.promise import enqueue_by_eviction, held_by_peers
from plugins.framework.decisions import ENQUEUE, Decision, Enqueued, Waiting
from plugins.model.gang import GangView
from plugins.model.job_input import job_input
from plugins.model.unserved import unserved_refusal

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["NAME", "Enqueue", "enqueue_job"]

NAME = "enqueue"


def enqueue_job(ssn: Session, group: PodGroupRecord, view: GangView, action: str) -> Decision:
    """Volcano's enqueue for one job (the module docstring)."""
    key, queue = group.key, group.queue
    unserved = unserved_refusal(view, ssn.settings.served)
    if unserved is not None:
        return Waiting(key, queue, ENQUEUE, action, reason=f"gang {key}: {unserved}")
    backoff = ssn.backoff(key)  # dequeued because its pods were not made in time
    if backoff is not None:
        return Waiting(key, queue, ENQUEUE, action, reason=backoff)
    job = job_input(ssn.snapshot, group)
    refusal = ssn.enqueue_refusal(job)
    # Members made but too few: once Inqueue the gang waits for the rest (filter says so).
    waits = ssn.job_valid(view) if view.created else None  # (its words name the gang)
    if refusal is None:
        return Enqueued(key, queue, ENQUEUE, action, waits=waits)
    promise = enqueue_by_eviction(ssn, job)
    if promise is None:
        refused = refusal.reason
        if preempt.NAME in ssn.policy.actions:
            refused += held_by_peers(queue, job.priority, ssn.victims_for(key, queue))
        return Waiting(
            key, queue, ENQUEUE, action, reason=f"gang {key}: waiting for admission: {refused}"
        )
    return Enqueued(
        key, queue, ENQUEUE, action, promise=promise, refused=refusal.reason, waits=waits
    )


class Enqueue:
    name = NAME

    def execute(self, ssn: Session) -> None:
        def decide(group: PodGroupRecord, view: GangView) -> Decision:
            return enqueue_job(ssn, group, view, NAME)

        ssn.traversal.run(NAME, (ENQUEUE,), decide)
