"""The memo: what lets a pass cost what changed, not what exists. It sits beside the policy,
which knows nothing of it, and may be switched off (`vulcan extender --scheduler-memo=off`):
then every pass decides everything afresh, and must decide the same (the soak's
`--check-memo` and a property test compare the two).

It keeps, per PodGroup, its last decision that changed nothing (a refusal, a gang seen
admitted) with the gang's own facts when it was taken (its version, admitted or not, what it
holds, its backoff and promise) and what the decision read (`plugins.framework.reads`). A
decision is reused while its facts are the same and everything it read still reads the same
at its turn in the session. Per queue and phase it keeps the union of its gangs' reads: a
queue none of whose gangs changed, whose union still reads the same, is not visited at all.
So with nothing changed a pass asks a few questions per queue; after a change it decides again
what the change can affect. Within a visited queue, a gang whose kept decision changes nothing
when taken again (a gang seen) and whose own facts did not move (the cache's changed groups and
`plugins.framework.fact_changes`) is passed by without reading them.

Beside the decisions it keeps what opening a session would otherwise compute from the whole
cluster: the queues' books (`plugins.model.queue_inputs.QueueBooks`, refreshed for the groups
that changed), the share plugin's per-queue parts of the queues whose input did not change
(`plugins.framework.kept_parts`), the queues' job orders (`plugins.framework.kept_orders`),
and the victims (per state of the cache).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from plugins.framework.decisions import Decision, Seen, Waiting
from plugins.framework.fact_changes import FactChanges
from plugins.framework.kept_orders import KeptOrders
from plugins.framework.kept_parts import KeptParts
from plugins.framework.pass_input import PassInput
from plugins.framework.policy import Policy
from plugins.framework.reads import ReadLog
from plugins.framework.session import PassResult
from plugins.model.queue_inputs import OpenQueues, QueueBooks, QueuePass
from plugins.model.victims import VictimUnit, victim_units_of

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["Memo"]


class _Entry:
    __slots__ = ("decision", "facts", "inert", "log", "phase", "queue", "stage")

    def __init__(
        self, decision: Decision, facts: tuple[Any, ...], log: ReadLog, phase: str, stage: str
    ) -> None:
        self.decision = decision
        self.facts = facts
        self.log = log
        self.phase = phase
        self.queue = decision.queue
        self.stage = stage
        # Taken again, it changes nothing in the session (a gang seen, without elastic members
        # for backfill), and it read nothing but its own facts: it stands while they do.
        self.inert = (
            type(decision) is Seen
            and not decision.elastic
            and log.keep
            and log.until == math.inf
            and not log.answers
            and not log.inputs
        )


class Memo:
    def __init__(self) -> None:
        self.books = QueueBooks()
        self.parts = KeptParts()  # the share plugin's per-queue parts of unchanged queues
        self._open: tuple[Policy, OpenQueues] | None = None
        self._entries: dict[str, _Entry] = {}
        self._members: dict[tuple[str, str], set[str]] = {}  # (queue, phase) -> kept gangs
        self._summaries: dict[tuple[str, str], ReadLog] = {}  # their reads, merged
        self._changed: set[str] = set()  # gangs whose facts changed since the last pass
        self._dirty_queues: set[str] = set()
        self._visited: set[tuple[str, str]] = set()  # (queue, phase) looked at whole once
        self.orders = KeptOrders()
        self._victims: dict[str, tuple[int | None, list[VictimUnit]]] = {}
        self._queues: QueuePass | None = None  # the last share model, as built
        self._queues_basis: Any = None
        self._reserved: Any = None
        self._fresh: list[Decision] = []  # this pass's decisions not kept (for `table`)
        # For a pass with nothing changed: the last result and what it was taken on.
        self._last: PassResult | None = None
        self._last_basis: Any = None
        self._open_used: dict[str, int] = {}
        self._due: dict[str, float] = {}  # kept decisions due again at a time
        self._unkept: set[str] = set()  # kept decisions that stand for no pass
        # This pass's facts per gang, as `stage` found them: they move only when the gang
        # itself is decided (an admission), after which `record` reads them afresh.
        self._facts_now: dict[str, tuple[Any, ...]] = {}
        self._fact_changes = FactChanges()
        self._facts_followed = False  # every gang whose facts moved since the last pass known

    # ------------------------------------------------------------------ opening

    def changed(self, group_keys: Iterable[str]) -> None:
        """Groups whose PodGroup, pods or extender facts changed since the last pass (the
        cache's dirty groups and what the extender touched)."""
        self._changed.update(group_keys)

    def queue_pass(self, given: PassInput, policy: Policy) -> QueuePass:
        """The queues a session opens with: the books refreshed for the groups that changed,
        and the share model built again only when something it is built from moved (else the
        last one, copied: a session books into its own)."""
        ledger = given.facts.ledger
        reserved = ledger.by_group() if ledger is not None else {}
        snapshot = given.snapshot
        basis = (snapshot.epochs.clock, snapshot.total_allocatable, policy)
        last = self._queues
        if (
            last is None
            or self._changed
            or basis != self._queues_basis
            or reserved != self._reserved
        ):
            # Kept as built (nothing else holds it); each session books into its own copy.
            open_queues = self._open_queues(policy)
            last = self.books.build(snapshot, reserved, open_queues, set(self._changed))
            self._queues, self._queues_basis, self._reserved = last, basis, reserved
        return QueuePass(
            last.model.clone(),
            last.inputs,
            last.groups_by_queue,
            last.phases,
            contended=last.contended,
            counted_inqueue=last.counted_inqueue,
            released=last.released,
        )

    def _open_queues(self, policy: Policy) -> OpenQueues:
        """The policy's share model with the kept parts: one object per policy, as the books
        tell an unchanged model by its builder too."""
        if self._open is None or self._open[0] is not policy:
            self._open = (policy, functools.partial(policy.open_queues, parts=self.parts))
        return self._open[1]

    def victims(self, given: PassInput) -> Callable[[str], list[VictimUnit]]:
        """A queue's victims, built again only when its pods that hold a node changed."""

        def units_of(queue: str) -> list[VictimUnit]:
            epoch = given.snapshot.epochs.queue_pods.get(queue)
            known = self._victims.get(queue)
            if known is None or known[0] != epoch:
                built = victim_units_of(
                    given.snapshot, queue, given.facts.releasing, given.settings.served
                )
                known = self._victims[queue] = (epoch, built)
            return known[1]

        return units_of

    def idle(self, given: PassInput, changed: set[str]) -> PassResult | None:
        """The result of a pass with nothing changed since the last one (no gang, no cache
        epoch, no fact, no decision due): the last one's, nothing decided. None otherwise."""
        last = self._last
        if last is None or changed or self._changed or self._unkept or last.queues.tentative:
            return None
        facts = given.facts
        if facts.unsettled or facts.elastic_waiting:
            return None
        if self._due and given.now >= min(self._due.values()):
            return None
        if self._basis(given) != self._last_basis:
            return None
        pristine = self._queues
        assert pristine is not None
        queues = QueuePass(
            pristine.model.clone(),
            pristine.inputs,
            pristine.groups_by_queue,
            pristine.phases,
            contended=pristine.contended,
            counted_inqueue=pristine.counted_inqueue,
            released=pristine.released,
        )
        state = dataclasses.replace(
            last.state, model=queues.model, used=dict(self._open_used), now=given.now
        )
        return PassResult([], queues, state, last.starving, {})

    @staticmethod
    def _basis(given: PassInput) -> tuple[Any, ...]:
        facts = given.facts
        return (
            given.snapshot.epochs.clock,
            facts.promised_version,
            frozenset(facts.backoff),
            len(facts.admitted),
        )

    def start(self, ssn: Session) -> None:
        """A pass begins: the gangs whose facts moved since the last pass count as changed
        (told or not), and the queues of the changed gangs, then and now, are visited."""
        moved = self._fact_changes.moved(ssn.facts)
        self._facts_followed = moved is not None
        if moved:
            self._changed |= moved
        podgroups = ssn.snapshot.podgroups
        dirty: set[str] = set()
        for key in self._changed:
            group = podgroups.get(key)
            if group is not None:
                dirty.add(group.queue)
            entry = self._entries.get(key)
            if entry is not None:
                dirty.add(entry.queue)
        self._dirty_queues = dirty
        self._fresh = []
        self._facts_now = {}
        self._open_used = dict(ssn.state.used)

    # ------------------------------------------------------------------ the traversal's asks

    def facts(self, ssn: Session, key: str) -> tuple[Any, ...]:
        """The gang's own inputs: its version, admitted or not, what it holds, its backoff,
        its promise."""
        facts = ssn.facts
        ledger = facts.ledger
        return (
            ssn.snapshot.group_versions.get(key),
            ssn.is_admitted(key),
            ledger.held_by(key) if ledger is not None else None,
            facts.backoff.get(key),
            facts.promised.get(key),
        )

    def _facts_of(self, ssn: Session, key: str) -> tuple[Any, ...]:
        known = self._facts_now.get(key)
        if known is None:
            known = self._facts_now[key] = self.facts(ssn, key)
        return known

    def stage(self, ssn: Session, key: str) -> str | None:
        entry = self._entries.get(key)
        if entry is None or key in self._changed or entry.facts != self._facts_of(ssn, key):
            return None
        return entry.stage

    def settled(self, ssn: Session, key: str, phase: str) -> str | None:
        """The stage of a gang whose kept decision at `phase` is inert (see `_Entry`) and whose
        facts did not move since the pass that kept it (not changed: the cache's changed
        groups, and the extender's facts compared whole in `start`): taking it again would
        change nothing, so the traversal passes it by without reading its facts. None
        otherwise."""
        entry = self._entries.get(key)
        if (
            entry is None
            or not entry.inert
            or entry.phase != phase
            or not self._facts_followed
            or key in self._changed
            or ssn.starvation.waits(entry.queue, key)
        ):
            return None
        return entry.stage

    def queue_stands(self, ssn: Session, queue: str, phase: str) -> bool:
        """Nothing a decision of `phase` about the queue's gangs reads has changed."""
        if queue in self._dirty_queues or (queue, phase) not in self._visited:
            return False
        members = self._members.get((queue, phase))
        if not members:
            return True  # no gang of it waits for this phase (one that now does changed)
        summary = self._summaries.get((queue, phase))
        if summary is None:
            summary = ReadLog()
            for key in members:
                summary.merge(self._entries[key].log)
            self._summaries[(queue, phase)] = summary
        return summary.holds(ssn)

    def visited(self, queue: str, phase: str) -> None:
        """The traversal looked at every gang of `queue` in `phase`: what it did not decide
        again is kept, so a queue none of whose gangs is kept has none waiting for it."""
        self._visited.add((queue, phase))

    def kept(self, ssn: Session, key: str, phase: str) -> Decision | None:
        entry = self._entries.get(key)
        if (
            entry is None
            or entry.phase != phase
            or key in self._changed
            or entry.facts != self._facts_of(ssn, key)
            or not entry.log.holds(ssn)
        ):
            return None
        return entry.decision

    def job_order(self, ssn: Session, queue: str) -> list[str]:
        """The queue's gangs in job order, ranked again only when one of them changed or the
        cluster total moved (drf divides by it)."""
        return self.orders.of(ssn, queue, changed=queue in self._dirty_queues)

    # ------------------------------------------------------------------ closing

    def record(
        self, ssn: Session, decision: Decision, phase: str, stage: str | None, log: ReadLog
    ) -> bool:
        """A decision taken this pass: kept when it changed nothing (a refusal, a gang seen),
        with its reads; one that changed something is decided again next pass. False when it
        is the one kept already (the extender has it)."""
        key = decision.key
        old = self._entries.get(key)
        self._drop(key)
        if not isinstance(decision, Waiting | Seen) or stage is None:
            self._fresh.append(decision)
            self._changed.add(key)  # what it changed shows in its facts next pass
            return True
        unsettled = key in ssn.facts.unsettled
        if unsettled:
            log.keep = False  # its status follows its members' room: seen every pass
        if isinstance(decision, Seen) and decision.elastic:
            # Its waiting elastic members reach backfill through this decision, which reads
            # nothing backfill does (a HyperNode rewired, room freed): seen every pass too.
            log.keep = False
        facts = self.facts(ssn, key)
        self._entries[key] = _Entry(decision, facts, log, phase, stage)
        self._members.setdefault((decision.queue, phase), set()).add(key)
        self._summaries.pop((decision.queue, phase), None)
        if not log.keep:
            self._unkept.add(key)
        elif log.until != math.inf:
            self._due[key] = log.until
        return (
            old is None
            or unsettled
            or old.phase != phase
            or old.facts != facts
            or old.decision.summary() != decision.summary()
        )

    def finish(self, ssn: Session) -> None:
        """The pass is over: gangs gone are forgotten; every change was looked at (a changed
        gang's queue was visited in every phase). What this pass changed (an admission, an
        enqueue) shows in the gang's facts next pass, and is looked at again then."""
        podgroups = ssn.snapshot.podgroups
        for key in self._changed:
            if key not in podgroups:
                self._drop(key)
                self.orders.forget(key)
        self._changed = {decision.key for decision in self._fresh}
        self._dirty_queues = set()

    def closed(self, given: PassInput, result: PassResult) -> None:
        """The pass's result, for the passes after it with nothing changed."""
        self._last = result
        self._last_basis = self._basis(given)

    def forget(self) -> None:
        """Everything kept goes (a new conf: nothing it decided holds)."""
        self.__init__()  # type: ignore[misc]

    def table(self) -> dict[tuple[str, str], tuple[Any, ...]]:
        """Every gang's decision the memo keeps after a pass: with the pass's own decisions,
        what a pass without the memo must agree with."""
        return {(key, "gang"): entry.decision.summary() for key, entry in self._entries.items()}

    def _drop(self, key: str) -> None:
        self._unkept.discard(key)
        self._due.pop(key, None)
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        members = self._members.get((entry.queue, entry.phase))
        if members is not None:
            members.discard(key)
            if not members:
                del self._members[(entry.queue, entry.phase)]
        self._summaries.pop((entry.queue, entry.phase), None)
