"""core.kube.slow_start: batches of 1, 2, 4, ... in parallel; a failing batch stops the rest."""

from __future__ import annotations

import asyncio

import pytest

from core.kube.slow_start import slow_start_batch


async def test_calls_run_in_doubling_batches_and_results_keep_their_order() -> None:
    running = 0
    widest: list[int] = []

    async def call(item: int) -> int:
        nonlocal running
        running += 1
        widest.append(running)
        await asyncio.sleep(0)
        running -= 1
        return item * 10

    assert await slow_start_batch(list(range(10)), call, largest=4) == [i * 10 for i in range(10)]
    # Batches of 1, 2, 4, then 3 (capped at 4): the widest at once is 4.
    assert max(widest) == 4 and widest[:3] == [1, 1, 2]


async def test_a_failure_stops_before_the_next_batch() -> None:
    called: list[int] = []

    async def call(item: int) -> None:
        called.append(item)
        if item == 2:
            raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        await slow_start_batch(list(range(20)), call)
    assert sorted(called) == [0, 1, 2]  # the batch of 1 and the failing batch of 2; no more
