"""Keeping CPython's cyclic garbage collector off big, long-lived object graphs.

A process that caches a cluster holds hundreds of thousands of objects that live as long as the
objects they mirror. Every full (generation 2) collection walks all of them: with 10,000 pods
and 10,000 PodGroups cached that is a pause of a few hundred milliseconds in the event loop,
during which no request is answered and no admission decided (seen as the p99 of
bench/queue_admission.py). `freeze_on_growth` moves what is alive into the permanent
generation (`gc.freeze`) each time the cache has grown by some number of objects, so a full
collection walks only what is new. Frozen objects are still freed by reference counting when
dropped; only reference cycles among them would stay until the process ends, and cached
records form none.

`GcPauseTimer` times every collection into a histogram by generation, so a pause is seen on
/metrics instead of guessed at.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

_PAUSE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


async def freeze_on_growth(
    size: Callable[[], int],
    *,
    growth: int = 5000,
    period: float = 1.0,
    settled_growth: int | None = None,
) -> None:
    """Run forever: every `period` seconds, when `size()` has grown by `growth` since the last
    freeze, or by `settled_growth` (default a tenth of `growth`) and then stopped growing for a
    period (a burst of creations is over: what it made would otherwise stay outside the freeze
    until the next `growth`, and every full collection walk it), collect the young generations
    (so young garbage is not pinned) and freeze."""
    settled = growth // 10 if settled_growth is None else settled_growth
    frozen_at = last = 0
    while True:
        await asyncio.sleep(period)
        now = size()
        grown = now - frozen_at
        if grown >= growth or (grown >= settled and now == last):
            gc.collect(1)
            gc.freeze()
            frozen_at = now
        elif now < frozen_at:
            frozen_at = now  # shrank: count growth from here
        last = now


class GcPauseTimer:
    """`vulcan_gc_pause_seconds{generation}`: how long each cyclic GC collection stopped the
    process. Install once per registry; uninstall on the way out (tests run many)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = Histogram(
            "vulcan_gc_pause_seconds",
            "Pauses of Python's cyclic garbage collector, by generation collected.",
            ["generation"],
            buckets=_PAUSE_BUCKETS,
            registry=registry,
        )
        self._started = 0.0

    def install(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.histogram.labels(str(info.get("generation", ""))).observe(
                time.perf_counter() - self._started
            )
