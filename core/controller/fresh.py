"""The copy of an object a reconcile decides on (`FreshRecords`): its informer's, as Volcano's
controllers read their caches, unless this controller wrote a newer one the watch has not
brought yet. resourceVersions are compared as integers, as Volcano's job cache compares them;
one that is not an integer, or an object whose last write conflicted, is read from the API
server."""

from __future__ import annotations

from typing import Any, Generic

from core.kube.client import ApiError
from core.kube.informer import Informer, R, object_key


def _version(rv: str) -> int | None:
    try:
        return int(rv)
    except ValueError:
        return None


class FreshRecords(Generic[R]):
    def __init__(self, informer: Informer[R]) -> None:
        self.informer = informer
        # key -> the record of what this controller's last write of it returned, until the
        # informer's copy is as new.
        self._written: dict[str, R] = {}
        # Keys to read from the API server once: a write conflicted (someone else changed the
        # object since the copy it was made from).
        self._stale: set[str] = set()
        self.reads = 0  # API server reads (tests count them)

    def wrote(self, obj: dict[str, Any]) -> None:
        self._written[object_key(obj)] = self.informer.decode(obj)

    def conflicted(self, key: str) -> None:
        self._written.pop(key, None)
        self._stale.add(key)

    def forget(self, key: str) -> None:
        self._written.pop(key, None)
        self._stale.discard(key)

    async def get(self, key: str) -> R | None:
        """The newest copy this controller knows, None when the object is gone. The copy is
        shared with the informer: a caller changes it only through a new object."""
        record = self.informer.items.get(key)
        written = self._written.get(key)
        if key not in self._stale:
            if record is None:
                return None  # deleted (a request for an object never seen is for a gone one)
            if written is None:
                return record
            seen, ours = _version(record.rv), _version(written.rv)
            if seen is not None and ours is not None:
                if seen >= ours:
                    del self._written[key]
                    return record
                return written
        namespace, _, name = key.rpartition("/")
        self.reads += 1
        try:
            live = await self.informer.client.get(self.informer.resource, name, namespace or None)
        except ApiError as exc:
            if exc.not_found:
                self.forget(key)
                return None
            raise
        self._stale.discard(key)
        fresh = self._written[key] = self.informer.decode(live)
        return fresh
