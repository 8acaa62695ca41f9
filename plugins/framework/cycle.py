"""One scheduling cycle, as Volcano's `runOnce` (pkg/scheduler/scheduler.go): open a session on
a snapshot, run the conf's `actions:` in the order listed, and hand back the decisions. Pure:
no I/O; what the cycle needs of the extender's state (what is admitted, the ledger's room, the
gang backoff) it reads through a `CycleHost`, which also applies each decision as it is taken
(Volcano's statement commit: a later job sees the room an earlier one took).

    open      every visited PodGroup gets its stage (`stage_of`): placed whole already and
              not admitted (adopted, e.g. after a restart), admitted, completed, waiting for
              enqueue, or waiting for allocate. The first three are decided here.
    enqueue   Volcano's enqueue for a job whose pods are not all there yet (a vcjob's pods are
              made once its PodGroup is Inqueue) and, without the conf's `gang` plugin, for
              every job (its members are then placed one by one): the session's
              JobEnqueueable votes, or enqueued on the promise of evicting
              (`plugins.actions.promise`). Booked with JobEnqueued.
    allocate  a whole gang at once (`plugins.actions.allocate.allocate_gang`: JobValid, the queue,
              the placement, pipelining onto room being freed); when it does not fit, the
              conf's `reclaim` and `preempt` choose whole units to evict for it in the same
              step (a gang is placed whole or not at all, so its evictions are planned with
              its placement). Booked with the Allocate event handlers (`job_allocated`).
              Without an `enqueue` action it also enqueues, as Volcano's allocate moves a
              Pending job to Inqueue itself when no enqueue action is configured.
    preempt, reclaim   within allocate (above), and for elastic members (`extender.elastic_growth`).
    backfill  nothing here: members that request nothing go through kube-scheduler's own path.

So the order matters as in Volcano: with `enqueue, allocate` a job enqueued this cycle holds
its queue's room before any gang is allocated; with `allocate, enqueue` the gangs whose pods
are there take the room first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from core.records import PodGroupRecord
from core.resources import ResourceVector
from plugins.actions.allocate import Admission, GangRoom, allocate_gang, enqueue
from plugins.actions.promise import (
    Promise,
    enqueue_by_eviction,
    held_by_peers,
    refusal_follows_queue,
)
from plugins.actions.starvation import (
    hold_reason,
    holds,
    inqueue_lifted,
    starving_demand,
    waits_for_share,
)
from plugins.framework.extension_points import PassState
from plugins.framework.policy import Policy
from plugins.framework.traversal import AdmissionOrder, cluster_used, job_input, queue_numbers
from plugins.model import gang as gangs
from plugins.model.job_order import JobInput
from plugins.model.placement import Prefer
from plugins.model.queue_inputs import QueueBooks, QueuePass
from plugins.model.queue_share import sum_vectors
from plugins.model.victims import VictimUnit

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = [
    "ADMITTED",
    "ADOPT",
    "ALLOCATE",
    "DONE",
    "ENQUEUE",
    "Cycle",
    "CycleHost",
    "Decision",
    "open_session",
    "run_once",
    "stage_of",
]

# What the cycle finds a visited PodGroup waiting for (`stage_of`).
ADOPT = "adopt"  # placed whole already, not admitted yet (e.g. after a restart)
ADMITTED = "admitted"  # admitted: nothing to decide (its status is refreshed)
DONE = "done"  # completed and not admitted: nothing to decide
ENQUEUE = "enqueue"  # waits for the enqueue action
ALLOCATE = "allocate"  # waits for the allocate action (a whole-gang placement)


class CycleHost(Protocol):
    """The extender's state as the cycle reads it, and where its decisions go."""

    def visit(self, queue: str, numbers: tuple[Any, ...] | None) -> bool:
        """Whether anything a decision about this queue's groups reads may have changed
        (`numbers`: the queue's, `plugins.framework.traversal.queue_numbers`)."""
        ...

    def settled(self, group: PodGroupRecord, numbers: tuple[Any, ...] | None) -> bool:
        """Whether the group's last decision still stands (nothing it reads has changed)."""
        ...

    def is_admitted(self, key: str) -> bool: ...

    def allocated(self) -> Collection[str]:
        """The pods holding a slot (the gang ledger): Volcano's Allocated tasks."""
        ...

    def backoff(self, key: str) -> str | None:
        """Why the gang may not be placed now (a gang timeout's backoff; with the install's
        bind entry restricted to a marker, a member without it), if so."""
        ...

    def room(self, snapshot: Snapshot, key: str) -> GangRoom: ...

    def victims(self, snapshot: Snapshot, key: str) -> list[VictimUnit]: ...

    def starving(self, queue: str) -> tuple[str, float, ResourceVector | None] | None:
        """The queue's starving gang (`plugins.actions.starvation`), since when the queue has had
        one (-1: unknown, now), and what it asks; None when it has none."""
        ...

    def apply(self, decision: Decision) -> None:
        """Apply one decision now (reservations, evictions, status, events)."""
        ...


@dataclass(slots=True)
class Decision:
    """What the cycle decided about one PodGroup. `reason` is None when the action succeeded
    (enqueued, admitted, adopted); `settled` is False when the answer depends on more than the
    group's own inputs (the rest of the cluster, time) and must be decided again next cycle;
    `queue_bound`, when it is settled only while its queue's pods and groups do not change
    either (an enqueue refusal: `plugins.actions.promise.refusal_follows_queue`)."""

    group: PodGroupRecord
    view: gangs.GangView
    stage: str
    action: str | None = None  # "enqueue" or "allocate" (None: decided at open)
    reason: str | None = None
    admission: Admission | None = None  # allocate's answer (plan, evictions)
    promise: Promise | None = None  # enqueued on the promise of these evictions
    refused: str | None = None  # the enqueue votes' refusal a promise answers
    settled: bool = True
    queue_bound: bool = False
    job: JobInput | None = None  # the job as the session's plugins saw it (allocate)
    numbers: tuple[Any, ...] | None = None  # its queue's numbers after the decision
    # It waits for its queue's share (`plugins.actions.starvation`): (what it asks, since when).
    starving: tuple[ResourceVector, float] | None = None
    # Held for its queue's starving gang (a hold phase): not decided on its own merits.
    holding: bool = False

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def slots(self) -> dict[str, str]:
        """Member -> node of an admitted gang's placement (empty otherwise)."""
        if self.reason is not None or self.admission is None or self.admission.plan is None:
            return {}
        return self.admission.plan.slots

    def held(self) -> ResourceVector:
        """What the placed members request together."""
        requests = {pod.key: pod.requests for pod in self.view.members}
        return sum_vectors(requests[pod_key] for pod_key in self.slots)


def stage_of(session: Policy, group: PodGroupRecord, view: gangs.GangView, admitted: bool) -> str:
    """Which step of the cycle the group waits for (the module docstring)."""
    gang = session.has("gang")
    # Pending, or Inqueue but not placed whole: e.g. after a restart, a gang timeout or a
    # loss of members (members being deleted are scheduled but do not keep it whole).
    wants_admission = group.phase in ("Pending", "") or not gangs.whole(view)
    if not admitted and not wants_admission and not gangs.finished(view):
        return ADOPT
    if not gang and not admitted and not gangs.finished(view):
        return ENQUEUE
    if (
        group.job_owned
        and group.phase in ("Pending", "")
        and (view.created == 0 or session.job_valid(view) is not None)
    ):
        # A vcjob's pods are created only once its PodGroup is Inqueue: Volcano's enqueue
        # admits it on minResources alone (queue and overcommit; JobValid does not gate
        # enqueue), and its gang is placed when the pods arrive. Some of its pods may exist
        # already (created for an earlier group of the same name, e.g. around a restart):
        # waiting for the rest here would wait for ever, as the job creates them only once
        # this group is Inqueue.
        return ENQUEUE
    if not admitted and not gangs.finished(view):
        return ALLOCATE
    return ADMITTED if admitted else DONE


@dataclass(slots=True)
class Cycle:
    """What one cycle opened and decided: the queues (inputs and the queue plugin's share
    model, booked with the cycle's decisions), the state the plugins were asked with, and
    the decisions in the order taken."""

    queues: QueuePass
    state: PassState
    decisions: list[Decision]


def open_session(
    session: Policy,
    snapshot: Snapshot,
    books: QueueBooks,
    reserved_by_group: Mapping[str, ResourceVector],
    reserved_by_node: Mapping[str, ResourceVector],
    touched: Iterable[str] | None = None,
    now: float = 0.0,
) -> tuple[QueuePass, PassState]:
    """Volcano's OpenSession: the queues' inputs from the snapshot and the gang ledger's
    reservations (`plugins.model.queue_inputs`), the share model of the conf's queue plugin
    (OnSessionOpen), and the state every plugin is asked with."""
    queues = books.build(snapshot, reserved_by_group, session.open_queues, touched)
    state = PassState(
        model=queues.model,
        inputs=queues.inputs,
        total=snapshot.total_allocatable.as_dict(),
        used=cluster_used(snapshot, reserved_by_node),
        now=now,
    )
    return queues, state


def run_once(
    session: Policy,
    snapshot: Snapshot,
    host: CycleHost,
    *,
    books: QueueBooks,
    order: AdmissionOrder,
    reserved_by_group: Mapping[str, ResourceVector],
    reserved_by_node: Mapping[str, ResourceVector],
    prefer: Prefer,
    touched: Iterable[str] | None = None,
    now: float = 0.0,
) -> Cycle:
    """One cycle: open the session on `snapshot` (`open_session`), visit the PodGroups in
    the session's queue and job order (`order`), run the conf's actions in the order listed,
    and give back what was opened and the decisions, in the order taken."""
    queues, state = open_session(
        session, snapshot, books, reserved_by_group, reserved_by_node, touched, now
    )
    decisions = _decide(
        session, snapshot, state, order.queues(snapshot, queues, state), host, prefer
    )
    return Cycle(queues, state, decisions)


def _decide(
    session: Policy,
    snapshot: Snapshot,
    state: PassState,
    queues: Iterable[tuple[str, Iterable[PodGroupRecord]]],
    host: CycleHost,
    prefer: Prefer,
) -> list[Decision]:
    waiting: list[tuple[PodGroupRecord, gangs.GangView, str]] = []
    decisions: list[Decision] = []

    def take(decision: Decision) -> None:
        decision.numbers = queue_numbers(state, decision.group.queue)
        host.apply(decision)
        decisions.append(decision)

    for queue, groups in queues:
        if not host.visit(queue, queue_numbers(state, queue)):
            continue
        for group in groups:
            if host.settled(group, queue_numbers(state, group.queue)):
                continue
            view = gangs.gang_view(snapshot, group.key, allocated=host.allocated())
            if view is None:
                continue
            stage = stage_of(session, group, view, host.is_admitted(group.key))
            if stage in (ADOPT, ADMITTED, DONE):
                take(Decision(group, view, stage))
            else:
                waiting.append((group, view, stage))
    actions = session.actions
    queue_memo: dict[Any, Any] = {}
    decided: set[str] = set()
    for action in actions:
        for group, view, stage in waiting:
            if group.key in decided:
                continue
            if action == "enqueue" and stage == ENQUEUE:
                take(_enqueue(session, state, snapshot, group, view, host, action))
            elif action == "allocate" and stage == ALLOCATE:
                decision = _allocate(
                    session, state, snapshot, group, view, host, prefer, queue_memo
                )
                take(decision)
                if decision.ok and decision.admission is not None and decision.job is not None:
                    # Volcano's Allocate event handlers: the queue's numbers, overcommit's.
                    session.job_allocated(decision.job, decision.held(), state)
            elif action == "allocate" and stage == ENQUEUE and "enqueue" not in actions:
                take(_enqueue(session, state, snapshot, group, view, host, action))
            else:
                continue
            decided.add(group.key)
    for group, view, stage in waiting:
        if group.key not in decided:
            missing = "allocate" if stage == ALLOCATE else "enqueue or allocate"
            reason = f"gang {group.key}: waiting: the scheduler conf has no {missing} action"
            take(Decision(group, view, stage, reason=reason))
    return decisions


def _enqueue(
    session: Policy,
    state: PassState,
    snapshot: Snapshot,
    group: PodGroupRecord,
    view: gangs.GangView,
    host: CycleHost,
    action: str,
) -> Decision:
    """Volcano's enqueue for one job: the session's JobEnqueueable votes (its queue Open and
    able to hold its minResources, the cluster x the overcommit factor too), booked with
    JobEnqueued; nothing is reserved. Decided again next cycle, unless it is a refusal only
    the job or its queue changing can reverse (`queue_bound`)."""
    key = group.key
    job = job_input(snapshot, group)
    refusal = enqueue(session, state, job)
    promise = None
    if refusal is not None:
        # Beyond Volcano: enqueued when evicting lower-priority work of its queue (or work
        # of queues over their share) would make the votes pass; its pods get made and the
        # allocate action evicts for it (`plugins.actions.promise`).
        victims = host.victims(snapshot, key)
        promise = enqueue_by_eviction(session, state, job, victims)
        if promise is None:
            refused = refusal.reason
            if "preempt" in session.actions:
                refused += held_by_peers(group.queue, job.priority, victims)
            reason = f"gang {key}: waiting for admission: {refused}"
            # Kept until the job or its queue changes when nothing else can reverse it.
            follows = refusal_follows_queue(session, state, job, refusal, victims)
            return Decision(
                group, view, ENQUEUE, action, reason=reason, settled=follows, queue_bound=follows
            )
        session.job_enqueued(job, state)
    refused = refusal.reason if refusal is not None else None
    return Decision(group, view, ENQUEUE, action, promise=promise, refused=refused, settled=False)


def _allocate(
    session: Policy,
    state: PassState,
    snapshot: Snapshot,
    group: PodGroupRecord,
    view: gangs.GangView,
    host: CycleHost,
    prefer: Prefer,
    queue_memo: dict[Any, Any],
) -> Decision:
    """Volcano's allocate for one gang (the module docstring), booked with the Allocate event
    handlers when placed."""
    key = group.key
    waiting = host.backoff(key)
    if waiting is not None:
        return Decision(group, view, ALLOCATE, "allocate", reason=waiting, settled=False)
    starving = host.starving(group.queue)
    target = starving[0] if starving is not None else None
    now = state.now
    if starving is not None and target != key and not gangs.partly_placed(view):
        # (A gang partly placed goes ahead: its running members hold their room whatever the
        # hold does, and only its missing ones make it whole again.)
        since = starving[1] if starving[1] >= 0 else now
        if holds(since, now):
            # Its queue drains for a starving gang: the later gangs wait (a hold phase).
            why = hold_reason(session, state, group, view, starving[0])
            reason = f"gang {key}: waiting for admission: {why}"
            return Decision(
                group, view, ALLOCATE, "allocate", reason=reason, settled=False, holding=True
            )
    job = job_input(snapshot, group)
    # A backfill phase: a gang with its pods is enqueued beside the minResources of the
    # queue's gangs that wait for its share (the host's `starving` need: the starving gang's
    # and the others'; not flooding enqueue with pod-less jobs, which keep Volcano's rule).
    lifted = starving[2] if starving is not None and target != key else None
    with inqueue_lifted(state.model, group.queue, lifted):
        admission = allocate_gang(
            session,
            state,
            snapshot,
            group,
            view,
            job,
            host.room(snapshot, key),
            prefer=prefer,
            queue_memo=queue_memo,
            queue_numbers=queue_numbers(state, group.queue),
        )
    plan = admission.plan
    if plan is None or admission.reason is not None:
        reason = admission.reason or ""
        waits = None
        # A gang its queue has not enqueued (refused by the enqueue votes: the queue's
        # `inqueue`, its capability) is no target: holding the queue keeps its enqueued gangs
        # (and their `inqueue`) waiting, so the hold could not give it its room (issue 31's
        # soak: soak-q0 held for 24 minutes, every other gang of it waiting in each hold
        # phase, for a 30-cpu gang that 37 cpu of enqueued gangs kept out of enqueue). It
        # waits at enqueue as in Volcano.
        if not admission.at_enqueue and waits_for_share(session, state, group, view):
            waits = (starving_demand(group, view), now)
        # While its queue has a starving gang the answer depends on time too (hold and
        # backfill phases, `lifted`): decided again every pass.
        bound = admission.queue_bound and starving is None
        return Decision(
            group,
            view,
            ALLOCATE,
            "allocate",
            reason=reason,
            settled=bound if admission.queue_bound else not admission.volatile,
            queue_bound=bound,
            starving=waits,
        )
    return Decision(
        group,
        view,
        ALLOCATE,
        "allocate",
        admission=admission,
        settled=not admission.volatile,
        job=job,
    )
