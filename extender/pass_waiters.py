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

    async def next(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the next pass to end."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(future, timeout)  # (cancelled on the timeout)

    def ended(self) -> None:
        """A pass ended: everyone waiting for it goes on."""
        self.count += 1
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(None)
