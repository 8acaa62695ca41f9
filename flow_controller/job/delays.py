"""Policies with a `timeout`: their action runs later, unless the pod recovers first (Volcano's
delayed actions).

A delayed action is kept per job, pod and action (a second identical one is dropped). It is
cancelled when its pod reports what undoes its cause — a PodPending delay by any other event of
the pod, a PodFailed/PodEvicted delay by PodRunning — or when another action of the same reach
runs first (a job-level action cancels every delay of the job, RestartTask those of its task,
RestartPod those of its pod, RestartPartition those of its partition)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from core.durations import parse_duration
from flow_controller.job import state as js

_Key = tuple[str, str, str]  # job, pod, action


class DelayedActions:
    def __init__(self, fire: Callable[[str, js.Request], None]) -> None:
        self._fire = fire
        self._timers: dict[_Key, tuple[asyncio.TimerHandle, js.Request]] = {}

    def __len__(self) -> int:
        return len(self._timers)

    def add(self, job: str, request: js.Request, action: str, timeout: str) -> bool:
        """Run `action` for `request` after `timeout`; False when the same is waiting already."""
        key = (job, request.pod, action)
        if key in self._timers:
            return False
        later = dataclasses.replace(request, action=action)
        handle = asyncio.get_running_loop().call_later(parse_duration(timeout), self._run, key)
        self._timers[key] = (handle, later)
        return True

    def _run(self, key: _Key) -> None:
        entry = self._timers.pop(key, None)
        if entry is not None:
            self._fire(key[0], entry[1])

    def _cancel(self, keep: Callable[[_Key, js.Request], bool]) -> None:
        for key, (handle, request) in list(self._timers.items()):
            if not keep(key, request):
                handle.cancel()
                del self._timers[key]

    def on_pod_event(self, job: str, pod: str, event: str) -> None:
        def keep(key: _Key, request: js.Request) -> bool:
            if key[0] != job or key[1] != pod:
                return True
            if request.event == js.POD_PENDING:
                return event == js.POD_PENDING
            if request.event in (js.POD_FAILED, js.POD_EVICTED):
                return event != js.POD_RUNNING
            return True

        self._cancel(keep)

    def executed(self, job: str, action: str, request: js.Request) -> None:
        """`action` ran for `request`: delays it supersedes go."""

        def keep(key: _Key, delayed: js.Request) -> bool:
            if key[0] != job:
                return True
            if action == js.RESTART_TASK:
                return delayed.task != request.task
            if action == js.RESTART_POD:
                return delayed.pod != request.pod
            if action == js.RESTART_PARTITION:  # Volcano: the same partition's only
                return (delayed.task, delayed.partition) != (request.task, request.partition)
            return False

        self._cancel(keep)

    def forget(self, job: str) -> None:
        self._cancel(lambda key, _request: key[0] != job)

    def forget_all(self) -> None:
        """The term ends: a new one rebuilds from the API server (Volcano loses them too)."""
        self._cancel(lambda _key, _request: False)
