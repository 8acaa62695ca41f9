"""A queue's starving gang: the first gang of a queue (in admission order: priority, then age)
that waits only for its queue's share, while its minimum fits in that share.

Such a gang gets its room only once the queue's other work has drained enough for it. If the
queue's later gangs and the elastic members of its running gangs keep taking each bit of room
that frees, it never does (issue 31's soak, seed 2026: a 36-cpu job Inqueue in a queue that
deserved 46 cpu waited from t=1096 s on while the queue's allocated grew 28 -> 35 with small
gangs and elastic members, and its `inqueue` refused every new gang of the queue for good).

Volcano's answer to big-job starvation is a reservation (docs/design/resource-reservation-
design.md, the `elect`/`reserve` actions with the `reservation` plugin of 1.1-1.5): one target
job is elected, highest priority first and then the longest waiting, and the room it needs is
locked: no other job may take it until the target is scheduled. vulcan does the same within a
queue's share: while its starving gang waits, the queue's later gangs are not allocated and its
gangs' elastic members do not grow, so the queue drains for it (its running work ends, or is
taken back by reclaim); it then runs whole and the others follow. A gang whose minimum exceeds
what the queue may hold now is never the target (it could not use the room; the others use it
meanwhile, as the enqueue votes let them), nor one refused for any other reason (not
valid yet, no room on the nodes, backing off, not enqueued yet: a gang the enqueue votes refuse
waits for the queue's `inqueue`, which a hold keeps as it is), so the queue is held only while
holding it helps.

The hold is not for ever: the queue's work may outlast it (long-running pods, higher-priority
gangs that keep coming first). Hold phases of `HOLD_SECONDS` alternate with backfill phases of
the same length (`holds`), counted from when the queue began to have a starving gang
(whichever it is: a new one does not start the hold over): in a backfill phase the
queue's other gangs are allocated as usual, those whose pods exist judged at enqueue without
the minResources of the queue's enqueued gangs that wait only for its share in the queue's
`inqueue` — the starving gang's and any other's (`inqueue_lifted` with the host's need,
`plugins.framework.starvation_book`: lifting the starving gang's alone left a second waiting job's
there, refusing the queue's small work in every backfill phase: bench/soak.py, seed 37). A job whose
pods are not made yet keeps Volcano's rule: lifted for it too, every backfill phase let each
waiting job of the queue make its pods, hundreds of pending pods that kube-scheduler then
churned through. So the queue's small work waits for it at most about `HOLD_SECONDS` at a time,
and the big gang gets a drained queue once in every two phases. Elastic members do not
grow in a hold phase either (they are the part of the queue's work that would otherwise keep
its room for as long as they run), and may in a backfill phase: a job's later task whose pods
come once its first task finished counts as elastic too, and must run for the job to end.
A gang partly placed (members lost to a node failure, a deletion, a restarted task, its others
still running) is not held either: only its missing members make it whole again.

A gang dequeued because its share fell below its minimum (`plugins.actions.allocate`) waits at
enqueue as in Volcano, without this protection: left for a later change (electing gangs that
enqueue refuses made every full queue starve and re-decided its backlog every pass).

Pure functions: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.records import PodGroupRecord
from plugins.framework.starvation_book import HOLD_SECONDS, Starvation, holds
from plugins.model.demand import still_asks
from plugins.model.gang import GangView
from plugins.model.job_input import job_input

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["HOLD_SECONDS", "Starvation", "held_for", "hold_reason", "holds", "waits_for_share"]


def waits_for_share(ssn: Session, group: PodGroupRecord, view: GangView) -> bool:
    """Whether the gang's only obstacle is its queue's share: valid, its queue Open, its demand
    refused by the queue's Allocatable now, while its minimum alone fits in what the queue may
    hold (so the queue's work draining gives it its room)."""
    source = ssn.state.inputs.get(group.queue)
    if ssn.state.model is None or source is None or not source.open:
        return False
    if ssn.job_valid(view) is not None:
        return False
    demand = still_asks(group, view)
    if demand.is_zero() or ssn.allocatable(group.queue, demand) is None:
        return False
    minimum = group.min_resources if group.min_resources is not None else demand
    return ssn.beyond_limit(group.queue, minimum) is None


def held_for(target: str, queue: str) -> str:
    """Why a gang (or an elastic member) of `queue` waits while `target` starves."""
    return (
        f"queue {queue} keeps the room its work frees for gang {target}, which came first "
        "(priority, then age) and waits for its queue's share"
    )


def hold_reason(ssn: Session, group: PodGroupRecord, view: GangView, target: str) -> str:
    """Why a gang of a queue that drains for `target` waits: its queue's own refusal when the
    queue could not take it anyway, drained of its enqueued work too (the usual words: the
    enqueue votes' for a gang not enqueued yet, else Allocatable's), else that it waits for
    `target`."""
    model = ssn.state.model
    if group.phase != "Inqueue":
        share = model.shares.get(group.queue) if model is not None else None
        with ssn.lifted(group.queue, share.inqueue if share is not None else None):
            refusal = ssn.enqueue_refusal(job_input(ssn.snapshot, group))
        if refusal is not None:
            return refusal.reason
    refused = ssn.allocatable(group.queue, still_asks(group, view))
    return refused or held_for(target, group.queue)
