"""What one decision read, as the memo keeps it (`plugins.framework.memo`).

A decision declares its inputs by the way it reads them through the session: every question
the session puts to the policy (an enqueue vote, a queue's Allocatable, ...) is logged with its
answer and how to ask it again, and every other input (the nodes' room, the units eviction may
take, every queue's numbers, the time) with the value it had. The decision still stands while
each question, asked again, gets the same answer and each input has the same value.

Questions are keyed by what their answer depends on (a vote on minResources alone is one
question for every job asking the same), so a queue of a thousand gangs asking alike is
checked with a handful of questions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any, Protocol

__all__ = ["Ask", "Basis", "ReadLog", "Reading"]

Ask = Callable[[Any], Any]  # a question put to a session, asked again on another
# What an answer depends on: its key (answers alike share it: it is asked once per session
# version) and how to ask it.
Basis = tuple[Hashable, Ask]


class Reading(Protocol):
    """What a session answers a log with (`plugins.framework.session.Session`)."""

    now: float

    def input_value(self, key: Hashable) -> Any: ...

    def asked_again(self, key: Hashable, ask: Ask) -> Any: ...


class ReadLog:
    __slots__ = ("answers", "inputs", "keep", "until")

    def __init__(self) -> None:
        # question -> (how to ask it again, its answer, what the answer depends on and its
        # value then: while that is the same the answer is, without asking)
        self.answers: dict[Hashable, tuple[Ask, Any, Basis | None, Any]] = {}
        self.inputs: dict[Hashable, Any] = {}
        self.until = math.inf  # the decision is due again at this time
        self.keep = True  # False: it reads something no key captures (decided every pass)

    def answer(self, key: Hashable, ask: Ask, answer: Any, basis: Basis | None, seen: Any) -> None:
        self.answers.setdefault(key, (ask, answer, basis, seen))

    def input(self, key: Hashable, value: Any) -> None:
        self.inputs.setdefault(key, value)

    def due(self, at: float) -> None:
        self.until = min(self.until, at)

    def merge(self, other: ReadLog) -> None:
        """Take `other`'s reads too (a queue's summary of its gangs' decisions)."""
        for key, entry in other.answers.items():
            self.answers.setdefault(key, entry)
        for key, value in other.inputs.items():
            self.inputs.setdefault(key, value)
        self.until = min(self.until, other.until)
        self.keep = self.keep and other.keep

    def holds(self, ssn: Reading) -> bool:
        """Whether everything read is as it was (the session's answers and inputs now)."""
        if not self.keep or ssn.now >= self.until:
            return False
        for key, value in self.inputs.items():
            if ssn.input_value(key) != value:
                return False
        for key, (ask, answer, basis, seen) in self.answers.items():
            if basis is not None and ssn.asked_again(*basis) == seen:
                continue
            if ssn.asked_again(key, ask) != answer:
                return False
        return True
