"""What a session's decisions read, logged for the memo (`plugins.framework.reads`): the
session's side of it, a base of `plugins.framework.session.Session`. `input_value` says what an
input is now, `asked_again` answers a question once per version of the session's numbers (a
booking, a lifted `inqueue`, moves the version), `_answer` logs a question with what its answer
depends on. Pure."""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from plugins.framework.extension_points import CLOCK, CLUSTER, QUEUE, PassState
from plugins.framework.inputs import QUEUES, ROOM, TOPOLOGY, TOTAL, USED
from plugins.framework.pass_input import ExtenderFacts
from plugins.framework.reads import Ask, Basis, ReadLog
from plugins.framework.room import Room, VictimPool
from plugins.framework.starvation_book import Starvation

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = ["SessionReads"]


class SessionReads:
    snapshot: Snapshot
    facts: ExtenderFacts
    state: PassState
    room: Room
    victims: VictimPool
    starvation: Starvation
    now: float
    log: ReadLog | None
    version: int
    _asked: dict[Hashable, tuple[int, Any]]
    _numbers: dict[str, tuple[int, Any]]
    _queues_at_open: tuple[Any, ...] | None

    # ------------------------------------------------------------------ the memo's reads

    def _answer(
        self,
        key: Hashable,
        ask: Ask,
        reads: frozenset[str] | None = None,
        queue: str = "",
    ) -> Any:
        """The answer to question `key` (asked once per version of the session: the gangs of
        a queue ask alike), logged for the memo with what it depends on beyond its question
        (`reads` of `queue`), so that the memo knows it unchanged without asking (None: the
        memo asks it again)."""
        answer = self.asked_again(key, ask)
        if self.log is not None:
            # A basis that reads no queue is the same for every queue's answers.
            about = queue if reads is not None and QUEUE in reads else ""
            basis = None if reads is None or CLOCK in reads else _basis(reads, about)
            seen = self.asked_again(*basis) if basis is not None else None
            self.log.answer(key, ask, answer, basis, seen)
        return answer

    def read(self, key: Hashable) -> None:
        """A decision reads input `key` (`input_value`): the memo compares it next pass."""
        if self.log is not None:
            self.log.input(key, self.input_value(key))

    def due(self, at: float) -> None:
        """A decision reads the time, and its answer stands until `at`: taken again then."""
        if self.log is not None:
            self.log.due(at)

    def clock_read(self) -> None:
        """A decision reads the time itself: it is taken again next pass."""
        if self.log is not None:
            self.log.keep = False

    def input_value(self, key: Hashable) -> Any:
        """The value of an input a decision may read, now (see `read`)."""
        epochs = self.snapshot.epochs
        if key == ROOM:
            return (epochs.room, self.room.changes)
        if key == TOTAL:
            return self.snapshot.total_allocatable
        if key == QUEUES:
            return (self.queues_at_open(), self.version)
        if key == USED:
            return tuple(sorted(self.state.used.items()))
        if key == TOPOLOGY:
            return epochs.topology
        kind, scope = key[0], key[1]  # type: ignore[index]
        if kind == "victims":
            cache = epochs.clock if scope is None else epochs.queue_pods.get(scope)
            return (cache, self.victims.changes, self.facts.promised_version)
        if kind == "queue":
            return self.numbers(scope)
        if kind == "starving":
            return self.starvation.of(scope)
        if kind == "units":  # what of a queue's units one may take (its own are its facts)
            return self.asked_again(key, _units_below(scope, key[2]))  # type: ignore[index]
        raise KeyError(key)

    def asked_again(self, key: Hashable, ask: Ask) -> Any:
        """The answer to question `key` now (once per state of the session)."""
        known = self._asked.get(key)
        if known is not None and known[0] == self.version:
            return known[1]
        log, self.log = self.log, None
        try:
            answer = ask(self)
        finally:
            self.log = log
        self._asked[key] = (self.version, answer)
        return answer

    def numbers(self, queue: str) -> tuple[Any, ...] | None:
        """What a decision reading `queue` reads of it (and of the queues above it), once per
        version of the session (every question about the queue depends on it)."""
        known = self._numbers.get(queue)
        if known is not None and known[0] == self.version:
            return known[1]
        found = _numbers(self.state, queue)
        self._numbers[queue] = (self.version, found)
        return found

    def queues_at_open(self) -> tuple[Any, ...]:
        if self._queues_at_open is None:
            state = self.state
            self._queues_at_open = tuple(
                (name, self.numbers(name)) for name in sorted(state.inputs)
            )
        return self._queues_at_open


def _units_below(queue: str, below: int | None) -> Ask:
    def units(s: SessionReads) -> Any:
        found = s.victims.of_queue(queue)
        if below is not None:
            found = [u for u in found if u.priority < below]
        return (frozenset(found), s.facts.promised_version, s.victims.changes)

    return units


@functools.lru_cache(maxsize=4096)
def _basis(kinds: frozenset[str], queue: str) -> Basis:
    """What an answer reading `kinds` of `queue` depends on: the queue's numbers (and its
    ancestors'), the cluster's sums. One per (kinds, queue): the answers about a queue share
    it."""
    queue_part, cluster_part = QUEUE in kinds, CLUSTER in kinds

    def basis(s: SessionReads) -> Any:
        numbers = s.numbers(queue) if queue_part else None
        sums = (tuple(sorted(s.state.used.items())), s.state.total) if cluster_part else None
        return (numbers, sums)

    return (("basis", kinds, queue), basis)


def _numbers(state: PassState, name: str) -> tuple[Any, ...] | None:
    """What a decision reading a queue reads of it (and of the queues above it)."""
    model = state.model
    if model is None:
        return None
    out = []
    for queue in model.chain(name):
        share = model.shares.get(queue)
        source = state.inputs.get(queue)
        if share is None or source is None:
            out.append(None)
            continue
        out.append(
            (
                share.deserved,
                share.allocated,
                share.inqueue,
                share.elastic,
                share.real_capability,
                share.capability,
                source.open,
                source.state,
            )
        )
    return tuple(out)
