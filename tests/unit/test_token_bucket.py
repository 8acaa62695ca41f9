"""core.kube.backoff.TokenBucket: client-go's limiter — the burst at once, then one request per
1/qps seconds, waiters served in order."""

from __future__ import annotations

import asyncio

import pytest

from core.kube import backoff


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        clock.slept.append(round(seconds, 6))
        clock.now += seconds
        await real_sleep(0)

    monkeypatch.setattr(backoff.time, "monotonic", lambda: clock.now)
    monkeypatch.setattr(backoff.asyncio, "sleep", sleep)
    return clock


async def test_the_burst_goes_at_once_then_one_per_interval(clock: Clock) -> None:
    bucket = backoff.TokenBucket(qps=10, burst=3)
    for _ in range(3):
        await bucket.acquire()
    assert clock.slept == []
    await bucket.acquire()
    await bucket.acquire()
    assert clock.slept == [0.1, 0.1]
    clock.now += 0.25  # idle: 2.5 tokens saved up
    await bucket.acquire()
    await bucket.acquire()
    assert clock.slept == [0.1, 0.1]
    await bucket.acquire()
    assert clock.slept == [0.1, 0.1, 0.05]


async def test_concurrent_callers_wait_in_turn(clock: Clock) -> None:
    bucket = backoff.TokenBucket(qps=4, burst=1)
    await bucket.acquire()
    order: list[int] = []

    async def caller(index: int) -> None:
        await bucket.acquire()
        order.append(index)

    await asyncio.gather(*(caller(i) for i in range(3)))
    assert order == [0, 1, 2]
    assert clock.slept == [0.25, 0.25, 0.25]


async def test_no_limit_when_qps_is_not_positive(clock: Clock) -> None:
    bucket = backoff.TokenBucket(qps=0, burst=1)
    for _ in range(100):
        await bucket.acquire()
    assert clock.slept == []
