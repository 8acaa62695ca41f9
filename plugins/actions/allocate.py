"""Volcano's allocate action: a whole gang at once (`plugins.actions.whole_gang`: JobValid, the
queue, the placement, pipelining onto room being freed), and when it does not fit the conf's
reclaim and preempt plan its evictions in the same step (a gang is placed whole or not at all,
so its evictions are planned with its placement). Without an enqueue action it also enqueues,
as Volcano's allocate moves a Pending job to Inqueue itself then.

A queue with a starving gang (`plugins.actions.starvation`) drains for it: in a hold phase its
later gangs wait; in a backfill phase they are allocated as usual, judged without the
minResources of the queue's gangs that wait only for its share in the queue's `inqueue`.

Before placing, a gang backing off after a gang timeout waits, and so does one whose member
lacks the bind entry's marker (kube-scheduler would bind it past the barrier), and one that needs
members kube-scheduler never sends to vulcan (`plugins.model.unserved`; Inqueue, it is dequeued).
An Inqueue gang whose minimum its queue's share can no longer hold is dequeued too: its room
goes back to the queue, and the enqueue votes refuse it until the share can hold it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.api import markers
from core.records import PodGroupRecord
from plugins.actions import enqueue
from plugins.actions.promise import void_promise_refusal
from plugins.actions.starvation import hold_reason, holds, waits_for_share
from plugins.actions.whole_gang import allocate_gang
from plugins.framework.decisions import ALLOCATE, ENQUEUE, Admitted, Decision, Waiting
from plugins.model import gang as gangs
from plugins.model.demand import still_asks
from plugins.model.gang import GangView
from plugins.model.job_input import job_input
from plugins.model.queue_share import sum_vectors
from plugins.model.unserved import unserved_refusal

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["NAME", "Allocate", "allocate_job"]

NAME = "allocate"


def allocate_job(ssn: Session, group: PodGroupRecord, view: GangView) -> Decision:
    """Volcano's allocate for one gang (the module docstring)."""
    key, queue = group.key, group.queue
    unserved = unserved_refusal(view, ssn.settings.served)
    if unserved is not None:
        # Enqueued before its pods existed, it gives its queue's room back.
        reason = f"gang {key}: {unserved}"
        dequeue = group.phase == "Inqueue"
        return Waiting(key, queue, ALLOCATE, NAME, reason=reason, dequeue=dequeue)
    beyond = None
    if key in ssn.queues.released and group.min_resources is not None:
        beyond = ssn.beyond_limit(queue, group.min_resources)
    if beyond is not None:
        # Its queue's share fell below its minimum since it was enqueued: it could not be
        # allocated, and Inqueue it would hold the room the queue's other work could use (the
        # session opened without it in the queue's `inqueue`).
        reason = f"gang {key}: waiting for admission: {beyond}; back to Pending"
        return Waiting(key, queue, ALLOCATE, NAME, reason=reason, dequeue=True)
    backoff = ssn.backoff(key)
    if backoff is not None and group.phase == "Inqueue" and ssn.job_valid(view) is not None:
        # Its pods were not made in time (`extender.unreached`): its room goes back to its
        # queue until the backoff ends (then it is enqueued again, as any Pending group).
        reason = f"{backoff}; back to Pending"
        return Waiting(key, queue, ALLOCATE, NAME, reason=reason, dequeue=True, unmade=True)
    waiting = backoff or unmarked_member(ssn, group)
    if waiting is not None:
        return Waiting(key, queue, ALLOCATE, NAME, reason=waiting)
    ssn.read(("starving", queue))  # a gang its queue drains for (elected in order)
    starving = ssn.starvation.of(queue)
    target = starving[0] if starving is not None else None
    now = ssn.now
    since = starving[1] if starving is not None and starving[1] >= 0 else now
    if starving is not None:
        ssn.clock_read()  # hold and backfill phases follow the time
    # Its queue drains for a starving gang: the later gangs wait (a hold phase). A gang partly
    # placed goes ahead: its running members hold their room whatever the hold does, and only
    # its missing ones make it whole again.
    if (
        starving is not None
        and target != key
        and not gangs.partly_placed(view)
        and holds(since, now)
    ):
        why = hold_reason(ssn, group, view, starving[0])
        reason = f"gang {key}: waiting for admission: {why}"
        return Waiting(key, queue, ALLOCATE, NAME, reason=reason, held=True)
    job = job_input(ssn.snapshot, group)
    # A backfill phase: a gang with its pods is judged beside the minResources of the queue's
    # gangs that wait for its share (not flooding enqueue with pod-less jobs, which keep
    # Volcano's rule).
    lifted = starving[2] if starving is not None and target != key else None
    with ssn.lifted(queue, lifted):
        admission = allocate_gang(ssn, group, view, job)
    plan = admission.plan
    if plan is None or admission.reason is not None:
        # A gang its queue has not enqueued (refused by the enqueue votes) is no starving gang:
        # holding the queue keeps its enqueued gangs (and their `inqueue`) waiting, so the
        # hold could not give it its room. It waits at enqueue as in Volcano.
        share = None
        if not admission.at_enqueue and waits_for_share(ssn, group, view):
            share = still_asks(group, view)
        if group.phase == "Inqueue":
            void = void_promise_refusal(ssn, job, ssn.counted_inqueue(group))
            if void is not None:
                reason = (
                    f"gang {key}: waiting for admission: the work it was enqueued to evict is "
                    f"gone, and {void}; back to Pending"
                )
                return Waiting(key, queue, ALLOCATE, NAME, reason=reason, dequeue=True)
        return Waiting(
            key,
            queue,
            ALLOCATE,
            NAME,
            reason=admission.reason or "",
            share=share,
            unmade=admission.unmade,
        )
    requests = {pod.key: pod.requests for pod in view.members}
    held = sum_vectors(requests[pod_key] for pod_key in plan.slots)
    if lifted is not None:
        ssn.lent[key] = lifted  # placed on the room its queue's share-waiters hold in `inqueue`
    return Admitted(key, queue, ALLOCATE, NAME, plan=plan, evictions=admission.evictions, held=held)


def unmarked_member(ssn: Session, group: PodGroupRecord) -> str | None:
    """Why the gang may not be admitted while one of its members waiting for a node lacks the
    bind marker: filter refuses that member on every node, so admitting the gang would only
    hold room for it until the gang timeout, again after each backoff."""
    marker = ssn.settings.bind_marker
    if marker is None or not ssn.policy.has("gang") or group.min_member <= 1:
        return None  # (a gang of minMember 1 needs no barrier: no member is refused)
    snapshot = ssn.snapshot
    for pod_key in sorted(snapshot.pods_by_group.get(group.key, ())):
        pod = snapshot.pods.get(pod_key)
        if pod is None or pod.node is not None or pod.deleting or pod.terminal:
            continue
        why = markers.unmarked_member(
            group.key, group.min_member, pod_key, marker in pod.markers, marker
        )
        if why is not None:
            return why
    return None


class Allocate:
    name = NAME

    def execute(self, ssn: Session) -> None:
        enqueues = enqueue.NAME not in ssn.policy.actions

        def decide(group: PodGroupRecord, view: GangView) -> Decision:
            if enqueues and ssn.traversal.stage(group.key) == ENQUEUE:
                return enqueue.enqueue_job(ssn, group, view, NAME)
            return allocate_job(ssn, group, view)

        stages = (ALLOCATE, ENQUEUE) if enqueues else (ALLOCATE,)
        ssn.traversal.run(NAME, stages, decide)
