"""The reconciler contract and the runtime that wires it (controller-runtime's builder as the
model): a controller says what it watches and how to reconcile one key; the runtime gives it a
work queue, the informer handlers, retries with backoff, the give-up event, periodic requeues and
the metrics, the same for every controller.

    class FlowReconciler(Reconciler[str]):
        name = "jobflow-controller"

        def setup(self, watch: Builder[str]) -> None:
            self.flows = watch.primary(JOBFLOWS, FlowObjectRecord, changed=spec_changed)
            self.jobs = watch.related(VCJOBS, JobRecord, to_key=owner_flow)

        async def reconcile(self, key: str) -> float | None:
            ...  # None: done; seconds: look again after that long

        def reference(self, key: str) -> ObjectRef | None:
            return JOBFLOWS.reference(...)  # what events about this key regard

    controller = build(FlowReconciler(...), informers, recorder, metrics, retries=retries)

A reconcile that raises is retried with per-key exponential backoff (`RetryPolicy`); after
`max_retries` the key is dropped, counted (`result="dropped"`) and a `FailedSync` Warning event
is recorded on `reference(key)` unless the reconciler's `given_up` handled it (the Job
controller terminates the job instead). Every reconcile is timed and counted by result.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Iterable
from datetime import timedelta
from typing import Any, Generic, Protocol, TypeVar

from core.controller.clock import Clock, RealClock, Timer
from core.controller.informers import SharedInformers
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy, warn_given_up
from core.kube.client import Resource
from core.kube.events import EventRecorder
from core.kube.informer import Decode, Informer, R
from core.kube.workqueue import WorkQueue

log = logging.getLogger("vulcan.controllers")

K = TypeVar("K", bound=Hashable)
ObjectRef = dict[str, str]
# What an event handler returns: the key(s) to reconcile, or None for none.
Keys = Any


def _always(old: Any, new: Any) -> bool:
    return True


class Reconciler(Protocol[K]):
    """One controller's logic. `setup` declares what it watches, `reconcile` brings one key's
    object to what it should be, `reference` names the object events about a key regard.
    The hooks below have defaults for reconcilers that subclass this protocol."""

    name: str  # Volcano's controller name: the work queue's and the metrics' label

    def setup(self, watch: Builder[K]) -> None: ...

    async def reconcile(self, key: K) -> float | None:
        """None when done; a number of seconds to be reconciled again after that long
        (controller-runtime's `Result{RequeueAfter}`; a later answer replaces a pending one)."""
        ...

    def reference(self, key: K) -> ObjectRef | None: ...

    def describe(self, key: K) -> str:
        """What the give-up event says was not synced: by default the referenced object."""
        ref = self.reference(key) or {}
        namespace, name = ref.get("namespace"), ref.get("name", str(key))
        return f"{ref.get('kind', '').lower()} {namespace + '/' if namespace else ''}{name}"

    def given_up(self, key: K, exc: BaseException) -> bool:
        """Called when `key` failed `max_retries` times: True when handled here, so no
        `FailedSync` event is recorded."""
        return False

    async def start(self) -> None:
        """Before the workers start (the informers have synced)."""

    async def stop(self) -> None:
        """After the workers stopped (also when the term ends with an error)."""


class Builder(Generic[K]):
    """What a reconciler's `setup` declares its watches on; the reconciler may keep it to
    queue keys itself (`enqueue`, `enqueue_after`)."""

    def __init__(
        self, name: str, informers: SharedInformers, retries: RetryPolicy, clock: Clock
    ) -> None:
        self.name = name
        self.informers = informers
        self.clock = clock
        self.queue: WorkQueue[K] = WorkQueue(
            name, base_delay=retries.base, max_delay=retries.max_delay
        )
        self.resyncs: list[tuple[float, Callable[[], Iterable[K]]]] = []
        self._timers: dict[K, Timer] = {}

    # ------------------------------------------------------------------ queueing

    def enqueue(self, keys: Keys) -> None:
        """Queue a key, an iterable of keys, or nothing (None)."""
        if keys is None:
            return
        if isinstance(keys, (str, tuple)):
            self.queue.add(keys)  # type: ignore[arg-type]
            return
        for key in keys:
            self.queue.add(key)

    def enqueue_after(self, key: K, seconds: float) -> None:
        """Queue `key` once `seconds` have passed on the runtime's clock, replacing a requeue
        of the key still pending."""
        self.forget(key)
        when = self.clock.now() + timedelta(seconds=max(0.0, seconds))
        self._timers[key] = self.clock.call_at(when, lambda: self._fire(key))

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.queue.add(key)

    def forget(self, key: K) -> None:
        """Cancel a pending requeue of `key` (its object is gone)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def forget_all(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    # ------------------------------------------------------------------ watches

    def primary(
        self,
        resource: Resource,
        decode: Decode[R],
        *,
        changed: Callable[[R, R], bool] = _always,
        on_delete: Callable[[R], Keys] | None = None,
        **options: Any,
    ) -> Informer[R]:
        """The kind this controller reconciles (controller-runtime's `For`): an added object's
        key is queued, an updated one's when `changed(old, new)`; a deleted one's pending
        requeue is cancelled (and `on_delete` may return keys to queue)."""

        def deleted(record: R) -> None:
            self.forget(record.key)  # type: ignore[attr-defined]
            if on_delete is not None:
                self.enqueue(on_delete(record))

        informer = self.informers.get(resource, decode, **options)
        informer.add_handlers(
            on_add=lambda r: self.queue.add(r.key),  # type: ignore[attr-defined]
            on_update=lambda old, new: (
                self.queue.add(new.key) if changed(old, new) else None  # type: ignore[attr-defined]
            ),
            on_delete=deleted,
        )
        return informer

    def related(
        self,
        resource: Resource,
        decode: Decode[R],
        *,
        to_key: Callable[[R], Keys],
        changed: Callable[[R, R], bool] = _always,
        on_delete: bool = True,
        **options: Any,
    ) -> Informer[R]:
        """An owned or related kind (`Owns` / `Watches` with a map function): its changes
        queue the keys `to_key` maps them to (None: no key)."""
        informer = self.informers.get(resource, decode, **options)
        informer.add_handlers(
            on_add=lambda r: self.enqueue(to_key(r)),
            on_update=lambda old, new: self.enqueue(to_key(new)) if changed(old, new) else None,
            on_delete=(lambda r: self.enqueue(to_key(r))) if on_delete else None,
        )
        return informer

    def watch(
        self,
        resource: Resource,
        decode: Decode[R],
        *,
        on_add: Callable[[R], Keys] | None = None,
        on_update: Callable[[R, R], Keys] | None = None,
        on_delete: Callable[[R], Keys] | None = None,
        **options: Any,
    ) -> Informer[R]:
        """A kind with handlers of the reconciler's own (they keep an index, say): each
        returns the keys to queue."""
        informer = self.informers.get(resource, decode, **options)
        informer.add_handlers(
            on_add=(lambda r: self.enqueue(on_add(r))) if on_add else None,
            on_update=(lambda o, n: self.enqueue(on_update(o, n))) if on_update else None,
            on_delete=(lambda r: self.enqueue(on_delete(r))) if on_delete else None,
        )
        return informer

    def resync(self, period: float, keys: Callable[[], Iterable[K]]) -> None:
        """Every `period` seconds queue `keys()` even when nothing was heard of them
        (client-go's informer resync): a missed event can delay an object, never strand it."""
        self.resyncs.append((period, keys))


class Controller(Generic[K]):
    """A reconciler wired by the runtime: run its workers until cancelled."""

    def __init__(
        self,
        reconciler: Reconciler[K],
        builder: Builder[K],
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        retries: RetryPolicy,
        workers: int,
    ) -> None:
        self.name = reconciler.name
        self.reconciler = reconciler
        self.builder = builder
        self.queue = builder.queue
        self.recorder = recorder
        self.metrics = metrics
        self.retries = retries
        self.workers = workers
        self._resync_timers: dict[int, Timer] = {}
        # Its reconciler's `start` has returned and its workers run (the queue controller's
        # start creates the built-in queues): /readyz waits for it.
        self.started = False

    async def run(self) -> None:
        metrics, name = self.metrics, self.name
        syncs = metrics.syncs
        seconds = metrics.sync_seconds.labels(name)
        queue = self.queue
        metrics.queue_depth.labels(name).set_function(lambda: len(queue))

        async def timed(key: K) -> None:
            start = time.perf_counter()
            try:
                after = await self.reconciler.reconcile(key)
            except Exception:
                syncs.labels(name, "error").inc()
                raise
            else:
                syncs.labels(name, "success").inc()
            finally:
                seconds.observe(time.perf_counter() - start)
            if after is not None:
                self.builder.enqueue_after(key, after)

        await self.reconciler.start()
        for period, keys in self.builder.resyncs:
            self._resync(period, keys)
        self.started = True
        try:
            await queue.run_workers(
                self.workers,
                timed,
                max_retries=self.retries.max_retries,
                on_give_up=self._give_up,
            )
        finally:
            self.started = False
            for timer in self._resync_timers.values():
                timer.cancel()
            self._resync_timers.clear()
            self.builder.forget_all()
            await self.reconciler.stop()

    def _resync(self, period: float, keys: Callable[[], Iterable[K]]) -> None:
        """Queue `keys()` every `period` seconds on the runtime's clock."""
        clock = self.builder.clock

        def fire() -> None:
            self.builder.enqueue(list(keys()))
            self._resync(period, keys)

        self._resync_timers[id(keys)] = clock.call_at(clock.now() + timedelta(seconds=period), fire)

    def _give_up(self, key: K, exc: BaseException) -> None:
        self.metrics.syncs.labels(self.name, "dropped").inc()
        if self.reconciler.given_up(key, exc):
            return
        ref = self.reconciler.reference(key)
        if ref is None:
            log.warning(
                "gave up", extra={"controller": self.name, "key": str(key), "error": str(exc)}
            )
            return
        warn_given_up(self.recorder, ref, self.reconciler.describe(key), exc)


class Together:
    """Several controllers started and stopped as one (a controller and its Command handler,
    selected by one name)."""

    def __init__(self, name: str, main: Controller[Any], *others: Controller[Any]) -> None:
        self.name = name
        self.main = main  # the one named `name`; `others` serve it
        self.controllers = (main, *others)

    def __getitem__(self, name: str) -> Controller[Any]:
        return next(c for c in self.controllers if c.name == name)

    @property
    def started(self) -> bool:
        return all(c.started for c in self.controllers)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for controller in self.controllers:
                group.create_task(controller.run(), name=controller.name)


def build(
    reconciler: Reconciler[K],
    informers: SharedInformers,
    recorder: EventRecorder,
    metrics: ControllerMetrics,
    *,
    retries: RetryPolicy,
    workers: int = 1,
    clock: Clock | None = None,
) -> Controller[K]:
    """Wire `reconciler` (its `setup` declares its watches now, before the informers start)."""
    builder: Builder[K] = Builder(reconciler.name, informers, retries, clock or RealClock())
    reconciler.setup(builder)
    return Controller(reconciler, builder, recorder, metrics, retries, workers)
