"""The gangs backing off after a gang timeout, as a pass reads them: why each may not be placed
and until when (wall clock), worded once per backoff so that the PodGroup's condition (and the
pods' filter reason) stay the same while the passes repeat; the end is a time of day."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from extender.barrier import BindBarrier

__all__ = ["BackoffWords"]


class BackoffWords:
    def __init__(self, barrier: BindBarrier) -> None:
        self.barrier = barrier
        self._words: dict[str, tuple[float, str, float]] = {}  # gang -> (ends, words, until)

    def now(self) -> dict[str, tuple[str, float]]:
        """gang -> (why, until when on the wall clock) for every gang backing off now."""
        found: dict[str, tuple[str, float]] = {}
        clock_now, wall_now = self.barrier.now(), time.time()
        for key, ends in self.barrier.backoffs().items():
            known = self._words.get(key)
            if known is None or known[0] != ends:
                until = datetime.now(UTC) + timedelta(seconds=ends - clock_now)
                words = f"backing off after a gang timeout until {until.strftime('%H:%M:%SZ')}"
                known = self._words[key] = (ends, words, wall_now + (ends - clock_now))
            found[key] = (known[1], known[2])
        for key in [k for k in self._words if k not in found]:
            del self._words[key]
        return found

    def forget(self, key: str) -> None:
        self._words.pop(key, None)
