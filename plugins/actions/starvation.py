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
meanwhile, as `QueuePolicy` lets them enqueue), nor one refused for any other reason (not
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
`extender.share_waiters`: lifting the starving gang's alone left a second waiting job's there,
refusing the queue's small work in every backfill phase: bench/soak.py, seed 37). A job whose
pods are not made yet keeps Volcano's rule: lifted for it too, every backfill phase let each
waiting job of the queue make its pods, hundreds of pending pods that kube-scheduler then
churned through. So the queue's small work waits for it at most about `HOLD_SECONDS` at a time,
and the big gang gets a drained queue once in every two phases. Elastic members do not
grow in a hold phase either (they are the part of the queue's work that would otherwise keep
its room for as long as they run), and may in a backfill phase: a job's later task whose pods
come once its first task finished counts as elastic too, and must run for the job to end.
A gang partly placed (members lost to a node failure, a deletion, a restarted task, its others
still running) is not held either: only its missing members make it whole again.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from core.records import PodGroupRecord
from core.resources import ResourceVector
from plugins.actions.allocate import gang_demand
from plugins.framework.extension_points import PassState
from plugins.framework.policy import Policy
from plugins.model import gang as gangs
from plugins.model import gang_ready
from plugins.model.queue_share import ShareModel

__all__ = [
    "HOLD_SECONDS",
    "held_for",
    "hold_reason",
    "holding",
    "holds",
    "inqueue_lifted",
    "starving_demand",
    "waits_for_share",
]

HOLD_SECONDS = 20.0


def starving_demand(group: PodGroupRecord, view: gangs.GangView) -> ResourceVector:
    """What the gang still asks its queue for (its minResources less what it holds)."""
    return gang_demand(
        group, gang_ready.pending_members(view), gang_ready.members_needed(view), view
    )


def waits_for_share(
    session: Policy, state: PassState, group: PodGroupRecord, view: gangs.GangView
) -> bool:
    """Whether the gang's only obstacle is its queue's share: valid, its queue Open, its demand
    refused by the queue's Allocatable now, while its minimum alone fits in what the queue may
    hold (so the queue's work draining gives it its room)."""
    model = state.model
    source = state.inputs.get(group.queue)
    if model is None or source is None or not source.open:
        return False
    if session.job_valid(view) is not None:
        return False
    demand = starving_demand(group, view)
    if demand.is_zero() or session.allocatable(group.queue, demand, state) is None:
        return False
    minimum = group.min_resources if group.min_resources is not None else demand
    return not model.beyond_limit(group.queue, minimum)


def held_for(target: str, queue: str) -> str:
    """Why a gang (or an elastic member) of `queue` waits while `target` starves."""
    return (
        f"queue {queue} keeps the room its work frees for gang {target}, which came first "
        "(priority, then age) and waits for its queue's share"
    )


def hold_reason(
    session: Policy, state: PassState, group: PodGroupRecord, view: gangs.GangView, target: str
) -> str:
    """Why a gang of a queue that drains for `target` waits: its queue's own refusal when the
    queue could not take it anyway (the usual words), else that it waits for `target`."""
    refused = session.allocatable(group.queue, starving_demand(group, view), state)
    return refused or held_for(target, group.queue)


def holds(since: float, now: float, hold: float = HOLD_SECONDS) -> bool:
    """Whether a queue with a starving gang since `since` is held at `now`: hold phases of `hold`
    seconds alternate with backfill phases of the same length, a hold first."""
    return int(max(0.0, now - since) // hold) % 2 == 0


@contextmanager
def inqueue_lifted(
    model: ShareModel | None, queue: str, amount: ResourceVector | None
) -> Iterator[None]:
    """Within the block, the queue's `inqueue` (and its ancestors') without `amount` (a
    backfill phase's lift: what the queue's gangs waiting for its share ask); restored
    exactly afterwards."""
    if model is None or amount is None:
        yield
        return
    saved = [
        (share, share.inqueue)
        for name in model.chain(queue)
        if (share := model.shares.get(name)) is not None
    ]
    model.release_inqueue(queue, amount)
    try:
        yield
    finally:
        for share, inqueue in saved:
            share.inqueue = inqueue


def holding(
    starving: Mapping[str, str], since: Mapping[str, float], queue: str, now: float
) -> str | None:
    """The starving gang `queue` is held for at `now` (a hold phase), else None."""
    target = starving.get(queue)
    if target is None or not holds(since.get(queue, now), now):
        return None
    return target
