"""Informers: list, then watch, keeping slim records of one resource type.

Each watch event is decoded once with orjson and projected by `decode` into a slim record
(whatever small `__slots__` class the caller chooses); handlers see records, never dicts or
kubernetes-asyncio models. The resourceVersion is tracked from events and bookmarks; a 410 Expired
relists (diffing against what is known, so deletes missed while away are delivered), a lost
connection resumes the watch after a backoff. `synced` is set after the first full list.
The watch hands over each read's events together (`KubeClient.watch`), applied in order there.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import orjson

from core.kube.backoff import Backoff
from core.kube.client import ApiError, KubeClient, Resource

log = logging.getLogger("vulcan.kube.informer")

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Record(Protocol):
    key: str
    rv: str


R = TypeVar("R", bound=Record)

Decode = Callable[[dict[str, Any]], R]


def object_key(obj: dict[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKey)."""
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else meta["name"]


def _watch_error(status: dict[str, Any]) -> ApiError:
    """The Status of a watch ERROR event (e.g. 410 Expired) as the ApiError it stands for."""
    return ApiError(
        int(status.get("code") or 500),
        str(status.get("reason") or ""),
        str(status.get("message") or ""),
        status,
    )


class Handlers(Generic[R]):
    __slots__ = ("on_add", "on_delete", "on_update")

    def __init__(
        self,
        on_add: Callable[[R], None] | None = None,
        on_update: Callable[[R, R], None] | None = None,
        on_delete: Callable[[R], None] | None = None,
    ) -> None:
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete


class Informer(Generic[R]):
    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        decode: Decode[R],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_list: bool = False,
        watch_timeout: tuple[int, int] = (300, 600),
        backoff: Backoff | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.decode = decode
        # A decode may offer `refresh(old, obj)`: a MODIFIED's record reusing the old one's
        # work when nothing it reads changed (core.records.pods.PodRecord.refresh).
        self._refresh: Callable[[R, dict[str, Any]], R] | None = getattr(decode, "refresh", None)
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_list = watch_list
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff(initial=0.5, maximum=30.0)
        self.items: dict[str, R] = {}
        self.handlers: list[Handlers[R]] = []
        self.synced = asyncio.Event()
        self.resource_version: str | None = None
        self.relists = 0
        self._collected: dict[str, R] | None = None  # a watch-list's initial state so far
        # When the API server was last heard from (monotonic; for the informer-lag metric).
        self.last_heard = 0.0

    def add_handlers(
        self,
        on_add: Callable[[R], None] | None = None,
        on_update: Callable[[R, R], None] | None = None,
        on_delete: Callable[[R], None] | None = None,
    ) -> None:
        self.handlers.append(Handlers(on_add, on_update, on_delete))

    # --------------------------------------------------------------------- applying

    def _added(self, record: R) -> None:
        old = self.items.get(record.key)
        self.items[record.key] = record
        if old is None:
            for h in self.handlers:
                if h.on_add:
                    h.on_add(record)
        else:
            for h in self.handlers:
                if h.on_update:
                    h.on_update(old, record)

    def _deleted(self, key: str, record: R | None = None) -> None:
        old = self.items.pop(key, None)
        if old is None:
            return
        for h in self.handlers:
            if h.on_delete:
                h.on_delete(record if record is not None else old)

    def _replace(self, records: dict[str, R]) -> None:
        """Make `items` equal `records`, telling handlers what changed (after a relist)."""
        for key in [k for k in self.items if k not in records]:
            self._deleted(key)
        for key, record in records.items():
            old = self.items.get(key)
            if old is None or old.rv != record.rv:
                self._added(record)

    def _apply_event(self, line: bytes) -> None:
        event = orjson.loads(line)
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            raise _watch_error(obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        refresh = self._refresh
        old = self.items.get(object_key(obj)) if refresh and kind == "MODIFIED" else None
        record = self.decode(obj) if old is None or refresh is None else refresh(old, obj)
        if kind in ("ADDED", "MODIFIED"):
            self._added(record)
        elif kind == "DELETED":
            self._deleted(record.key, record)
        if rv:
            self.resource_version = rv

    # ------------------------------------------------------------------------ loops

    def _selectors(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    async def _list(self) -> None:
        records: dict[str, R] = {}
        token: str | None = None
        list_rv: str | None = None
        path = self.resource.path(self.namespace)
        while True:
            page = await self.client.request(
                "GET", path, query={**self._selectors(), "limit": self.page_size, "continue": token}
            )
            for obj in page.get("items") or ():
                record = self.decode(obj)
                records[record.key] = record
            meta = page.get("metadata") or {}
            list_rv = list_rv or meta.get("resourceVersion")
            token = meta.get("continue")
            if not token:
                break
        self._replace(records)
        self.last_heard = time.monotonic()
        self.resource_version = list_rv
        self.relists += 1

    async def _watch(self, *, initial: bool = False) -> None:
        timeout = random.randint(*self.watch_timeout)
        query: dict[str, Any] = {
            **self._selectors(),
            "watch": True,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
        }
        if initial:
            query.update(sendInitialEvents=True, resourceVersionMatch="NotOlderThan")
        else:
            query["resourceVersion"] = self.resource_version
        self._collected = {} if initial else None
        try:
            await self.client.watch(
                self.resource.path(self.namespace), query, timeout + 30, self._on_lines
            )
        finally:
            self._collected = None

    def _on_lines(self, lines: list[bytes]) -> None:
        """One read's events, applied in order as they come (from the watch's callback)."""
        self.last_heard = time.monotonic()
        collected = self._collected
        applied = False
        for line in lines:
            if collected is not None:
                if self._collect_initial(line, collected):
                    self._replace(collected)
                    self._collected = collected = None
                    self.relists += 1
                    self.synced.set()
                continue
            self._apply_event(line)
            applied = True
        if applied:
            self.backoff.reset()

    def _collect_initial(self, line: bytes, collected: dict[str, R]) -> bool:
        event = orjson.loads(line)
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":
            raise _watch_error(obj)
        meta = obj.get("metadata") or {}
        if event.get("type") == "BOOKMARK":
            self.resource_version = meta.get("resourceVersion") or self.resource_version
            return (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true"
        record = self.decode(obj)
        collected[record.key] = record
        return False

    async def run(self) -> None:
        """List and watch until cancelled. Restarted after a cancel, it resumes the watch from
        the last resourceVersion it saw (and relists if that has expired)."""
        need_list = self.resource_version is None
        while True:
            try:
                if need_list and self.watch_list:
                    await self._watch(initial=True)
                    need_list = False
                    continue
                if need_list:
                    await self._list()
                    need_list = False
                    self.synced.set()
                await self._watch()
            except ApiError as exc:
                if exc.expired:
                    log.info("watch expired; relisting", extra={"resource": self.resource.plural})
                    need_list = True
                    continue
                if not exc.retryable:
                    log.warning(
                        "informer error",
                        extra={"resource": self.resource.plural, "error": str(exc)},
                    )
                await self.backoff.wait()
                # A watch that cannot resume from resource_version falls back to a relist.
                need_list = need_list or self.resource_version is None

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)
