"""Controller expectations (client-go's `ControllerExpectations`): after a sync creates or
deletes pods, the next sync waits until the informer has seen those changes, so that pods
it cannot see yet are not made twice. An expectation older than `TTL` is given up, as in
Kubernetes (the watch events may have been missed)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

TTL = 300.0  # seconds (ExpectationsTimeout)


@dataclass
class _Pending:
    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    since: float = field(default_factory=time.monotonic)


class Expectations:
    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    def expect(self, key: str, adds: int = 0, deletes: set[str] | None = None) -> None:
        self._pending[key] = _Pending(adds, set(deletes or ()))

    def created(self, key: str) -> None:
        pending = self._pending.get(key)
        if pending is not None:
            pending.adds -= 1

    def deleted(self, key: str, pod_key: str) -> None:
        pending = self._pending.get(key)
        if pending is not None:
            pending.deletes.discard(pod_key)

    def satisfied(self, key: str) -> bool:
        pending = self._pending.get(key)
        if pending is None:
            return True
        if (pending.adds <= 0 and not pending.deletes) or time.monotonic() - pending.since > TTL:
            del self._pending[key]
            return True
        return False

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)
