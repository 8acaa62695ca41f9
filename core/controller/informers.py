"""Informers shared by the controllers of one process: one list+watch per resource and
selector, whoever asks for it first, with each controller adding its own handlers."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from core.kube.client import KubeClient, Resource
from core.kube.informer import Decode, Informer, R


class SharedInformers:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._informers: dict[str, Informer[Any]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def get(self, resource: Resource, decode: Decode[R], **options: Any) -> Informer[R]:
        """The informer of `resource` with these options (selectors): created on first use,
        shared by later callers asking for the same (who must decode the same way)."""
        key = f"{resource.plural}.{resource.group}?{sorted(options.items())}"
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(self.client, resource, decode, **options)
            self._informers[key] = informer
        return informer

    def start(self) -> None:
        for informer in self._informers.values():
            self._tasks.append(
                asyncio.create_task(informer.run(), name=f"informer-{informer.resource.plural}")
            )

    @property
    def synced(self) -> bool:
        return bool(self._informers) and all(i.synced.is_set() for i in self._informers.values())

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self._informers.values()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
