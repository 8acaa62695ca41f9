"""Enqueue on the promise of eviction (issue 31, beyond Volcano).

Volcano's enqueue admits a Pending job only when its queue and the cluster can hold its
minResources now; a Volcano Job's pods are created only once its PodGroup is Inqueue, and its
allocate, preempt and reclaim actions only look at jobs with pods. So a high-priority Job whose
queue (or the cluster) is full of lower-priority work waits for ever: nothing it could preempt
is ever asked to go.

vulcan enqueues such a job when the session's enqueue votes would pass once work it may evict
were gone: lower-priority units of its own queue (the preempt action's candidates, and the
session's Preemptable over them), or units of queues above their deserved share (the reclaim
action's, when its queue may still grow: Preemptive, and the session's Reclaimable). Units are
taken in victim order (elastic members first, then whole gangs) until the votes pass. Nothing is
evicted here: the job's pods get made, and the allocate action chooses (and re-checks) the
victims for its whole-gang placement — a job whose victims are no longer of lower priority (or
no longer over their share) is not admitted, and since preemption needs strictly lower priority,
two such jobs can never evict each other's work.

A unit promised to a job is that job's until the promise is settled (its job placed, or the
promise dropped): no other job is enqueued on it (`plugins.framework.room.VictimPool`). A
promise whose work is gone (finished, deleted, lost with its node) before its job was placed
is judged again (`void_promise_refusal`): the job stays enqueued only while the enqueue votes
would still take it, else it goes back to Pending (its room is no longer the queue's to hold).

Pure: the trial releases the units in the session's share model and overcommit sums and puts
them back before it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.resources import ResourceVector
from plugins.actions import preempt, reclaim
from plugins.framework.decisions import Promise
from plugins.framework.extension_points import Preemptor
from plugins.framework.inputs import QUEUES, USED
from plugins.model.job_order import JobInput
from plugins.model.queue_share import QueueShare, strip_pods
from plugins.model.victims import VictimUnit, books_released, effective_units, victim_order_key

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["enqueue_by_eviction", "held_by_peers", "void_promise_refusal"]

_ZERO = ResourceVector()


def enqueue_by_eviction(ssn: Session, job: JobInput) -> Promise | None:
    """A promise when evicting some of the units the job may take would let it be enqueued
    (see the module docstring); None when no acceptable units are enough. Books nothing."""
    actions = set(ssn.policy.actions)
    request = job.min_resources or _ZERO
    may_reclaim = reclaim.NAME in actions and ssn.preemptive(job.queue, request)
    if not may_reclaim and preempt.NAME not in actions:
        return None
    # Preempt alone takes only lower-priority work of the job's queue.
    below = None if may_reclaim else job.priority
    units = ssn.victims_for(job.key, None if may_reclaim else job.queue, below)
    if not units:
        return None
    preemptor = Preemptor(
        group=job.key,
        queue=job.queue,
        priority=job.priority,
        allocated=job.allocated,
        request=request,
    )
    attempts: list[tuple[str, list[VictimUnit]]] = []
    if may_reclaim:
        attempts.append((reclaim.NAME, reclaim.accepted(ssn, preemptor, units)))
    if preempt.NAME in actions:
        attempts.append((preempt.NAME, preempt.accepted(ssn, preemptor, units)))
    for action, allowed in attempts:
        taken: list[VictimUnit] = []
        for unit in sorted(allowed, key=victim_order_key):
            taken.append(unit)
            if _passes_without(ssn, job, effective_units(taken)):
                return Promise(action, tuple(effective_units(taken)))
    return None


def void_promise_refusal(ssn: Session, job: JobInput, inqueue: ResourceVector | None) -> str | None:
    """Why an enqueued job whose promise of eviction is void (some promised pod is gone) would
    not be enqueued now (the votes without its own `inqueue`), if so; None otherwise."""
    pods = ssn.facts.promised.get(job.key)
    if not pods:
        return None
    ssn.read(("victims", None))  # what became of the promised pods
    found = ssn.snapshot.pods
    if all((p := found.get(k)) is not None and not p.terminal and not p.deleting for k in pods):
        return None
    with ssn.lifted(job.queue, inqueue):
        refusal = ssn.enqueue_refusal(job)
    return refusal.reason if refusal is not None else None


def _passes_without(ssn: Session, job: JobInput, gone: list[VictimUnit]) -> bool:
    """Would the enqueue votes pass with `gone` evicted? (A trial, undone before returning.)"""
    ssn.read(QUEUES)
    ssn.read(USED)
    state = ssn.state
    model = state.model
    used = dict(state.used)
    saved: list[tuple[QueueShare, ResourceVector, ResourceVector, float]] = []
    if model is not None:
        names = {n for u in gone for n in model.chain(u.queue)}
        saved = [
            (share, share.allocated, share.elastic, share.share)
            for n in names
            if (share := model.shares.get(n)) is not None
        ]
    for unit in gone:
        for name, amount in unit.freed.items():
            state.used[name] = state.used.get(name, 0) - amount
    if model is not None:
        for queue, freed, elastic in books_released(gone):
            model.on_released(queue, freed)
            # What the gang's books count as elastic leaves the queue's `elastic` too: enqueue
            # subtracts elastic from allocated, so that part frees nothing the queue check counts.
            for n in model.chain(queue):
                share = model.shares.get(n)
                if share is not None:
                    share.elastic = share.elastic.saturating_sub(strip_pods(elastic))
    try:
        return ssn.policy.job_enqueueable(job, state) is None
    finally:
        state.used.clear()
        state.used.update(used)
        for share, allocated, elastic, ratio in saved:
            share.allocated, share.elastic, share.share = allocated, elastic, ratio


def held_by_peers(queue: str, priority: int, units: Sequence[VictimUnit]) -> str:
    """What a job that may not evict waits for, when its queue's room is held by work of its
    own priority or higher: "; the room in queue q is held by work of priority >= 1000, which
    it does not preempt: ns/a, ns/b" ("" when there is none)."""
    peers = sorted(
        {u.group or u.pods[0] for u in units if u.queue == queue and u.priority >= priority}
    )
    if not peers:
        return ""
    more = f" and {len(peers) - 3} more" if len(peers) > 3 else ""
    return (
        f"; the room in queue {queue} is held by work of priority >= {priority}, which it "
        f"does not preempt: {', '.join(peers[:3])}{more}"
    )
