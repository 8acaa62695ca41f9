"""A controller work queue with the semantics of client-go's rate-limited workqueue.

- Keys are de-duplicated: a key added while it waits is queued once.
- A key is never handed to two workers at once: a key added while it is being processed is
  marked dirty and queued again when its worker calls `done`.
- `add_after` delays an add (the earliest pending delay for a key wins); `add_rate_limited`
  delays by a per-key exponential backoff (base * 2**failures, capped) that `forget` resets.
- `run_workers` is the usual controller loop: handler errors re-add the key rate-limited until
  `max_retries` (Volcano's `--max-requeue-num`; -1 = no limit), then the key is dropped and
  `on_give_up(key, exc)` is called once.

Everything runs on one event loop, so no locks: each method mutates the state without awaiting.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

log = logging.getLogger("vulcan.kube.workqueue")

K = TypeVar("K", bound=Hashable)

DEFAULT_BASE_DELAY = 0.005  # client-go's DefaultControllerRateLimiter: 5 ms ...
DEFAULT_MAX_DELAY = 1000.0  # ... doubling up to 1000 s
DEFAULT_MAX_RETRIES = 15  # Volcano controllers' --max-requeue-num default

Handler = Callable[[K], Awaitable[Any]]
GiveUp = Callable[[K, BaseException], Any]


class ExponentialRateLimiter(Generic[K]):
    """Per-key failure counting: the n-th `when(key)` returns base * 2**n, capped at maximum."""

    __slots__ = ("_failures", "base_delay", "max_delay")

    def __init__(
        self, base_delay: float = DEFAULT_BASE_DELAY, max_delay: float = DEFAULT_MAX_DELAY
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        # Cap the exponent too: 2**n overflows a float long before anyone waits that long.
        return min(self.max_delay, self.base_delay * 2.0 ** min(n, 64))

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class WorkQueue(Generic[K]):
    """De-duplicating, delaying, rate-limited queue of keys for async workers."""

    def __init__(
        self,
        name: str = "",
        *,
        base_delay: float = DEFAULT_BASE_DELAY,
        max_delay: float = DEFAULT_MAX_DELAY,
        rate_limiter: ExponentialRateLimiter[K] | None = None,
    ) -> None:
        self.name = name
        self.rate_limiter: ExponentialRateLimiter[K] = rate_limiter or ExponentialRateLimiter(
            base_delay, max_delay
        )
        self._queue: deque[K] = deque()  # the order keys are handed out in
        self._dirty: set[K] = set()  # keys that need processing (queued, or re-added in flight)
        self._processing: set[K] = set()  # keys a worker holds right now
        self._delayed: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._shutting_down = False
        self._drain = False
        # Wakes getters; set whenever the queue is non-empty or the queue shuts down.
        self._ready = asyncio.Event()
        self._empty = asyncio.Event()  # nothing queued and nothing in flight
        self._idle = asyncio.Event()  # ... and nothing waiting for a delay either
        self._empty.set()
        self._idle.set()

    # ------------------------------------------------------------------------ adding

    def add(self, key: K) -> None:
        """Queue `key` unless it is already queued; a key in flight is re-queued after `done`."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._ready.set()
        self._update_state()

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` once `delay` seconds have passed (at once if delay <= 0)."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        pending = self._delayed.get(key)
        if pending is not None:
            if pending[0] <= when:
                return  # an earlier add is already scheduled; it covers this one
            pending[1].cancel()
        self._delayed[key] = (when, loop.call_at(when, self._fire, key))
        self._update_state()

    def add_rate_limited(self, key: K) -> None:
        """Add `key` after its backoff: base * 2**(failures so far), capped."""
        if self._shutting_down:
            return
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """The key succeeded: its next failure starts the backoff from the base again."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.rate_limiter.num_requeues(key)

    def _fire(self, key: K) -> None:
        self._delayed.pop(key, None)
        self.add(key)
        self._update_state()

    # ------------------------------------------------------------------------ consuming

    def __len__(self) -> int:
        """Keys waiting to be handed out (not those in flight or delayed)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def in_flight(self) -> frozenset[K]:
        return frozenset(self._processing)

    async def get(self) -> K | None:
        """The next key, marked in flight until `done(key)`; None once the queue shut down."""
        while not self._queue:
            if self._shutting_down:
                return None
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """The worker finished `key`; if it was re-added meanwhile, queue it again now."""
        self._processing.discard(key)
        if key in self._dirty:
            if self._shutting_down and not self._drain:
                self._dirty.discard(key)
            else:
                self._queue.append(key)
                self._ready.set()
        self._update_state()

    def _update_state(self) -> None:
        empty = not self._queue and not self._processing
        _set(self._empty, empty)
        _set(self._idle, empty and not self._delayed)

    async def join(self) -> None:
        """Wait until nothing is queued or in flight (delayed adds may still be pending)."""
        while not self._empty.is_set():
            await self._empty.wait()

    async def wait_idle(self) -> None:
        """Wait until nothing is queued, in flight or waiting for a delay."""
        while not self._idle.is_set():
            await self._idle.wait()

    async def shutdown(self, drain: bool = False) -> None:
        """Stop accepting keys and wait for the workers to finish the keys they hold.

        Delayed adds are cancelled. Without `drain` the keys still queued are dropped; with
        `drain` they are handed out and processed first (re-adds are refused either way).
        Do not await this from inside a handler: it waits for that handler to finish.
        """
        self._shutting_down = True
        self._drain = drain
        for _, handle in self._delayed.values():
            handle.cancel()
        self._delayed.clear()
        if not drain:
            self._dirty.difference_update(self._queue)
            self._queue.clear()
        self._ready.set()  # wake idle getters so they see the shutdown
        self._update_state()
        log.debug("work queue shutting down", extra={"queue": self.name, "drain": drain})
        await self.join()

    # ------------------------------------------------------------------------ workers

    async def run_workers(
        self,
        workers: int,
        handler: Handler[K],
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        on_give_up: GiveUp[K] | None = None,
    ) -> None:
        """Run `workers` concurrent workers until the queue shuts down (or this is cancelled,
        which cancels the handlers in flight)."""
        async with asyncio.TaskGroup() as group:
            for i in range(max(1, workers)):
                group.create_task(
                    self._worker(handler, max_retries, on_give_up),
                    name=f"workqueue-{self.name or 'anon'}-{i}",
                )

    async def _worker(
        self, handler: Handler[K], max_retries: int, on_give_up: GiveUp[K] | None
    ) -> None:
        while (key := await self.get()) is not None:
            try:
                await handler(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._failed(key, exc, max_retries, on_give_up)
            else:
                self.forget(key)
            finally:
                self.done(key)

    async def _failed(
        self, key: K, exc: Exception, max_retries: int, on_give_up: GiveUp[K] | None
    ) -> None:
        requeues = self.num_requeues(key)
        if max_retries < 0 or requeues < max_retries:
            log.debug(
                "handler failed; requeueing",
                extra={"queue": self.name, "key": str(key), "requeues": requeues, "error": exc},
            )
            self.add_rate_limited(key)
            return
        log.info(
            "handler failed too often; dropping key",
            extra={"queue": self.name, "key": str(key), "requeues": requeues, "error": str(exc)},
        )
        self.forget(key)
        if on_give_up is None:
            return
        try:
            result = on_give_up(key, exc)
            if inspect.isawaitable(result):
                await result
        except Exception:
            # A failing give-up hook must not kill the worker that serves every other key.
            log.exception("on_give_up failed", extra={"queue": self.name, "key": str(key)})


def _set(event: asyncio.Event, value: bool) -> None:
    if value:
        event.set()
    else:
        event.clear()
