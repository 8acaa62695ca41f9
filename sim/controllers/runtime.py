"""A small keyed-controller runtime for the embedded cluster's workload controllers: informers,
one work queue of `namespace/name` keys retried with backoff, an event recorder, and helpers
every workload controller needs (controller references, label selectors, timestamps).

It mirrors client-go's controller pattern as kube-controller-manager's controllers use it:
event handlers only enqueue keys; `sync(key)` reads the informers' caches and makes the API
calls; a failing sync is retried with backoff.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any

from core.kube.client import MERGE_PATCH, KubeClient, Resource
from core.kube.events import EventRecorder
from core.kube.informer import Informer, R
from core.kube.workqueue import WorkQueue

log = logging.getLogger("vulcan.sim.controllers")

# The writes show in managedFields under kube-controller-manager's name, as on a real cluster.
FIELD_MANAGER = "kube-controller-manager"


class ObjectRecord:
    """A whole object, as the workload controllers read Deployments and ReplicaSets."""

    __slots__ = ("key", "obj", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key = f"{meta.get('namespace') or ''}/{meta['name']}"
        self.rv: str = meta.get("resourceVersion", "")
        self.obj = obj

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"].get("uid") or "")


def controller_ref(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with `controller: true`, or None."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def owner_reference(resource: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The controller reference an object's dependents get (as kube-controller-manager's
    `metav1.NewControllerRef`)."""
    meta = obj["metadata"]
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KeyedController:
    """Subclasses set `name`, add informers with `informer()` in `__init__`, and define
    `sync(key)`."""

    name = ""
    workers = 2

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.queue: WorkQueue[str] = WorkQueue(self.name, base_delay=0.05, max_delay=30)
        self.recorder = EventRecorder(client, self.name, f"{self.name}-{socket.gethostname()}")
        self._informers: list[Informer[Any]] = []
        self._tasks: list[asyncio.Task[Any]] = []

    def informer(
        self,
        resource: Resource,
        decode: Callable[[dict[str, Any]], R],
        on_change: Callable[[R], None],
        *,
        label_selector: str | None = None,
    ) -> Informer[R]:
        """An informer whose adds, updates and deletes each call `on_change(record)`;
        `label_selector` narrows what it watches (the workload controllers' pods carry a
        label of their kind, so each watches its own and not every pod of the cluster)."""
        informer: Informer[R] = Informer(
            self.client, resource, decode, label_selector=label_selector
        )
        informer.add_handlers(
            _guard(on_change), _guard(lambda _old, new: on_change(new)), _guard(on_change)
        )
        self._informers.append(informer)
        return informer

    async def sync(self, key: str) -> None:
        raise NotImplementedError

    async def create(self, resource: Resource, body: dict[str, Any], namespace: str) -> Any:
        return await self.client.request(
            "POST", resource.path(namespace), query={"fieldManager": FIELD_MANAGER}, body=body
        )

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: dict[str, Any],
        namespace: str,
        *,
        subresource: str | None = None,
    ) -> Any:
        """A JSON merge patch (`null` removes a field)."""
        return await self.client.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            query={"fieldManager": FIELD_MANAGER},
            body=patch,
            content_type=MERGE_PATCH,
        )

    async def start(self) -> None:
        """Start the informers and wait for their first list, then the workers."""
        for informer in self._informers:
            self._spawn(informer.run(), f"{self.name}-informer-{informer.resource.plural}")
        await asyncio.gather(*(i.wait_synced() for i in self._informers))
        self._spawn(self.recorder.run(), f"{self.name}-events")
        self._spawn(
            self.queue.run_workers(self.workers, self.sync, max_retries=-1), f"{self.name}-sync"
        )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.queue.shutdown()
        await self.recorder.close()

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))


def _guard(handler: Callable[..., None]) -> Callable[..., None]:
    """Informer handlers must not raise (an exception would end the informer's task)."""

    def guarded(*args: Any) -> None:
        try:
            handler(*args)
        except Exception:
            log.exception("workload controller event handler failed")

    return guarded
