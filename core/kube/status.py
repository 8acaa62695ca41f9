"""Coalesced status writes: at most one write per object per `interval`.

Controllers recompute an object's status on every event about it; writing each result would
turn a burst of pod events into a burst of writes on one PodGroup. `StatusWriter.submit()` only
records the latest desired status; the background `run()` writes it no sooner than `interval`
after that object's previous write, so a burst costs at most one write now and one at the end
of the interval, and the last one always carries the final status.

Writes are JSON merge patches of `{"status": ...}` — to `/status` for resources with a status
subresource (Queue, Job), to the object itself otherwise (a Volcano PodGroup has none). A merge
patch leaves alone the status fields this writer never wrote (another component's), but fields
it wrote before and that are now absent (Go's omitempty zeros) are sent as null so they go away.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from core.kube.backoff import Backoff
from core.kube.client import MERGE_PATCH, ApiError, KubeClient, Resource
from core.kube.workqueue import WorkQueue

log = logging.getLogger("vulcan.kube.status")

Key = tuple[Resource, str, str]  # resource, namespace ("" when cluster-scoped), name


@dataclass(slots=True)
class StatusWriterStats:
    submitted: int = 0
    writes: int = 0  # successful writes
    coalesced: int = 0  # submits superseded by a later submit before they were written
    skipped: int = 0  # identical to what was last written: no write needed
    dropped: int = 0  # the object is gone (404), the write was refused, or retries ran out
    failures: int = 0  # failed write attempts (retried or not)


@dataclass(slots=True)
class _Pending:
    resource: Resource
    namespace: str
    name: str
    status: dict[str, Any]
    encoded: bytes
    subresource: bool
    urgent: bool = False
    interval: float | None = None  # this change's own least gap after the previous write


@dataclass(slots=True)
class _Written:
    status: dict[str, Any]
    encoded: bytes
    at: float  # loop time


def _canonical(status: Mapping[str, Any]) -> bytes:
    return orjson.dumps(status, option=orjson.OPT_SORT_KEYS)


def replacing_merge_patch(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """`new` as a merge patch that also deletes (null) the keys `old` had and `new` lacks."""
    patch: dict[str, Any] = dict(new)
    for key, value in (old or {}).items():
        if key not in new:
            patch[key] = None
        elif isinstance(value, Mapping) and isinstance(new[key], Mapping):
            patch[key] = replacing_merge_patch(value, new[key])
    return patch


class StatusWriter:
    """`submit()` anywhere on the loop; keep `run()` running as a background task."""

    def __init__(
        self,
        client: KubeClient,
        *,
        interval: float = 1.0,
        workers: int = 4,
        max_retries: int = 10,
        retry_base: float = 0.05,
        retry_max: float = 30.0,
        max_tracked: int = 100_000,
    ) -> None:
        self.client = client
        self.interval = interval
        self.workers = workers
        self.max_retries = max_retries
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.max_tracked = max_tracked
        self.stats = StatusWriterStats()
        self._pending: dict[Key, _Pending] = {}
        self._written: OrderedDict[Key, _Written] = OrderedDict()
        self._queue: WorkQueue[Key] = WorkQueue(
            "status", base_delay=retry_base, max_delay=retry_max
        )
        self._flushing = 0

    # ------------------------------------------------------------------------ submitting

    def submit(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        *,
        subresource: bool,
        urgent: bool = False,
        interval: float | None = None,
    ) -> None:
        """Make `status` the object's desired status; it is written within `interval`, or as
        soon as a worker is free when `urgent` (a change others act on, such as a phase: a
        Job controller creates pods when its PodGroup turns Inqueue). A submit's own
        `interval` (longer than the writer's) lets a change nobody acts on wait longer; an
        unwritten change it replaces keeps its own, shorter wait."""
        key: Key = (resource, namespace or "", name)
        encoded = _canonical(status)
        self.stats.submitted += 1
        replaced = self._pending.pop(key, None)
        if replaced is not None:
            self.stats.coalesced += 1
            urgent = urgent or replaced.urgent
            interval = min(self._interval(replaced.interval), self._interval(interval))
        last = self._written.get(key)
        if last is not None and last.encoded == encoded and key not in self._queue.in_flight:
            # Already stored (as far as we know). While a write is in flight the stored status
            # is about to change, so the comparison waits for the worker.
            self.stats.skipped += 1
            return
        # A private copy: the caller may keep mutating its dict.
        self._pending[key] = _Pending(
            resource,
            namespace or "",
            name,
            orjson.loads(encoded),
            encoded,
            subresource,
            urgent,
            interval,
        )
        if urgent:
            self._queue.add_after(key, 0)
        else:
            self._schedule(key)

    def forget(self, resource: Resource, namespace: str | None, name: str) -> None:
        """The object was deleted: drop what is pending and what we remember about it."""
        key: Key = (resource, namespace or "", name)
        self._pending.pop(key, None)
        self._written.pop(key, None)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _schedule(self, key: Key) -> None:
        entry = self._pending.get(key)
        wait = self._wait(key, entry.interval if entry else None)
        self._queue.add_after(key, 0 if self._flushing else wait)

    def _interval(self, interval: float | None) -> float:
        return self.interval if interval is None else max(interval, self.interval)

    def _wait(self, key: Key, interval: float | None = None) -> float:
        last = self._written.get(key)
        if last is None:
            return 0.0
        return last.at + self._interval(interval) - asyncio.get_running_loop().time()

    # ------------------------------------------------------------------------ writing

    async def run(self) -> None:
        """Write pending statuses until `close()` (or cancellation)."""
        await self._queue.run_workers(
            self.workers, self._sync, max_retries=self.max_retries, on_give_up=self._give_up
        )

    async def flush(self) -> None:
        """Write everything pending now, ignoring the interval (needs `run()` running)."""
        self._flushing += 1
        backoff = Backoff(self.retry_base, self.retry_max)
        try:
            while True:
                for key in list(self._pending):
                    self._queue.add(key)
                await self._queue.join()
                if not self._pending:
                    return
                # Writes failed and wait for a retry: keep their backoff rather than spin.
                await backoff.wait()
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        """Flush, then stop the workers."""
        await self.flush()
        await self._queue.shutdown()

    async def _sync(self, key: Key) -> None:
        entry = self._pending.get(key)
        if entry is None:
            return
        wait = self._wait(key, entry.interval)
        if wait > 0 and not self._flushing and not entry.urgent:
            self._queue.add_after(key, wait)  # woken early (e.g. by a submit during a write)
            return
        del self._pending[key]
        last = self._written.get(key)
        if last is not None and last.encoded == entry.encoded:
            self.stats.skipped += 1
            return
        patch = {"status": replacing_merge_patch(last.status if last else None, entry.status)}
        path = entry.resource.path(
            entry.namespace or None, entry.name, "status" if entry.subresource else None
        )
        try:
            # retry=False: the queue retries with backoff, and by the next attempt a newer
            # submit may have replaced this status — then the newer one is what gets written.
            await self.client.request(
                "PATCH", path, body=patch, content_type=MERGE_PATCH, retry=False
            )
        except ApiError as exc:
            self.stats.failures += 1
            if exc.not_found:
                self.stats.dropped += 1
                self._written.pop(key, None)
                log.debug("status target gone", extra={"object": path})
                return
            if not exc.retryable:
                self.stats.dropped += 1
                log.warning("status write refused", extra={"object": path, "error": str(exc)})
                return
            self._pending.setdefault(key, entry)  # unless a newer status was submitted
            raise
        self._written[key] = _Written(
            entry.status, entry.encoded, asyncio.get_running_loop().time()
        )
        self._written.move_to_end(key)
        while len(self._written) > self.max_tracked:
            self._written.popitem(last=False)  # forgetting only costs a redundant write later
        self.stats.writes += 1
        if key in self._pending:
            self._schedule(key)  # submitted while we wrote: due one interval from now

    def _give_up(self, key: Key, exc: BaseException) -> None:
        self._pending.pop(key, None)
        self.stats.dropped += 1
        log.warning(
            "status write failed too often; dropping it",
            extra={"object": str(key[1:]), "error": str(exc)},
        )
