"""Awaiting the gang scheduler's next pass (`PassWaiters`): what a verb that must answer with a
pass's judgement, not a placeholder, waits on (`GangVerbs.filter_once_judged`)."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["PassWaiters"]


class PassWaiters:
    def __init__(self) -> None:
        self.count = 0  # passes run so far
        self._waiting: list[asyncio.Future[None]] = []

    async def next(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the next pass to end; whether one did."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(future, timeout)
        if not future.done():
            future.cancel()
        return future.done() and not future.cancelled()

    def ended(self) -> None:
        """A pass ended: everyone waiting for it goes on."""
        self.count += 1
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(None)
