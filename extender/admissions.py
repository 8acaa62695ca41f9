"""Which gangs are admitted (their room is in the gang ledger), why the others are not (word for
word what filter answers their members), what a gang was enqueued on the promise of evicting
(those pods are nobody else's until the promise is settled), and which gangs' facts changed
since the last pass (the memo's). One owner: everything else asks it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Iterator

from core.decisions import decision

__all__ = ["Admissions", "count_free_shape", "reason_shape"]

# Numbers and quantities in a reason ("holds cpu 8, would hold 16 ... deserves 14750m"); a
# gang's own count ("2/3 members created") is matched whole so that it is kept.
_NUMBER = re.compile(r"\d+/\d+|\d+(?:\.\d+)?[A-Za-z]*")
# The gangs holding a queue's room ("... which it does not preempt: ns/a, ns/b"): live as the
# numbers are (they come and go with every gang in the queue), and in the real soak most of the
# changes of a waiting gang's reason.
_HOLDERS = re.compile(r"(does not preempt: )[^;]*")
WORDS_REFRESH = 30.0  # seconds filter keeps a reason's words while only its numbers move


def reason_shape(reason: str) -> str:
    """A reason without its live numbers: what a waiting gang's members are told again only
    when it changes. A queue's numbers move with every pod bound anywhere in it, and telling
    each change to every pending member was most of the API server's writes in the issue-31
    soak (36,631 of 60,807 FailedScheduling events in 17 minutes). A gang's own counts
    ("2/3 members created") are words: they move only when its members do."""
    return _NUMBER.sub(lambda m: m[0] if "/" in m[0] else "#", _HOLDERS.sub(r"\1#", reason))


def count_free_shape(reason: str) -> str:
    """A reason without any of its numbers, a gang's own counts too."""
    return _NUMBER.sub("#", _HOLDERS.sub(r"\1#", reason))


class Admissions:
    def __init__(
        self, refresh: float = WORDS_REFRESH, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._admitted: set[str] = set()
        self.reasons: dict[str, str] = {}  # gang -> why it is not admitted (for filter)
        self.refresh = refresh
        self._clock = clock
        self._told: dict[str, tuple[str, str, float]] = {}  # gang -> (shape, words, when)
        # gang -> what it was enqueued on the promise of evicting (words), and those pods.
        self._promises: dict[str, tuple[str, frozenset[str]]] = {}
        self.promises_version = 0
        self._generations: dict[str, str] = {}  # gang -> the PodGroup UID decisions were for
        self._touched: set[str] = set()
        self.admit_listeners: list[Callable[[str], None]] = []  # called once per admission

    # ------------------------------------------------------------------ admitted

    def __contains__(self, key: object) -> bool:
        return key in self._admitted

    def __iter__(self) -> Iterator[str]:
        return iter(self._admitted)

    def __len__(self) -> int:
        return len(self._admitted)

    @property
    def keys(self) -> Collection[str]:
        """The admitted gangs (read-only; a pass reads it without awaiting)."""
        return self._admitted

    def admit(self, key: str) -> None:
        if key not in self._admitted:
            self._admitted.add(key)
            self._touched.add(key)
            for listener in self.admit_listeners:
                listener(key)
        self.reasons.pop(key, None)
        self._told.pop(key, None)
        self.settle_promise(key)

    def refuse(self, key: str, reason: str) -> None:
        self.reasons[key] = reason

    def told(self, key: str) -> str | None:
        """What filter tells the members of gang `key`, not admitted: its reason, in the words
        last told while only the reason's numbers moved, for at most `refresh` seconds.
        kube-scheduler writes a member's PodScheduled condition and a FailedScheduling event
        whenever the words change (a real soak: 20 status writes a second), and this extender
        the PodGroup's condition (29 writes a second)."""
        reason = self.reasons.get(key)
        if reason is None:
            return None
        shape, now = reason_shape(reason), self._clock()
        told = self._told.get(key)
        if told is not None and told[0] == shape and now - told[2] < self.refresh:
            return told[1]
        self._told[key] = (shape, reason, now)
        return reason

    def forget(self, key: str, why: str | None = None) -> None:
        """Nothing decided for the gang stands any more (it goes through admission again); an
        admission dropped so is logged with `why` (the user asks why it waits again)."""
        if why is not None and key in self._admitted:
            decision("gang admission dropped", podgroup=key, reason=why)
        self._admitted.discard(key)
        self._touched.add(key)

    def deleted(self, key: str) -> None:
        self.forget(key)
        self.reasons.pop(key, None)
        self._told.pop(key, None)
        self.settle_promise(key)
        self._generations.pop(key, None)

    # ------------------------------------------------------------------ promises

    def promise(self, key: str, words: str, pods: frozenset[str]) -> None:
        self._promises[key] = (words, pods)
        self.promises_version += 1
        self._touched.add(key)

    def settle_promise(self, key: str) -> None:
        if self._promises.pop(key, None) is not None:
            self.promises_version += 1
            self._touched.add(key)

    def promise_of(self, key: str) -> str | None:
        found = self._promises.get(key)
        return found[0] if found is not None else None

    def promised(self) -> dict[str, frozenset[str]]:
        return {key: pods for key, (_, pods) in self._promises.items()}

    # ------------------------------------------------------------------ generations

    def recreated(self, key: str, uid: str) -> bool:
        """Whether the PodGroup `key` is another one than decisions were made for (deleted
        and created again under the same name); remembers `uid` either way."""
        known = self._generations.get(key)
        self._generations[key] = uid
        return known is not None and known != uid

    # ------------------------------------------------------------------ the memo's

    def touch(self, key: str) -> None:
        """Something a decision about `key` reads changed outside the cache's sight."""
        self._touched.add(key)

    def take_touched(self) -> set[str]:
        touched, self._touched = self._touched, set()
        return touched
