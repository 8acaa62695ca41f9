"""One scheduling pass's session, as Volcano's (pkg/scheduler/framework: OpenSession on a
snapshot, the actions run over it, CloseSession): the snapshot and the extender's facts it was
opened on (read-only), the numbers the plugins read and book into (`PassState`: the queues'
share model, the cluster's sums), the room and victims the session's decisions take
(`plugins.framework.room`), the queues' starvation (`plugins.actions.starvation`), and the
decisions, in the order taken. What one action takes the next sees here, never through the
extender, which applies the decisions after the session closes.

Every question to the policy goes through the session (`allocatable`, `enqueue_refusal`, ...:
`plugins.framework.session_answers`), which logs it with its answer for the memo when a decision
is being read (`plugins.framework.reads`): the policy code declares its inputs by asking, and
knows nothing of caching. Each booking is checked against the queues' accounting invariants
(`plugins.framework.books_check`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from core.records import PodGroupRecord
from core.resources import ResourceVector
from plugins.framework.books_check import (
    VICTIM_PROMISED_TWICE,
    Breach,
    booking_breaches,
    books_before,
)
from plugins.framework.decisions import (
    Admitted,
    Adopted,
    Decision,
    Enqueued,
    Grown,
    Seen,
    Waiting,
)
from plugins.framework.extension_points import (
    PassState,
)
from plugins.framework.inputs import ROOM
from plugins.framework.pass_input import PassInput, QueueWait
from plugins.framework.policy import Policy
from plugins.framework.reads import ReadLog
from plugins.framework.room import Room, VictimPool
from plugins.framework.session_answers import PolicyAnswers
from plugins.framework.starvation_book import Starvation, inqueue_lifted
from plugins.model.elastic import elastic_added
from plugins.model.gang import GangView
from plugins.model.job_input import job_input
from plugins.model.job_order import JobInput
from plugins.model.queue_inputs import QueuePass
from plugins.model.victims import VictimUnit

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = ["PassResult", "Session"]


class Jobs(Protocol):
    """The session's queues and jobs in order (`plugins.framework.traversal.Traversal`)."""

    def run(
        self,
        phase: str,
        stages: tuple[str, ...],
        decide: Callable[[PodGroupRecord, GangView], Decision],
    ) -> None: ...

    def stage(self, key: str) -> str | None: ...


class _NoJobs:
    def run(
        self,
        phase: str,
        stages: tuple[str, ...],
        decide: Callable[[PodGroupRecord, GangView], Decision],
    ) -> None:
        raise RuntimeError("the session was opened without its traversal")

    def stage(self, key: str) -> str | None:
        return None


@dataclass(slots=True)
class PassResult:
    """What a closed session hands the extender: its decisions in the order taken, the queues
    as it closed them (status, metrics, the filter's queue checks until the next pass), the
    queues' starvation, the pods promised to jobs enqueued on a promise of eviction, and the
    accounting invariants its bookings broke (any is a bug)."""

    decisions: list[Decision]
    queues: QueuePass
    state: PassState
    starving: dict[str, QueueWait]
    promised: dict[str, frozenset[str]] = field(default_factory=dict)
    breaches: list[Breach] = field(default_factory=list)


class Session(PolicyAnswers):
    def __init__(
        self,
        given: PassInput,
        policy: Policy,
        queues: QueuePass,
        victims: Callable[[str], list[VictimUnit]],
    ) -> None:
        self.input = given
        self.policy = policy
        self.snapshot: Snapshot = given.snapshot
        self.facts = given.facts
        self.settings = given.settings
        self.now = given.now
        self.queues = queues
        ledger = given.facts.ledger
        self.state = PassState(
            model=queues.model,
            inputs=queues.inputs,
            total=given.snapshot.total_allocatable.as_dict(),
            used=_cluster_used(given.snapshot, ledger.by_node if ledger is not None else {}),
            now=given.now,
        )
        self.room = Room(given.snapshot, given.facts)
        self.victims = VictimPool(victims, self._victim_queues, given.facts.promised)
        podgroups = given.snapshot.podgroups
        self.starvation = Starvation(
            given.facts.starving, lambda key: g.queue if (g := podgroups.get(key)) else None
        )
        self.admitted_now: set[str] = set()
        self.enqueued_now: dict[str, ResourceVector | None] = {}  # -> its minResources
        # gang -> its elastic members waiting for a slot (the facts', and those seen now).
        self.elastic_waiting: dict[str, frozenset[str]] = dict(given.facts.elastic_waiting)
        self.promised: dict[str, frozenset[str]] = {}
        self.decisions: list[Decision] = []
        self.breaches: list[Breach] = []  # invariants its bookings broke (`books_check`)
        # gang -> the `inqueue` of its queue's gangs waiting for the share that a backfill
        # phase lent it (`plugins.actions.starvation`): its booking may use that room.
        self.lent: dict[str, ResourceVector] = {}
        self.log: ReadLog | None = None  # the reads of the decision being taken (the memo's)
        # Moves whenever the numbers the plugins read change (a booking, a lifted `inqueue`):
        # an answer is the same for the same question within one version.
        self.version = 0
        self._asked: dict[Hashable, tuple[int, Any]] = {}
        self._numbers: dict[str, tuple[int, Any]] = {}
        self._queues_at_open: tuple[Any, ...] | None = None
        # Queues and jobs in order (`plugins.framework.traversal`), set by who opens it.
        self.traversal: Jobs = _NoJobs()

    # ------------------------------------------------------------------ facts

    def is_admitted(self, key: str) -> bool:
        return key in self.admitted_now or key in self.facts.admitted

    def allocated_pods(self) -> Collection[str]:
        """The pods holding a slot (Volcano's Allocated tasks): the ledger's."""
        ledger = self.facts.ledger
        return ledger.pods() if ledger is not None else ()

    def backoff(self, key: str) -> str | None:
        """Why the gang may not be placed now (after a gang timeout), if so."""
        found = self.facts.backoff.get(key)
        if found is None:
            return None
        reason, until = found
        self.due(until)
        return reason

    # ------------------------------------------------------------------ bookings

    @contextmanager
    def lifted(self, queue: str, amount: ResourceVector | None) -> Iterator[None]:
        """Within the block, the queue's `inqueue` without `amount` (a backfill phase's lift,
        `plugins.actions.starvation.inqueue_lifted`); answers within are its own."""
        if amount is None:
            yield
            return
        self.version += 1
        try:
            with inqueue_lifted(self.state.model, queue, amount):
                yield
        finally:
            self.version += 1

    def job_enqueued(self, job: JobInput) -> None:
        self.policy.job_enqueued(job, self.state)
        self.version += 1

    def job_allocated(self, job: JobInput, held: ResourceVector) -> None:
        self.policy.job_allocated(job, held, self.state)
        self.version += 1

    def task_allocated(self, queue: str, request: ResourceVector) -> None:
        self.policy.task_allocated(queue, request, self.state)
        self.version += 1

    def task_deallocated(self, queue: str, request: ResourceVector) -> None:
        self.policy.task_deallocated(queue, request, self.state)
        self.version += 1

    def counted_inqueue(self, group: PodGroupRecord) -> ResourceVector | None:
        """What the queue's `inqueue` counts for `group` now: what job_enqueued booked this
        session, else for an Inqueue group what its books counted at open."""
        if group.key in self.enqueued_now:
            return self.enqueued_now[group.key]
        return self.queues.counted_inqueue(group.key) if group.phase == "Inqueue" else None

    def _book_elastic(self, group: PodGroupRecord, slots: Mapping[str, str]) -> None:
        """The members a gang was allocated beyond what it needs to start count in its
        queue's `elastic` too, as the next session's books count them."""
        if self.state.model is None:
            return
        pods = self.snapshot.pods
        placed = [
            pod
            for key in self.snapshot.pods_by_group.get(group.key, ())
            if (pod := pods.get(key)) is not None
            and pod.node is not None
            and not pod.terminal
            and not pod.deleting
        ]
        new = [pods[key] for key in slots if key in pods]
        added = elastic_added(placed, new, group.min_resources, group.min_member)
        if not added.is_zero():
            self.state.model.on_elastic(group.queue, added)

    def _release_inqueue(self, group: PodGroupRecord) -> None:
        """A group goes back to Pending: what its queue's `inqueue` counted for it goes."""
        counted = self.counted_inqueue(group)
        if counted is not None and self.state.model is not None:
            self.state.model.release_inqueue(group.queue, counted)
            self.version += 1

    # ------------------------------------------------------------------ room and victims

    def victims_for(
        self, key: str, queue: str | None, below: int | None = None
    ) -> list[VictimUnit]:
        """What reclaim and preempt may take for job `key`: of `queue` only (preempt), or of
        any queue (None: reclaim too); with `below`, only units of a lower priority (all
        preempt may take). A decision reading a queue's units reads exactly those it got."""
        units = self.victims.for_job(key, queue)
        if below is not None:
            units = [u for u in units if u.priority < below]
        if queue is None:
            self.read(("victims", None))
        else:
            self.read(("units", queue, below))
        return units

    def _victim_queues(self) -> Iterable[str]:
        return self.snapshot.bound_by_queue.keys()

    def room_read(self) -> None:
        self.read(ROOM)

    def admit(self, key: str) -> None:
        self.admitted_now.add(key)

    def promise(self, key: str, units: Iterable[VictimUnit]) -> None:
        units = list(units)
        for pod in sorted({p for unit in units for p in unit.pods}):
            other = self.victims.promised_to(pod)
            if other is not None and other != key:
                detail = f"promised to {key} while promised to {other}"
                self.breaches.append(Breach(VICTIM_PROMISED_TWICE, pod, key, detail))
        self.victims.take(units, job=key)
        self.promised[key] = frozenset(p for unit in units for p in unit.pods)

    def evict(self, units: Sequence[VictimUnit]) -> None:
        self.victims.take(units)
        self.room.free(units)

    # ------------------------------------------------------------------ decisions

    def take(self, decision: Decision, group: PodGroupRecord, *, replayed: bool = False) -> None:
        """Take `decision` into the session: what it places, evicts, books, and what it says
        of its queue's starvation. A decision the memo kept (`replayed`) is not handed over
        again (the extender applied it already); only its effects on the session count."""
        if not replayed:
            self.decisions.append(decision)
        queue, key = decision.queue, decision.key
        if type(decision) is Seen and not decision.elastic:  # most of a queue's gangs
            self.starvation.note(queue, key, None, held=False)
            return
        if isinstance(decision, Waiting):
            enqueued = group.phase == "Inqueue"
            if decision.dequeue:
                self._release_inqueue(group)
            share = decision.share
            self.starvation.note(queue, key, share if enqueued else None, held=decision.held)
            if share is not None:
                self.starvation.starve(queue, key, self.now)
            return
        self.starvation.note(queue, key, None, held=False)
        if isinstance(decision, Admitted):
            pods = self.snapshot.pods
            self.room.take(decision.slots, {p: pods[p].requests for p in decision.slots})
            if decision.evictions is not None:
                self.evict(decision.evictions.units)
            self.admitted_now.add(key)
            # Volcano's Allocate event handlers: the queue's numbers, overcommit's.
            job = job_input(self.snapshot, group)
            job.inqueue = self.counted_inqueue(group)
            before = books_before(self.state.model, queue)
            self.job_allocated(job, decision.held)
            self._book_elastic(group, decision.slots)
            if not replayed:
                booked = f"allocated {decision.held}, {group.phase} counted {job.inqueue}"
                evicting = decision.evictions.units if decision.evictions is not None else ()
                lent = self.lent.pop(key, None)
                self.breaches += booking_breaches(
                    self.state.model, before, key, booked, evicting, lent
                )
        elif isinstance(decision, Enqueued):
            counted = self.counted_inqueue(group)  # (a breach's detail says what was counted)
            self.enqueued_now[key] = group.min_resources
            before = books_before(self.state.model, queue)
            self.job_enqueued(job_input(self.snapshot, group))
            if not replayed:
                booked = f"enqueued {group.min_resources}, {group.phase} counted {counted}"
                promised = decision.promise.units if decision.promise is not None else ()
                self.breaches += booking_breaches(self.state.model, before, key, booked, promised)
            if decision.promise is not None:
                self.promise(key, decision.promise.units)
            if not self.policy.has("gang"):
                self.admitted_now.add(key)  # without the gang plugin enqueued is admitted
        elif isinstance(decision, Adopted):
            self.admitted_now.add(key)
        elif isinstance(decision, Seen) and decision.elastic:
            known = self.elastic_waiting.get(key, frozenset())
            self.elastic_waiting[key] = known | frozenset(decision.elastic)
        elif isinstance(decision, Grown):
            self.room.take({decision.pod: decision.node}, {decision.pod: decision.request})
            if decision.evictions is not None:
                self.evict(decision.evictions.units)
            before = books_before(self.state.model, queue)
            self.task_allocated(queue, decision.request)
            if self.state.model is not None:
                self.state.model.on_elastic(queue, decision.request)
            if not replayed:
                booked = f"grew {decision.pod} {decision.request}"
                evicting = decision.evictions.units if decision.evictions is not None else ()
                self.breaches += booking_breaches(self.state.model, before, key, booked, evicting)

    def close(self) -> PassResult:
        return PassResult(
            self.decisions,
            self.queues,
            self.state,
            self.starvation.close(),
            self.promised,
            self.breaches,
        )

    def group(self, key: str) -> PodGroupRecord | None:
        return self.snapshot.podgroups.get(key)


def _cluster_used(snapshot: Snapshot, reserved_by_node: Any) -> dict[str, int]:
    """What the overcommit rule counts as taken: the requests of bound pods plus the gang
    ledger's reservations (admitted groups' minResources, approximately)."""
    used = snapshot.total_requested.as_dict()
    for reserved in reserved_by_node.values():
        for name, amount in reserved.items():
            used[name] = used.get(name, 0) + amount
    return used
