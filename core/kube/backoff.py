"""Exponential backoff with jitter, and a token-bucket rate limiter (client QPS/burst)."""

from __future__ import annotations

import asyncio
import random
import time


class Backoff:
    """initial * factor**n, capped at `maximum`, with +-`jitter` fraction; `reset()` on success."""

    __slots__ = ("_attempt", "factor", "initial", "jitter", "maximum")

    def __init__(
        self, initial: float = 0.2, maximum: float = 30.0, factor: float = 2.0, jitter: float = 0.1
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._attempt = 0

    @property
    def attempt(self) -> int:
        return self._attempt

    def next_delay(self) -> float:
        delay = min(self.maximum, self.initial * self.factor**self._attempt)
        self._attempt += 1
        if self.jitter:
            delay *= 1 + random.uniform(-self.jitter, self.jitter)
        return max(0.0, delay)

    async def wait(self) -> None:
        await asyncio.sleep(self.next_delay())

    def reset(self) -> None:
        self._attempt = 0


class TokenBucket:
    """client-go's token bucket: `qps` tokens per second, at most `burst` saved up.
    qps <= 0 disables limiting."""

    __slots__ = ("_last", "_lock", "_tokens", "burst", "qps")

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        if not self._lock.locked() and self._take():
            return  # nobody waits ahead and a token was there: no lock to go through
        async with self._lock:
            if self._take():
                return
            wait = (1 - self._tokens) / self.qps
            self._tokens = 0
            self._last += wait  # the token this wait takes is spent then
            await asyncio.sleep(wait)

    def _take(self) -> bool:
        """Refill for the time gone by; take a token if a whole one is there."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False
