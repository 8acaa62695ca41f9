"""kube-scheduler's scheduling queue: activeQ, backoffQ and the unschedulable pool.

- activeQ pops by priority (higher first), then the time the pod entered the queue (earlier
  first): kube-scheduler's PrioritySort compares `QueuedPodInfo.Timestamp`, which is set when
  the pod is added and refreshed each time an attempt sends it back (AddUnschedulableIfNotPresent),
  so a pod just refused goes behind the pods of its priority that waited meanwhile. Ordered by
  creation time instead, the oldest pods of a priority, refused again and again, would always
  come first, and a newer pod could wait behind them for as long as they keep failing.
- A pod whose attempt errored goes to backoffQ for initial × 2^(attempts-1) seconds, capped at
  the maximum (1 s doubling to 10 s by default).
- An unschedulable pod waits in the unschedulable pool until a cluster event moves it (to
  backoffQ if its backoff, counted from its last attempt, has not expired, else to activeQ) or
  for at most
  `max_unschedulable` (5 min) — kube-scheduler's podMaxInUnschedulablePodsDuration.
- A gated pod is in the queue from its creation (kube-scheduler's PreEnqueue holds it in the
  unschedulable pool; nothing tries it) and enters activeQ when its gates go with the Timestamp
  of that first add: it comes before the pods of its priority refused since.
- A cluster event that arrives while a pod is being scheduled makes that pod, if it turns out
  unschedulable, go to backoffQ instead of the pool (kube-scheduler's moveRequestCycle), so an
  event that raced the attempt is never lost. The same holds for an update of the pod itself
  that arrives during its attempt (kube-scheduler records in-flight events and re-examines the
  pod when the attempt fails; before QueueingHints, the update put the pod in activeQ at once).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sim.scheduler.framework import SchedPod

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"


@dataclass(slots=True)
class QueuedPod:
    pod: SchedPod
    attempts: int = 0
    added: float = field(default_factory=time.monotonic)  # when it entered the queue (Timestamp)
    unschedulable_since: float = 0.0
    backoff_until: float = 0.0
    token: int = 0  # which heap entry is current (older entries are stale)
    updated_in_flight: bool = False  # a relevant update arrived during the attempt


class SchedulingQueue:
    def __init__(
        self,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self._clock = clock
        self._pods: dict[str, QueuedPod] = {}
        self._where: dict[str, str] = {}
        self._active: list[tuple[int, float, int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._ready = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self.scheduling_cycle = 0
        self._move_request_cycle = -1
        self._in_flight: dict[str, QueuedPod] = {}
        self._gated: dict[str, float] = {}  # gated pod -> when it was added (its Timestamp)
        self._closed = False

    # ------------------------------------------------------------------ inspection

    def __len__(self) -> int:
        return len(self._pods)

    def location(self, key: str) -> str | None:
        if key in self._in_flight:
            return "in-flight"
        return self._where.get(key)

    def counts(self) -> dict[str, int]:
        counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0}
        for where in self._where.values():
            counts[where] += 1
        return counts

    # ------------------------------------------------------------------ entry points

    def add(self, pod: SchedPod) -> None:
        """A new pending pod (or one that came back, e.g. after its binding failed)."""
        queued = self._pods.get(pod.key) or self._in_flight.get(pod.key)
        if queued is not None:
            self.update(pod)
            return
        added = self._gated.pop(pod.key, None)
        queued = QueuedPod(pod, added=self._clock() if added is None else added)
        self._pods[pod.key] = queued
        self._push_active(queued)

    def hold_gated(self, key: str) -> None:
        """A pod with scheduling gates: kept out of every queue, its Timestamp that of the
        first time it was seen (its creation, as kube-scheduler adds it then)."""
        since = self._gated.get(key)
        self.delete(key)
        self._gated[key] = self._clock() if since is None else since

    def update(self, pod: SchedPod, *, relevant: bool = True) -> None:
        """A changed pod; `relevant` if the change may make it schedulable (not a status
        write)."""
        queued = self._in_flight.get(pod.key)
        if queued is not None:
            queued.pod = pod  # the attempt in flight finishes with the old view
            queued.updated_in_flight = queued.updated_in_flight or relevant
            return
        queued = self._pods.get(pod.key)
        if queued is None:
            self.add(pod)
            return
        queued.pod = pod
        if self._where[pod.key] == UNSCHEDULABLE:
            if relevant:
                self._move(queued)
        elif self._where[pod.key] == ACTIVE:
            self._push_active(queued)  # priority may have changed; the old entry goes stale

    def delete(self, key: str) -> None:
        self._gated.pop(key, None)
        self._pods.pop(key, None)
        self._where.pop(key, None)
        self._in_flight.pop(key, None)

    def move_all(self) -> None:
        """A cluster event that may make unschedulable pods schedulable (node added or changed,
        a pod deleted or finished, a pod bound elsewhere)."""
        self._move_request_cycle = self.scheduling_cycle
        for key, where in list(self._where.items()):
            if where == UNSCHEDULABLE:
                self._move(self._pods[key])

    def move(self, keys: set[str]) -> None:
        """A cluster event that only some unschedulable pods wait for (a pod placed that
        their inter-pod affinity or topology spread counts)."""
        self._move_request_cycle = self.scheduling_cycle
        for key in keys:
            if self._where.get(key) == UNSCHEDULABLE:
                self._move(self._pods[key])

    def flush_unschedulable(self) -> None:
        """Pods that waited in the pool longer than `max_unschedulable` get another try."""
        now = self._clock()
        for key, where in list(self._where.items()):
            queued = self._pods[key]
            if where == UNSCHEDULABLE and now - queued.unschedulable_since > self.max_unschedulable:
                self._move(queued)

    async def pop(self) -> QueuedPod | None:
        """The next pod to schedule; waits while activeQ is empty. None once closed."""
        while True:
            self._release_backoff()
            while self._active:
                _, _, token, key = heapq.heappop(self._active)
                queued = self._pods.get(key)
                if queued is None or queued.token != token or self._where.get(key) != ACTIVE:
                    continue  # stale entry
                del self._where[key]
                del self._pods[key]
                queued.updated_in_flight = False
                self._in_flight[key] = queued
                queued.attempts += 1
                self.scheduling_cycle += 1
                return queued
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()

    def done(self, key: str) -> None:
        """The attempt finished with the pod assumed (or the pod went away)."""
        self._in_flight.pop(key, None)

    def requeue_unschedulable(self, queued: QueuedPod, cycle: int) -> None:
        if self._in_flight.pop(queued.pod.key, None) is None:
            return  # deleted meanwhile
        self._pods[queued.pod.key] = queued
        queued.unschedulable_since = queued.added = self._clock()  # the Timestamp is refreshed
        # Moved back by an event, it still waits out its backoff (isPodBackingoff).
        queued.backoff_until = queued.unschedulable_since + self.backoff_duration(queued.attempts)
        raced, queued.updated_in_flight = queued.updated_in_flight, False
        if self._move_request_cycle >= cycle or raced:
            self._push_backoff(queued)
        else:
            self._where[queued.pod.key] = UNSCHEDULABLE

    def requeue_error(self, queued: QueuedPod) -> None:
        """After a scheduling error (or a failed bind): back off, then retry."""
        self._in_flight.pop(queued.pod.key, None)
        self._pods[queued.pod.key] = queued
        queued.added = self._clock()  # re-added: its Timestamp is refreshed, as after a refusal
        self._push_backoff(queued)

    def close(self) -> None:
        self._closed = True
        self._ready.set()
        if self._timer is not None:
            self._timer.cancel()

    # ------------------------------------------------------------------ internals

    def backoff_duration(self, attempts: int) -> float:
        duration = self.initial_backoff * (2 ** max(0, attempts - 1))
        return min(duration, self.max_backoff)

    def _move(self, queued: QueuedPod) -> None:
        if queued.backoff_until > self._clock():
            self._where[queued.pod.key] = BACKOFF
            heapq.heappush(self._backoff, (queued.backoff_until, next(self._seq), queued.pod.key))
            self._arm_timer()
        else:
            self._push_active(queued)

    def _push_active(self, queued: QueuedPod) -> None:
        queued.token = next(self._seq)
        self._where[queued.pod.key] = ACTIVE
        pod = queued.pod
        heapq.heappush(self._active, (-pod.priority, queued.added, queued.token, pod.key))
        self._ready.set()

    def _push_backoff(self, queued: QueuedPod) -> None:
        queued.backoff_until = self._clock() + self.backoff_duration(queued.attempts)
        self._where[queued.pod.key] = BACKOFF
        heapq.heappush(self._backoff, (queued.backoff_until, next(self._seq), queued.pod.key))
        self._arm_timer()

    def _release_backoff(self) -> None:
        now = self._clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, key = heapq.heappop(self._backoff)
            queued = self._pods.get(key)
            if (
                queued is not None
                and self._where.get(key) == BACKOFF
                and queued.backoff_until <= now
            ):
                self._push_active(queued)

    def _arm_timer(self) -> None:
        if not self._backoff:
            return
        loop = asyncio.get_running_loop()
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, self._backoff[0][0] - self._clock())
        self._timer = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._release_backoff()
        self._arm_timer()
