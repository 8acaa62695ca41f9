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
what the change can affect.

Beside the decisions it keeps what opening a session would otherwise compute from the whole
cluster: the queues' books (`plugins.model.queue_inputs.QueueBooks`, refreshed for the groups
that changed), the jobs' order keys (per group version and cluster total), and the victims
(per state of the cache).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from core.api import keys
from plugins.framework.decisions import Decision, Seen, Waiting
from plugins.framework.pass_input import PassInput
from plugins.framework.policy import Policy
from plugins.framework.reads import ReadLog
from plugins.model.job_input import job_input
from plugins.model.queue_inputs import QueueBooks, QueuePass
from plugins.model.victims import VictimUnit, victim_units

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["Memo"]


class _Entry:
    __slots__ = ("decision", "facts", "log", "phase", "queue", "stage")

    def __init__(
        self, decision: Decision, facts: tuple[Any, ...], log: ReadLog, phase: str, stage: str
    ) -> None:
        self.decision = decision
        self.facts = facts
        self.log = log
        self.phase = phase
        self.queue = decision.queue
        self.stage = stage


class Memo:
    def __init__(self) -> None:
        self.books = QueueBooks()
        self._entries: dict[str, _Entry] = {}
        self._members: dict[tuple[str, str], set[str]] = {}  # (queue, phase) -> kept gangs
        self._summaries: dict[tuple[str, str], ReadLog] = {}  # their reads, merged
        self._changed: set[str] = set()  # gangs whose facts changed since the last pass
        self._dirty_queues: set[str] = set()
        self._orders: dict[str, tuple[Any, list[str]]] = {}  # queue -> (total, job order)
        self._order_keys: dict[str, tuple[Any, Any, tuple[Any, ...]]] = {}
        self._victims: tuple[int, list[VictimUnit]] | None = None
        self._fresh: list[Decision] = []  # this pass's decisions not kept (for `table`)

    # ------------------------------------------------------------------ opening

    def changed(self, group_keys: Iterable[str]) -> None:
        """Groups whose PodGroup, pods or extender facts changed since the last pass (the
        cache's dirty groups and what the extender touched)."""
        self._changed.update(group_keys)

    def queue_pass(self, given: PassInput, policy: Policy) -> QueuePass:
        ledger = given.facts.ledger
        reserved = ledger.by_group() if ledger is not None else {}
        return self.books.build(given.snapshot, reserved, policy.open_queues, set(self._changed))

    def victims(self, given: PassInput) -> Callable[[], list[VictimUnit]]:
        """The victims, built once per state of the cache."""

        def units() -> list[VictimUnit]:
            clock = given.snapshot.epochs.clock
            if self._victims is None or self._victims[0] != clock:
                settings = given.settings
                built = victim_units(
                    given.snapshot,
                    "",
                    given.facts.releasing,
                    lambda pod: settings.queue_of(pod) or keys.DEFAULT_QUEUE,
                    settings.served,
                )
                self._victims = (clock, built)
            return self._victims[1]

        return units

    def start(self, ssn: Session) -> None:
        """A pass begins: the queues of the changed gangs, then and now, are visited."""
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

    def stage(self, ssn: Session, key: str) -> str | None:
        entry = self._entries.get(key)
        if entry is None or key in self._changed or entry.facts != self.facts(ssn, key):
            return None
        return entry.stage

    def queue_stands(self, ssn: Session, queue: str, phase: str) -> bool:
        """Nothing a decision of `phase` about the queue's gangs reads has changed."""
        if queue in self._dirty_queues:
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

    def kept(self, ssn: Session, key: str, phase: str) -> Decision | None:
        entry = self._entries.get(key)
        if (
            entry is None
            or entry.phase != phase
            or key in self._changed
            or entry.facts != self.facts(ssn, key)
            or not entry.log.holds(ssn)
        ):
            return None
        return entry.decision

    def job_order(self, ssn: Session, queue: str) -> list[str]:
        """The queue's gangs in job order, sorted again only when one of them changed or the
        cluster total moved (drf divides by it)."""
        total = ssn.snapshot.total_allocatable
        known = self._orders.get(queue)
        if known is not None and known[0] == total and queue not in self._dirty_queues:
            return known[1]
        snapshot = ssn.snapshot
        versions = snapshot.group_versions
        ranked = []
        for key in ssn.queues.groups_by_queue.get(queue, ()):
            group = snapshot.podgroups.get(key)
            if group is None:
                continue
            cached = self._order_keys.get(key)
            version = versions.get(key)
            if cached is None or cached[0] != version or cached[1] != total:
                cached = (version, total, ssn.job_order_key(job_input(snapshot, group)))
                self._order_keys[key] = cached
            ranked.append((cached[2], key))
        ranked.sort()
        order = [key for _, key in ranked]
        self._orders[queue] = (total, order)
        return order

    # ------------------------------------------------------------------ closing

    def record(
        self, ssn: Session, decision: Decision, phase: str, stage: str | None, log: ReadLog
    ) -> None:
        """A decision taken this pass: kept when it changed nothing (a refusal, a gang seen),
        with its reads; one that changed something is decided again next pass."""
        key = decision.key
        self._drop(key)
        if not isinstance(decision, Waiting | Seen) or stage is None:
            self._fresh.append(decision)
            self._changed.add(key)  # what it changed shows in its facts next pass
            return
        if key in ssn.facts.unsettled:
            log.keep = False  # its status follows its members' room: seen every pass
        self._entries[key] = _Entry(decision, self.facts(ssn, key), log, phase, stage)
        self._members.setdefault((decision.queue, phase), set()).add(key)
        self._summaries.pop((decision.queue, phase), None)

    def finish(self, ssn: Session) -> None:
        """The pass is over: gangs gone are forgotten; every change was looked at (a changed
        gang's queue was visited in every phase). What this pass changed (an admission, an
        enqueue) shows in the gang's facts next pass, and is looked at again then."""
        podgroups = ssn.snapshot.podgroups
        for key in self._changed:
            if key not in podgroups:
                self._drop(key)
                self._order_keys.pop(key, None)
        self._changed = {decision.key for decision in self._fresh}
        self._dirty_queues = set()

    def forget(self) -> None:
        """Everything kept goes (a new conf: nothing it decided holds)."""
        self.__init__()  # type: ignore[misc]

    def table(self) -> dict[tuple[str, str], tuple[Any, ...]]:
        """Every gang's decision the memo keeps after a pass: with the pass's own decisions,
        what a pass without the memo must agree with."""
        return {(key, "gang"): entry.decision.summary() for key, entry in self._entries.items()}

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        members = self._members.get((entry.queue, entry.phase))
        if members is not None:
            members.discard(key)
            if not members:
                del self._members[(entry.queue, entry.phase)]
        self._summaries.pop((entry.queue, entry.phase), None)
