"""Slow-start batches, as Kubernetes' ReplicaSet and Job controllers create pods: batches of
1, 2, 4, ... calls at once, each batch starting when the one before succeeded whole, so many
calls go out in parallel while one that fails (a quota, an admission refusal) fails only a few
before the rest are left for the next sync."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

__all__ = ["slow_start_batch"]

T = TypeVar("T")
R = TypeVar("R")


async def slow_start_batch(
    items: Sequence[T],
    call: Callable[[T], Awaitable[R]],
    *,
    initial: int = 1,
    largest: int = 64,
) -> list[R]:
    """`call` on each of `items`, in batches doubling from `initial` up to `largest`; the
    results in `items` order. The first error of a batch is raised once that batch is done,
    and no further batch starts."""
    results: list[R] = []
    size = max(1, initial)
    start = 0
    while start < len(items):
        batch = items[start : start + size]
        outcomes = await asyncio.gather(*(call(item) for item in batch), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        results.extend(outcomes)  # type: ignore[arg-type]
        start += len(batch)
        size = min(size * 2, largest)
    return results
