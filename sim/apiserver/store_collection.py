"""The records of the embedded API server's storage: one stored object (`Stored`), one change
(`Event`), one watch stream (`Watcher`) and the per-resource-type `Collection` that holds the
objects, their recent changes and their watchers.

Separate from the `Store` (sim.apiserver.store) because these are plain data structures with no
knowledge of Kubernetes write semantics: the store's operations build on them, the watch routes
read them, and keeping them apart keeps the fan-out hot path small and easy to read.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from sim.apiserver.registry import ResourceType

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped


class Stored:
    """One object as stored: its JSON and what selectors and the GC read."""

    __slots__ = ("fields", "key", "labels", "owners", "raw", "rv", "uid")

    def __init__(
        self,
        key: Key,
        uid: str,
        rv: int,
        raw: bytes,
        labels: dict[str, str] | None,
        fields: dict[str, str],
        owners: tuple[str, ...],
    ) -> None:
        self.key = key
        self.uid = uid
        self.rv = rv
        self.raw = raw
        self.labels = labels
        self.fields = fields
        self.owners = owners

    def decode(self) -> dict[str, Any]:
        return orjson.loads(self.raw)


class Event:
    """One change, encoded once; `line()` is what every interested watcher receives."""

    __slots__ = ("_lines", "fields", "labels", "namespace", "prev", "raw", "rv", "type")

    def __init__(
        self,
        type_: str,
        rv: int,
        stored: Stored,
        prev: Stored | None = None,
    ) -> None:
        self.type = type_
        self.rv = rv
        self.namespace = stored.key[0]
        self.labels = stored.labels
        self.fields = stored.fields
        self.raw = stored.raw
        self.prev = (prev.labels, prev.fields) if prev is not None else None
        self._lines: dict[str, bytes] = {}

    def line(self, type_: str | None = None) -> bytes:
        type_ = type_ or self.type
        line = self._lines.get(type_)
        if line is None:
            line = b'{"type":"' + type_.encode() + b'","object":' + self.raw + b"}\n"
            self._lines[type_] = line
        return line


Matcher = Callable[[dict[str, str] | None, dict[str, str]], bool]


class Watcher:
    """One watch stream's queue. A watcher that falls too far behind is closed, like the real
    API server does with slow watchers; its client re-watches (or relists on 410)."""

    __slots__ = ("closed", "matcher", "max_pending", "namespace", "pending", "wakeup")

    def __init__(self, namespace: str | None, matcher: Matcher | None, max_pending: int) -> None:
        self.namespace = namespace
        self.matcher = matcher
        self.pending: deque[bytes] = deque()
        self.wakeup = asyncio.Event()
        self.closed = False
        self.max_pending = max_pending

    def line_for(self, event: Event) -> bytes | None:
        if self.namespace and event.namespace != self.namespace:
            return None
        if self.matcher is None:
            return event.line()
        now = self.matcher(event.labels, event.fields)
        if event.type == MODIFIED and event.prev is not None:
            before = self.matcher(*event.prev)
            if now and before:
                return event.line()
            if now:
                return event.line(ADDED)
            if before:
                return event.line(DELETED)
            return None
        return event.line() if now else None

    def offer(self, event: Event) -> None:
        if self.closed:
            return
        line = self.line_for(event)
        if line is None:
            return
        if len(self.pending) >= self.max_pending:
            self.close()
            return
        self.pending.append(line)
        self.wakeup.set()

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()

    def drain(self) -> bytes:
        chunk = b"".join(self.pending)
        self.pending.clear()
        self.wakeup.clear()
        return chunk


class Collection:
    """All objects of one resource type, their recent changes and their watchers."""

    __slots__ = (
        "_sorted",
        "compacted_rv",
        "history",
        "last_rv",
        "objects",
        "rtype",
        "watchers",
    )

    def __init__(self, rtype: ResourceType, history: int) -> None:
        self.rtype = rtype
        self.objects: dict[Key, Stored] = {}
        self.history: deque[Event] = deque(maxlen=history)
        self.watchers: set[Watcher] = set()
        # Watches may resume from any resourceVersion >= compacted_rv.
        self.compacted_rv = 0
        self.last_rv = 0  # the version of the latest change in this collection
        self._sorted: tuple[int, list[Key]] = (-1, [])

    def sorted_keys(self) -> list[Key]:
        """Keys in order, re-sorted only after the collection changed (pagination)."""
        if self._sorted[0] != self.last_rv:
            self._sorted = (self.last_rv, sorted(self.objects))
        return self._sorted[1]

    def record(self, event: Event) -> None:
        if len(self.history) == self.history.maxlen and self.history:
            self.compacted_rv = self.history[0].rv
        self.history.append(event)
        self.last_rv = event.rv
        for watcher in self.watchers:
            watcher.offer(event)
