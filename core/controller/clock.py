"""The time a controller reads and waits on, injectable so tests can move it (a fake clock:
schedules minutes or years apart are tested without sleeping for them)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    def call_at(self, when: datetime, callback: Callable[[], None]) -> Timer:
        """Run `callback` once the clock reaches `when` (at once if it already has)."""
        ...


class RealClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def call_at(self, when: datetime, callback: Callable[[], None]) -> Timer:
        delay = max(0.0, (when - self.now()).total_seconds())
        return asyncio.get_running_loop().call_later(delay, callback)


class _FakeTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when told to (`advance`, `set`), firing due callbacks in order."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._timers: list[tuple[datetime, int, _FakeTimer, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    def call_at(self, when: datetime, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer()
        heapq.heappush(self._timers, (when, next(self._seq), timer, callback))
        self._fire_due()
        return timer

    def set(self, when: datetime) -> None:
        self._now = max(self._now, when)
        self._fire_due()

    def advance(self, seconds: float) -> None:
        self.set(self._now + timedelta(seconds=seconds))

    def pending(self) -> list[datetime]:
        """When the live timers are due (for tests' assertions)."""
        return sorted(when for when, _, timer, _ in self._timers if not timer.cancelled)

    def _fire_due(self) -> None:
        while self._timers and self._timers[0][0] <= self._now:
            _, _, timer, callback = heapq.heappop(self._timers)
            if not timer.cancelled:
                callback()
