"""Admitted gangs none of whose members reached vulcan's filter (issue 48, item 4).

kube-scheduler refuses a pod before it asks the extender when one of its own checks fails (an
unbound PersistentVolumeClaim, a volume it cannot attach, a host port in use on every node):
vulcan never hears of it, and a gang whose members never come would hold its reservation (and
its queue's room) for ever. `ReachWatch` times each admission from when its members are let
go; a gang none of whose members reached filter within `timeout` loses its admission and backs
off (doubling, like kube-scheduler's pod backoff, from `backoff` up to `max_backoff`, reset
once a member reaches filter); the scheduler applies `expired`: the reservation released, a
Warning event, the PodGroup's condition saying why (the pass reads the backoff's words).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta

from extender.ledger import GangLedger
from extender.slots import SlotWatch

__all__ = ["NOT_REACHED", "ReachWatch"]

NOT_REACHED = "members_not_reached"  # the bind result of held binds it ends (none, usually)


class ReachWatch:
    def __init__(
        self,
        timeout: float,
        backoff: float = 10.0,
        max_backoff: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout  # <= 0: never expires
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._clock = clock
        self._since: dict[str, float] = {}  # admitted gang -> when its members were let go
        self._strikes: dict[str, int] = {}  # gang -> admissions in a row that expired
        self._backoffs: dict[str, tuple[str, float]] = {}  # gang -> (why, until: wall clock)

    def admitted(self, key: str) -> None:
        """Gang `key` was admitted: its members go to kube-scheduler now."""
        if self.timeout > 0:
            self._since[key] = self._clock()

    def reached(self, key: str) -> None:
        """A member of admitted gang `key` reached filter: kube-scheduler does ask vulcan."""
        if self._since.pop(key, None) is not None:
            self._strikes.pop(key, None)

    def restart(self, key: str) -> None:
        """Its members are not let go yet (pipelined onto room being freed): timed from now."""
        if key in self._since:
            self._since[key] = self._clock()

    def forget(self, key: str, *, deleted: bool = False) -> None:
        """The gang is no longer admitted (a deleted one's backoff and strikes go too)."""
        self._since.pop(key, None)
        if deleted:
            self._strikes.pop(key, None)
            self._backoffs.pop(key, None)

    def due(self) -> list[str]:
        """The admitted gangs none of whose members reached filter within `timeout`."""
        if not self._since:
            return []
        now = self._clock()
        return sorted(k for k, since in self._since.items() if now - since >= self.timeout)

    def expired(
        self, admitted: Collection[str], ledger: GangLedger, slots: SlotWatch
    ) -> list[tuple[str, str]]:
        """The admitted gangs holding room whose members never came, each with why: each
        loses its admission (`expire`). A gang placed, or whose room went otherwise, is no
        longer watched; one pipelined onto room being freed is timed again."""
        found = []
        for key in self.due():
            if key not in admitted or not ledger.of_group(key):
                self.forget(key)
            elif slots.waiting_members(key):
                self.restart(key)  # its members are let go once the room is free
            else:
                found.append((key, self.expire(key)))
        return found

    def expire(self, key: str) -> str:
        """Gang `key` loses its admission: why (for its event), its backoff begun."""
        self._since.pop(key, None)
        strikes = self._strikes[key] = self._strikes.get(key, 0) + 1
        wait = min(self.max_backoff, self.backoff * 2 ** (strikes - 1))
        until = datetime.now(UTC) + timedelta(seconds=wait)
        why = (
            f"gang {key}: none of its members reached vulcan's filter within {self.timeout:g}s "
            "of its admission: kube-scheduler refused them before asking the extender (e.g. an "
            "unbound PersistentVolumeClaim; `kubectl describe pod` says why); its room is "
            f"released, and it may be admitted again after {until.strftime('%H:%M:%SZ')}"
        )
        self._backoffs[key] = (why, time.time() + wait)
        return why

    def backoffs(self) -> dict[str, tuple[str, float]]:
        """gang -> (why, until when on the wall clock) for every gang backing off now."""
        if not self._backoffs:
            return {}
        now = time.time()
        for key in [k for k, (_, until) in self._backoffs.items() if until <= now]:
            del self._backoffs[key]
        return dict(self._backoffs)
