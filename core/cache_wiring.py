"""How the cluster cache is fed: one informer per kind it keeps, each event handed to the
cache's handlers, and the moment everything listed is loaded (`mark_synced`)."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import TYPE_CHECKING, Any

from core.kube.client import (
    HYPERNODES,
    NAMESPACES,
    NODES,
    NUMATOPOLOGIES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    KubeClient,
)
from core.kube.informer import Informer
from core.records import (
    NamespaceRecord,
    NodeRecord,
    PodGroupRecord,
    PodRecord,
    PriorityClassRecord,
    QueueRecord,
)
from core.records.numa import NumaRecord
from core.records.topology import HyperNodeRecord

if TYPE_CHECKING:
    from core.cache import ClusterCache

log = logging.getLogger("vulcan.cache")


def informers_for(
    cache: ClusterCache,
    client: KubeClient,
    *,
    watch_list: bool = False,
    pod_field_selector: str | None = None,
) -> list[Informer[Any]]:
    """The informers feeding `cache` (not started)."""
    nodes = Informer(client, NODES, NodeRecord, watch_list=watch_list)
    nodes.add_handlers(cache.on_node_add, cache.on_node_update, cache.on_node_delete)
    pods = Informer(
        client, PODS, PodRecord, watch_list=watch_list, field_selector=pod_field_selector
    )
    pods.add_handlers(cache.on_pod_add, cache.on_pod_update, cache.on_pod_delete)
    groups = Informer(client, PODGROUPS, PodGroupRecord, watch_list=watch_list)
    groups.add_handlers(cache.on_podgroup_add, cache.on_podgroup_update, cache.on_podgroup_delete)
    queues = Informer(client, QUEUES, QueueRecord, watch_list=watch_list)
    queues.add_handlers(cache.on_queue_add, cache.on_queue_update, cache.on_queue_delete)
    namespaces = Informer(client, NAMESPACES, NamespaceRecord, watch_list=watch_list)
    namespaces.add_handlers(
        cache.on_namespace_add, cache.on_namespace_update, cache.on_namespace_delete
    )
    priority = Informer(client, PRIORITY_CLASSES, PriorityClassRecord, watch_list=watch_list)
    priority.add_handlers(
        cache.on_priority_class_add,
        cache.on_priority_class_update,
        cache.on_priority_class_delete,
    )
    numa = Informer(client, NUMATOPOLOGIES, NumaRecord, watch_list=watch_list)
    numa.add_handlers(cache.on_numa_add, cache.on_numa_update, cache.on_numa_delete)
    return [nodes, pods, groups, queues, namespaces, priority, numa]


def hypernode_informer(
    cache: ClusterCache, client: KubeClient, *, watch_list: bool = False
) -> Informer[HyperNodeRecord]:
    """The HyperNodes' informer (not started), which `mark_synced` does not wait for: without
    the HyperNode CRD it never syncs, and only gangs with a networkTopology wait for it."""
    informer = Informer(client, HYPERNODES, HyperNodeRecord, watch_list=watch_list)
    informer.add_handlers(
        cache.on_hypernode_add, cache.on_hypernode_update, cache.on_hypernode_delete
    )
    return informer


async def mark_synced(cache: ClusterCache) -> None:
    """Set `cache.synced` once every informer has loaded its first list."""
    await asyncio.gather(*(i.synced.wait() for i in cache.informers))
    # Everything loaded so far lives long: keep the cyclic GC from walking it again
    # (and, as the cache grows, `freeze_on_growth` does the same for what comes later).
    gc.collect()
    gc.freeze()
    cache.synced.set()
    log.info(
        "cache synced",
        extra={
            "nodes": len(cache.nodes),
            "pods": len(cache.pods),
            "podgroups": len(cache.podgroups),
            "queues": len(cache.queues),
        },
    )
