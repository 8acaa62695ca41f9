"""What vulcan's admission webhooks know of the cluster: a `core.api.validation.ClusterView`.

PodGroups per queue and the pods allocated to each queue come from the extender's own cache
(`core.cache.ClusterCache`). Queues are informed here once more, as whole `Queue` models: the
cache keeps slim records (resource vectors, no annotations), while Volcano's queue rules need the
quantities as written (messages quote them) and the hierarchy annotations. Queues are few.

A queue the informer has not seen yet (created a moment ago) is fetched from the API server, so
a Job created right after its queue is not refused for a watch event still in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from core.api.scheduling import Queue
from core.api.topology import HyperNode
from core.api.validation import ClusterView
from core.cache import ClusterCache
from core.kube.client import HYPERNODES, QUEUES, ApiError, KubeClient
from core.kube.informer import Informer

log = logging.getLogger("vulcan.extender.webhooks")


class QueueModel:
    """An informer record holding the whole Queue (None if it does not decode)."""

    __slots__ = ("key", "queue", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.queue: Queue | None
        try:
            self.queue = Queue.model_validate(obj)
        except ValueError:
            log.warning("queue %s does not decode; admission ignores it", self.key)
            self.queue = None


class HyperNodeModel:
    """An informer record holding the whole HyperNode (None if it does not decode)."""

    __slots__ = ("hypernode", "key", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.hypernode: HyperNode | None
        try:
            self.hypernode = HyperNode.model_validate(obj)
        except ValueError:
            log.warning("hypernode %s does not decode; admission ignores it", self.key)
            self.hypernode = None


class NodeLabels(Mapping[str, Mapping[str, str]]):
    """Node name -> labels, read from the cache's node records."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def __getitem__(self, name: str) -> Mapping[str, str]:
        return self.cache.nodes[name].labels

    def __iter__(self) -> Iterator[str]:
        return iter(self.cache.nodes)

    def __len__(self) -> int:
        return len(self.cache.nodes)


class AllocatedPods(Mapping[str, int]):
    """Pods holding node capacity per queue, counted when asked (only queue creation with a
    new parent asks, so nothing is maintained per pod event)."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def __getitem__(self, queue: str) -> int:
        count = 0
        for group in self.cache.groups_by_queue.get(queue, ()):
            for pod_key in self.cache.pods_by_group.get(group, ()):
                pod = self.cache.pods.get(pod_key)
                if pod is not None and pod.occupies_node:
                    count += 1
        return count

    def __iter__(self) -> Iterator[str]:
        return iter(self.cache.groups_by_queue)

    def __len__(self) -> int:
        return len(self.cache.groups_by_queue)


class GroupsByQueue(Mapping[str, Sequence[str]]):
    """`namespace/name` of each queue's PodGroups, read from the cache's index."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def __getitem__(self, queue: str) -> Sequence[str]:
        return sorted(self.cache.groups_by_queue[queue])

    def __iter__(self) -> Iterator[str]:
        return iter(self.cache.groups_by_queue)

    def __len__(self) -> int:
        return len(self.cache.groups_by_queue)


class WebhookView:
    def __init__(
        self,
        client: KubeClient,
        cache: ClusterCache,
        *,
        scheduler_names: tuple[str, ...],
        max_queue_depth: int = 5,
    ) -> None:
        self.client = client
        self.cache = cache
        self.scheduler_names = scheduler_names
        self.max_queue_depth = max_queue_depth
        self.queues: Informer[QueueModel] = Informer(client, QUEUES, QueueModel)
        # HyperNodes for the tree rules; only /hypernodes/validate waits for this informer, so
        # a cluster without the HyperNode CRD keeps every other webhook.
        self.hypernodes: Informer[HyperNodeModel] = Informer(client, HYPERNODES, HyperNodeModel)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self.queues.run(), name="webhook-queue-informer"),
            asyncio.create_task(self.hypernodes.run(), name="webhook-hypernode-informer"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def hypernodes_synced(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                await self.hypernodes.synced.wait()
        except TimeoutError:
            return False
        return True

    async def wait_synced(self, timeout: float) -> bool:
        """Whether the queue informer and the extender's cache have listed everything."""
        try:
            async with asyncio.timeout(timeout):
                await self.queues.synced.wait()
                await self.cache.synced.wait()
        except TimeoutError:
            return False
        return True

    async def build(self, *referenced: str | None) -> ClusterView:
        """The view for one admission decision; `referenced` queues are fetched live when the
        informer does not know them yet."""
        queues = {k: r.queue for k, r in self.queues.items.items() if r.queue is not None}
        for name in referenced:
            if name and name not in queues:
                fetched = await self._fetch(name)
                if fetched is not None:
                    queues[name] = fetched
        return ClusterView(
            queues=queues,
            scheduler_names=self.scheduler_names,
            max_queue_depth=self.max_queue_depth,
            allocated_pods=AllocatedPods(self.cache),
            podgroups_by_queue=GroupsByQueue(self.cache),
            hypernodes={
                k: r.hypernode for k, r in self.hypernodes.items.items() if r.hypernode is not None
            },
            node_labels=NodeLabels(self.cache),
        )

    async def _fetch(self, name: str) -> Queue | None:
        try:
            obj = await self.client.get(QUEUES, name)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("could not read queue %s: %s", name, exc)
            return None
        return QueueModel(obj).queue
