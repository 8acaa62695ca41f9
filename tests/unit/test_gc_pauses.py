"""core.gc_pauses: GC pauses are timed per generation, and long-lived objects are frozen out of
the cyclic collector's walks once the cache has grown enough."""

from __future__ import annotations

import asyncio
import contextlib
import gc

import pytest
from prometheus_client import CollectorRegistry

from core.gc_pauses import GcPauseTimer, freeze_on_growth


def _count(registry: CollectorRegistry, generation: str) -> float:
    value = registry.get_sample_value("vulcan_gc_pause_seconds_count", {"generation": generation})
    return value or 0.0


def test_pause_timer_observes_collections_by_generation_while_installed() -> None:
    registry = CollectorRegistry()
    timer = GcPauseTimer(registry)
    timer.install()
    timer.install()  # idempotent: one callback, one observation per collection
    try:
        gc.collect(2)
        gc.collect(0)
    finally:
        timer.uninstall()
    assert _count(registry, "2") == 1
    assert _count(registry, "0") >= 1
    pauses = registry.get_sample_value("vulcan_gc_pause_seconds_sum", {"generation": "2"})
    assert pauses is not None and pauses > 0
    gc.collect(2)  # uninstalled: no longer observed
    assert _count(registry, "2") == 1


async def test_freeze_on_growth_freezes_only_after_enough_growth() -> None:
    gc.unfreeze()
    size = 0
    grown = asyncio.Event()

    def measure() -> int:
        grown.set()
        return size

    async def next_tick() -> None:
        grown.clear()
        await grown.wait()
        await asyncio.sleep(0)  # let the tick finish what it does with the size

    task = asyncio.create_task(
        freeze_on_growth(measure, growth=100, period=0.001, settled_growth=100)
    )
    try:
        size = 99
        await next_tick()
        await next_tick()
        assert gc.get_freeze_count() == 0  # not grown enough

        kept = [[i] for i in range(1000)]  # long-lived objects the cache would hold
        size = 100
        await next_tick()
        await next_tick()
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)

        size = 150  # growth since the last freeze is what counts
        await next_tick()
        await next_tick()
        assert gc.get_freeze_count() == frozen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        gc.unfreeze()


async def test_freeze_on_growth_freezes_a_burst_once_it_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes = iter([40, 80, 120, 120, 130, 130, 130])  # a burst, quiet, then a little more
    freezes_at: list[int] = []  # the size each freeze happened at
    seen: list[int] = []
    done = asyncio.Event()

    def measure() -> int:
        size = next(sizes, 130)
        seen.append(size)
        if len(seen) > 8:
            done.set()
        return size

    monkeypatch.setattr(gc, "freeze", lambda: freezes_at.append(seen[-1]))
    task = asyncio.create_task(
        freeze_on_growth(measure, growth=1000, period=0.001, settled_growth=100)
    )
    try:
        await done.wait()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    # Nothing frozen while the burst grew (40, 80, 120); frozen once 120 held for a period; the
    # 10 after it are too few to freeze again, however quiet.
    assert freezes_at == [120]
