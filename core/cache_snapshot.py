"""`Snapshot`, the consistent view of the cluster cache a scheduling pass reads, and the
arithmetic on the per-name totals it carries (`dict[str, ResourceVector]`: what each node has
requested, what each queue has allocated): `_add`, `_sub` and `_free`.

Separate from `ClusterCache` (`core.cache`), which keeps those totals with these helpers and
hands out Snapshots of them; `core.cache` re-exports `Snapshot`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.hypernode_tree import EMPTY_TREE, HyperNodeTree
from core.records import NodeRecord, PodGroupRecord, PodRecord, QueueRecord
from core.records.numa import NumaRecord
from core.resources import ResourceVector

if TYPE_CHECKING:  # numpy's, read only where a live view carries them
    from core.cache_columns import NodeColumns

_ZERO = ResourceVector()


def _add(totals: dict[str, ResourceVector], name: str, amount: ResourceVector) -> None:
    totals[name] = totals.get(name, _ZERO) + amount


def _sub(totals: dict[str, ResourceVector], name: str, amount: ResourceVector) -> None:
    left = totals.get(name, _ZERO) - amount
    if left.is_zero():
        totals.pop(name, None)
    else:
        totals[name] = left


@dataclass(slots=True)
class CacheEpochs:
    """Counters that move whenever something a scheduling decision may read changes: what a
    memo compares to tell that nothing changed (one global `clock`, never reused, moved by
    every change of a node, pod, PodGroup, Queue or namespace queue; a queue gone and back
    starts anew). `room`: any node's capacity or load (a pod bound or gone, a
    gang's room reserved); `queue_pods[q]`: the pods of queue q that hold a node (what reclaim
    and preempt may take: bound and not leaving), or one of its PodGroups; `topology`: the
    HyperNode tree (a HyperNode, a node's labels, the node set, the HyperNodes listed)."""

    room: int = 0
    queue_pods: dict[str, int] = dataclasses.field(default_factory=dict)
    clock: int = 0
    topology: int = 0

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def bump_room(self) -> None:
        self.room = self.tick()

    def bump_queue(self, queue: str | None) -> None:
        if queue is not None:
            self.queue_pods[queue] = self.tick()

    def bump_topology(self) -> None:
        self.topology = self.tick()

    def copy(self) -> CacheEpochs:
        return CacheEpochs(self.room, dict(self.queue_pods), self.clock, self.topology)


@dataclass(frozen=True, slots=True)
class LiveColumns:
    """The cache's node columns (`read`, current when called) with the maps they follow."""

    read: Callable[[], NodeColumns]
    nodes: Mapping[str, NodeRecord]
    requested: Mapping[str, ResourceVector]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent view for one scheduling pass (copies of the top-level maps; the records
    themselves are immutable)."""

    nodes: dict[str, NodeRecord]
    pods: dict[str, PodRecord]
    pods_by_node: dict[str, frozenset[str]]
    pods_by_group: dict[str, frozenset[str]]
    podgroups: dict[str, PodGroupRecord]
    queues: dict[str, QueueRecord]
    node_requested: dict[str, ResourceVector]
    queue_allocated: dict[str, ResourceVector]
    queue_pending: dict[str, ResourceVector] = dataclasses.field(default_factory=dict)
    """Σ requests of each queue's pods that wait for a node (not bound, not finished)."""
    namespace_queues: dict[str, str] = dataclasses.field(default_factory=dict)
    total_allocatable: ResourceVector = _ZERO
    """Σ allocatable of Ready nodes (what Volcano divides among queues)."""
    total_requested: ResourceVector = _ZERO
    """Σ requests of the pods that occupy a node."""
    anti_affinity_pods: frozenset[str] | set[str] = frozenset()
    """Keys of the pods (bound or not) with a required pod anti-affinity term: kube-scheduler
    keeps incoming pods away from them (InterPodAffinity), whatever the incoming pod asks."""
    host_port_pods: frozenset[str] | set[str] = frozenset()
    """Keys of the pods (bound or not) that ask for a host port (NodePorts)."""
    priority_classes: dict[str, int] = dataclasses.field(default_factory=dict)
    """PriorityClass name -> value; the globalDefault one also under "" (a PodGroup that names
    none has its priority)."""
    group_versions: dict[str, int] = dataclasses.field(default_factory=dict)
    """PodGroup key -> a version that moves whenever the group or one of its pods changes."""
    bound_by_queue: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    """Queue -> its pods holding a node (bound, not finished, not leaving)."""
    epochs: CacheEpochs = dataclasses.field(default_factory=CacheEpochs)
    """What changed since when (`CacheEpochs`); the live view's are the cache's own."""
    numa: dict[str, NumaRecord] = dataclasses.field(default_factory=dict)
    """Node name -> its Numatopology (a change of one moves `epochs.room`)."""
    numa_pods: frozenset[str] | set[str] = frozenset()
    """Keys of the Guaranteed pods (bound or not, not finished): what holds NUMA cells."""
    hypernodes: HyperNodeTree = EMPTY_TREE
    """The HyperNode tree (`core.hypernode_tree`): where networkTopology gangs may land."""
    live_columns: LiveColumns | None = None
    """The live view's: the cache's node columns (`node_columns`)."""

    def node_columns(self) -> NodeColumns | None:
        """Every node's allocatable and requested as the cache's numpy columns, when this
        snapshot's nodes and requested amounts are the very maps they follow (a live view);
        None for a copy, or a trial with other amounts (`dataclasses.replace`)."""
        live = self.live_columns
        if live is None or live.nodes is not self.nodes:
            return None
        if live.requested is not self.node_requested:
            return None
        return live.read()

    def node_free(self, name: str) -> ResourceVector:
        return _free(self.nodes, self.node_requested, name)

    def group_pods(self, group_key: str) -> list[PodRecord]:
        """The pods of PodGroup `group_key` this snapshot has."""
        pods = self.pods
        return [pods[k] for k in self.pods_by_group.get(group_key, ()) if k in pods]


def _free(
    nodes: dict[str, NodeRecord], requested: dict[str, ResourceVector], name: str
) -> ResourceVector:
    node = nodes.get(name)
    if node is None:
        return _ZERO
    return node.allocatable - requested.get(name, _ZERO)
