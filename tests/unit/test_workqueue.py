"""The controller work queue: de-dup, one worker per key, rate-limited retries, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest

from core.kube.workqueue import ExponentialRateLimiter, WorkQueue


@contextlib.asynccontextmanager
async def workers(queue: WorkQueue[str], task: asyncio.Task[None]) -> AsyncIterator[None]:
    """Shut the queue down and reap the worker task whatever the test did."""
    try:
        yield
    finally:
        await asyncio.wait_for(queue.shutdown(), 5)
        await asyncio.wait_for(task, 5)


async def test_add_deduplicates_queued_keys() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    for key in ("a", "b", "a", "a", "c", "b"):
        queue.add(key)
    assert len(queue) == 3
    assert [await queue.get() for _ in range(3)] == ["a", "b", "c"]
    assert len(queue) == 0


async def test_key_added_while_processing_is_requeued_once_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add("a")
    assert await queue.get() == "a"
    for _ in range(5):
        queue.add("a")
    assert len(queue) == 0  # not handed out while in flight
    queue.done("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_never_processes_a_key_concurrently() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    in_flight: set[str] = set()
    overlaps: list[str] = []
    calls: dict[str, int] = {}
    started = asyncio.Event()
    release = asyncio.Event()

    async def handler(key: str) -> None:
        if key in in_flight:
            overlaps.append(key)
        in_flight.add(key)
        calls[key] = calls.get(key, 0) + 1
        started.set()
        try:
            if calls[key] == 1:
                await release.wait()  # hold the first run while the key is re-added
            else:
                await asyncio.sleep(0)
        finally:
            in_flight.discard(key)

    task = asyncio.create_task(queue.run_workers(8, handler))
    async with workers(queue, task):
        queue.add("k")
        await started.wait()
        for _ in range(50):
            queue.add("k")
            await asyncio.sleep(0)  # give the other seven workers every chance to grab it
        assert calls["k"] == 1 and len(queue) == 0
        release.set()
        await queue.join()
    assert overlaps == []
    assert calls["k"] == 2  # the 50 adds while in flight collapse into one re-run


async def test_distinct_keys_run_in_parallel() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    both = asyncio.Barrier(2)

    async def handler(key: str) -> None:
        await asyncio.wait_for(both.wait(), 5)  # only passes when two keys are in flight

    task = asyncio.create_task(queue.run_workers(2, handler))
    async with workers(queue, task):
        queue.add("a")
        queue.add("b")
        await asyncio.wait_for(queue.join(), 5)


async def test_rate_limiter_doubles_and_caps() -> None:
    limiter: ExponentialRateLimiter[str] = ExponentialRateLimiter(0.005, 0.04)
    assert [limiter.when("a") for _ in range(6)] == [0.005, 0.01, 0.02, 0.04, 0.04, 0.04]
    assert limiter.num_requeues("a") == 6 and limiter.when("b") == 0.005
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0 and limiter.when("a") == 0.005


async def test_add_after_keeps_the_earliest_delay() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add_after("a", 60)
    queue.add_after("a", 0.01)
    queue.add_after("a", 30)  # later than the one pending: ignored
    assert len(queue) == 0
    assert await asyncio.wait_for(queue.get(), 5) == "a"
    queue.done("a")
    await asyncio.wait_for(queue.wait_idle(), 5)  # the 60 s add was replaced, not kept


async def test_failures_retry_with_growing_delays_then_give_up_once() -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.005, max_delay=10)
    loop = asyncio.get_running_loop()
    attempts: list[float] = []
    given_up: list[tuple[str, str]] = []
    gave_up = asyncio.Event()

    async def handler(key: str) -> None:
        attempts.append(loop.time())
        raise RuntimeError(f"boom {len(attempts)}")

    def on_give_up(key: str, exc: BaseException) -> None:
        given_up.append((key, str(exc)))
        gave_up.set()

    task = asyncio.create_task(queue.run_workers(2, handler, max_retries=5, on_give_up=on_give_up))
    async with workers(queue, task):
        queue.add("k")
        await asyncio.wait_for(gave_up.wait(), 5)
        await asyncio.wait_for(queue.wait_idle(), 5)
    assert len(attempts) == 6  # the first try and five retries
    assert given_up == [("k", "boom 6")]
    assert queue.num_requeues("k") == 0  # dropped keys are forgotten
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # Backoff 5, 10, 20, 40, 80 ms: each wait at least its delay and the series grows.
    for gap, delay in zip(gaps, [0.005, 0.01, 0.02, 0.04, 0.08], strict=True):
        assert gap >= delay * 0.9
    assert gaps[-1] > gaps[0]


async def test_success_forgets_the_failures() -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.001)
    outcomes = iter([True, True, False])  # fail, fail, succeed
    done = asyncio.Event()

    async def handler(key: str) -> None:
        if next(outcomes):
            raise RuntimeError("transient")
        done.set()

    task = asyncio.create_task(queue.run_workers(1, handler, max_retries=5))
    async with workers(queue, task):
        queue.add("k")
        await asyncio.wait_for(done.wait(), 5)
        await queue.join()
        assert queue.num_requeues("k") == 0


async def test_async_give_up_hook_and_failing_hook_do_not_kill_workers() -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.001)
    seen: list[str] = []

    async def handler(key: str) -> None:
        if key.startswith("bad"):
            raise ValueError(key)
        seen.append(key)

    async def on_give_up(key: str, exc: BaseException) -> None:
        raise RuntimeError("the hook itself fails")

    task = asyncio.create_task(queue.run_workers(1, handler, max_retries=0, on_give_up=on_give_up))
    async with workers(queue, task):
        queue.add("bad1")
        queue.add("good")
        await asyncio.wait_for(queue.wait_idle(), 5)
        assert seen == ["good"]
        assert not task.done()


async def test_shutdown_lets_in_flight_finish_and_drops_the_rest() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    started = asyncio.Event()
    finished: list[str] = []

    async def handler(key: str) -> None:
        started.set()
        await asyncio.sleep(0.05)
        finished.append(key)

    task = asyncio.create_task(queue.run_workers(1, handler))
    queue.add("a")
    await started.wait()
    queue.add("b")
    queue.add("a")  # a re-add while in flight is dropped too
    queue.add_after("c", 0.01)
    await asyncio.wait_for(queue.shutdown(), 5)
    assert finished == ["a"]  # shutdown returned only after the in-flight key finished
    await asyncio.wait_for(task, 5)  # the workers exit
    queue.add("d")  # refused after shutdown
    assert len(queue) == 0 and await queue.get() is None
    await asyncio.sleep(0.02)
    assert finished == ["a"]  # the delayed add was cancelled


async def test_shutdown_with_drain_processes_everything_queued() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    finished: list[str] = []

    async def handler(key: str) -> None:
        await asyncio.sleep(0.001)
        finished.append(key)

    for key in "abcde":
        queue.add(key)
    task = asyncio.create_task(queue.run_workers(2, handler))
    await asyncio.wait_for(queue.shutdown(drain=True), 5)
    await asyncio.wait_for(task, 5)
    assert sorted(finished) == list("abcde")


async def test_cancelling_run_workers_cancels_handlers() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def handler(key: str) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.create_task(queue.run_workers(1, handler))
    queue.add("a")
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()
    assert not queue.in_flight  # the key was released
