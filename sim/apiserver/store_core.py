"""The core of the embedded API server's `Store`: its state, the reads, the write primitives
every change goes through (a new resourceVersion, the encoded `Stored`, the owner index, the
event recorded for watchers), and watch registration.

Separate from the operations (create, update, delete, garbage collection, in the store_*
modules next to this one) because every one of them builds on these primitives; they subclass
`StoreCore` and `sim.apiserver.store.Store` combines them. `now_rfc3339` and `check_uid` live
here as the helpers shared by all the write paths.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import deque
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import orjson

from sim.apiserver import errors
from sim.apiserver.objects import DEFAULT_TOLERATION_SECONDS, field_values
from sim.apiserver.registry import Registry, ResourceType
from sim.apiserver.store_collection import (
    DELETED,
    INITIAL_EVENTS_END,
    Collection,
    Event,
    Key,
    Matcher,
    Stored,
    Watcher,
)

_clock_cache: list[Any] = [0, ""]


def now_rfc3339(offset_seconds: int = 0) -> str:
    """RFC 3339 UTC with second precision, as Kubernetes writes timestamps (cached per second:
    formatting was 5% of a create)."""
    second = int(time.time()) + offset_seconds
    if offset_seconds == 0 and _clock_cache[0] == second:
        return _clock_cache[1]
    text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if offset_seconds == 0:
        _clock_cache[0], _clock_cache[1] = second, text
    return text


def check_uid(rtype: ResourceType, name: str, wanted: str | None, stored: Stored) -> None:
    """A UID precondition (update, delete, binding): 409 when the object was recreated."""
    if wanted and wanted != stored.uid:
        raise errors.conflict(
            rtype.plural,
            name,
            rtype.group,
            f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {stored.uid}",
        )


class StoreCore:
    """The storage state (collections, the resourceVersion counter, the owner and UID
    indexes), its reads and watches, and the primitives every write ends in."""

    def __init__(
        self,
        registry: Registry,
        *,
        watch_history: int = 10_000,
        watcher_backlog: int = 200_000,
        default_not_ready_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
        default_unreachable_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
    ) -> None:
        self.registry = registry
        self.default_not_ready_toleration_seconds = default_not_ready_toleration_seconds
        self.default_unreachable_toleration_seconds = default_unreachable_toleration_seconds
        self.rv = 0
        self.watch_history = watch_history
        self.watcher_backlog = watcher_backlog
        self.collections: dict[ResourceType, Collection] = {
            rtype: Collection(rtype, watch_history) for rtype in registry.types
        }
        self._owned: dict[str, set[tuple[ResourceType, Key]]] = {}
        self._by_uid: dict[str, tuple[ResourceType, Key]] = {}
        self._gc_pending: deque[str] = deque()
        # Owners in foreground deletion, re-checked until their last dependent is gone.
        self._foreground: set[str] = set()
        self._gc_wakeup: asyncio.Event | None = None
        self._namespaces = self.collections[registry.get("", "v1", "namespaces")]  # type: ignore[index]
        self._priorityclasses = registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        self._default_priority: tuple[int, int] = (-1, 0)

    # ----------------------------------------------------------------------------- reads

    def collection(self, rtype: ResourceType) -> Collection:
        coll = self.collections.get(rtype)
        if coll is None:
            coll = self.collections[rtype] = Collection(rtype, self.watch_history)
        return coll

    def get(self, rtype: ResourceType, namespace: str, name: str) -> Stored:
        stored = self.collection(rtype).objects.get((namespace, name))
        if stored is None:
            raise errors.not_found(rtype.plural, name, rtype.group)
        return stored

    def find(self, rtype: ResourceType, namespace: str, name: str) -> Stored | None:
        return self.collection(rtype).objects.get((namespace, name))

    def list(
        self, rtype: ResourceType, namespace: str | None, matcher: Matcher | None = None
    ) -> tuple[int, list[Stored]]:
        objects: Iterable[Stored] = self.collection(rtype).objects.values()
        if namespace:
            objects = (s for s in objects if s.key[0] == namespace)
        if matcher is not None:
            objects = (s for s in objects if matcher(s.labels, s.fields))
        return self.rv, list(objects)

    def list_page(
        self,
        rtype: ResourceType,
        namespace: str | None,
        matcher: Matcher | None,
        limit: int,
        *,
        after: Key | None,
        list_rv: int | None,
    ) -> tuple[int, list[Stored], Key | None]:
        """Up to `limit` objects with keys after `after`, in key order; returns the list's
        resourceVersion, the page and the last key when more remain."""
        coll = self.collection(rtype)
        keys = coll.sorted_keys()
        index = 0 if after is None else bisect.bisect_right(keys, after)
        page: list[Stored] = []
        while index < len(keys) and len(page) < limit:
            key = keys[index]
            index += 1
            stored = coll.objects.get(key)
            if stored is None or (namespace and key[0] != namespace):
                continue
            if matcher is not None and not matcher(stored.labels, stored.fields):
                continue
            page.append(stored)
        more = index < len(keys) and len(page) == limit
        return (list_rv or self.rv), page, (page[-1].key if more and page else None)

    def reset_watch_cache(self) -> None:
        """What an API server restart does to watches: history is gone, so a watch from any
        earlier resourceVersion gets 410 Expired and its client relists."""
        for coll in self.collections.values():
            coll.history.clear()
            coll.compacted_rv = self.rv
            for watcher in list(coll.watchers):
                watcher.close()
            coll.watchers.clear()

    # ---------------------------------------------------------------------------- writes

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _stored(self, rtype: ResourceType, obj: dict[str, Any], rv: int) -> Stored:
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        owners = tuple(
            ref["uid"]
            for ref in meta.get("ownerReferences") or ()
            if isinstance(ref, dict) and ref.get("uid")
        )
        return Stored(
            key=(meta.get("namespace") or "", meta["name"]),
            uid=meta["uid"],
            rv=rv,
            # orjson over-allocates its output (~4 KB for a 1.5 KB pod); an exact-size copy
            # halves the memory of a 100k-pod store (bench/apiserver_scale.py).
            raw=bytes(memoryview(orjson.dumps(obj))),
            labels=meta.get("labels") or None,
            fields=field_values(rtype, obj),
            owners=owners,
        )

    def _unindex_owners(self, rtype: ResourceType, stored: Stored) -> None:
        for owner in stored.owners:
            owned = self._owned.get(owner)
            if owned is not None:
                owned.discard((rtype, stored.key))
                if not owned:
                    del self._owned[owner]

    def _index_owners(self, rtype: ResourceType, stored: Stored, prev: Stored | None) -> None:
        if prev is not None:
            self._unindex_owners(rtype, prev)
        for owner in stored.owners:
            self._owned.setdefault(owner, set()).add((rtype, stored.key))

    def _put(
        self, rtype: ResourceType, obj: dict[str, Any], event: str, prev: Stored | None
    ) -> Stored:
        rv = self._next_rv()
        stored = self._stored(rtype, obj, rv)
        coll = self.collection(rtype)
        coll.objects[stored.key] = stored
        self._by_uid[stored.uid] = (rtype, stored.key)
        self._index_owners(rtype, stored, prev)
        coll.record(Event(event, rv, stored, prev))
        return stored

    def _remove(self, rtype: ResourceType, stored: Stored, obj: dict[str, Any]) -> Stored:
        rv = self._next_rv()
        final = self._stored(rtype, obj, rv)
        coll = self.collection(rtype)
        coll.objects.pop(stored.key, None)
        self._by_uid.pop(stored.uid, None)
        self._unindex_owners(rtype, stored)
        coll.record(Event(DELETED, rv, final))
        self._foreground.discard(stored.uid)
        self._schedule_gc(stored.uid)
        return final

    # ------------------------------------------------------------------ garbage collection
    # `_remove` queues owners here; the collector itself is in store_delete.

    def _schedule_gc(self, uid: str) -> None:
        if uid in self._owned or uid in self._by_uid:
            self._gc_pending.append(uid)
            if self._gc_wakeup is not None:
                self._gc_wakeup.set()

    # ----------------------------------------------------------------------------- watch

    def watch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        matcher: Matcher | None,
        resource_version: str | None,
        send_initial_events: bool,
    ) -> tuple[Watcher, list[bytes]]:
        """Register a watcher; returns it with the lines to send first (initial state or
        history replay). Raises 410 Expired when the version is older than the history."""
        coll = self.collection(rtype)
        watcher = Watcher(namespace, matcher, self.watcher_backlog)
        first: list[bytes] = []
        if send_initial_events or resource_version in (None, "", "0"):
            for stored in coll.objects.values():
                if namespace and stored.key[0] != namespace:
                    continue
                if matcher is not None and not matcher(stored.labels, stored.fields):
                    continue
                first.append(b'{"type":"ADDED","object":' + stored.raw + b"}\n")
            if send_initial_events:
                first.append(self.bookmark(rtype, initial_events_end=True))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {resource_version}") from None
            if since < coll.compacted_rv:
                raise errors.expired(f"too old resource version: {since} ({coll.compacted_rv})")
            for event in coll.history:
                if event.rv > since:
                    line = watcher.line_for(event)
                    if line is not None:
                        first.append(line)
        coll.watchers.add(watcher)
        return watcher, first

    def unwatch(self, rtype: ResourceType, watcher: Watcher) -> None:
        self.collection(rtype).watchers.discard(watcher)
        watcher.close()

    def bookmark(self, rtype: ResourceType, *, initial_events_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + orjson.dumps(obj) + b"}\n"
