"""The Job a reconcile decides on (`FreshJobs`): the informer's copy, as Volcano's job
controller reads its cache, unless this controller wrote a newer one the watch has not brought
yet. resourceVersions are compared as integers, as Volcano's job cache compares them; one
that is not an integer, or a job whose last write conflicted, is read from the API server."""

from __future__ import annotations

from typing import Any

from core.kube.client import VCJOBS, ApiError, KubeClient
from core.kube.informer import Informer
from core.records import JobRecord


def _version(obj: dict[str, Any]) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion", ""))
    except ValueError:
        return None


class FreshJobs:
    def __init__(self, client: KubeClient, jobs: Informer[JobRecord]) -> None:
        self.client = client
        self.jobs = jobs
        # Job key -> the object this controller's last write of it returned, until the
        # informer's copy is as new.
        self._written: dict[str, dict[str, Any]] = {}
        # Jobs to read from the API server once: a write conflicted (someone else changed the
        # job since the copy it was made from).
        self._stale: set[str] = set()
        self.reads = 0  # API server reads (tests count them)

    def wrote(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        self._written[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = obj

    def conflicted(self, key: str) -> None:
        self._written.pop(key, None)
        self._stale.add(key)

    def forget(self, key: str) -> None:
        self._written.pop(key, None)
        self._stale.discard(key)

    async def get(self, key: str) -> dict[str, Any] | None:
        """The newest copy of the job this controller knows, None when it is gone. The copy
        is shared: a caller changes it only through a new dict."""
        record = self.jobs.items.get(key)
        written = self._written.get(key)
        if key not in self._stale:
            if record is None:
                return None  # deleted (a request of a job never seen is for a gone one)
            if written is None:
                return record.obj
            seen, ours = _version(record.obj), _version(written)
            if seen is not None and ours is not None:
                if seen >= ours:
                    del self._written[key]
                    return record.obj
                return written
        namespace, name = key.split("/", 1)
        self.reads += 1
        try:
            live = await self.client.get(VCJOBS, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                self.forget(key)
                return None
            raise
        self._stale.discard(key)
        self._written[key] = live
        return live
