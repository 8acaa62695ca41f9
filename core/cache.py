"""The cluster snapshot every scheduling decision reads: nodes, pods, PodGroups and Queues as
slim records, indexed by node, by group (`namespace/group-name`) and by queue, with incremental
accounting of what each node has requested and what each queue has allocated.

Accounting is kept exact under any order of events by remembering what each pod currently
contributes (`_node_share`, `_queue_share`): an event removes the pod's old contribution and adds
its new one, so a pod that arrives before its node or its PodGroup, a PodGroup that moves to
another queue, or a delete seen only after a relist all leave the sums equal to a recomputation
from scratch (`recompute()`, used by the tests).

The parts of the cache that are not `ClusterCache` itself live next to it:
`core.cache_snapshot` (`Snapshot` and the per-name totals arithmetic), `core.cache_columns`
(`NodeColumns`, the numpy columns for the extender's fast path), `core.cache_changes` (which
record changes matter to scheduling), `core.cache_leaving` (pods whose eviction vulcan asked
for, shown leaving until the API server says so) and `core.cache_wiring` (the informers that
feed it). `Snapshot`, `NodeColumns` and `ROW_DIMS` are re-exported
here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from core.api import keys
from core.cache_changes import _same_for_scheduling, _same_node, _same_podgroup, _same_queue
from core.cache_columns import ROW_DIMS as ROW_DIMS
from core.cache_columns import NodeColumns
from core.cache_leaving import LeavingPods
from core.cache_snapshot import _ZERO, CacheEpochs, LiveColumns, Snapshot, _add, _free, _sub
from core.cache_topology import TopologyBook
from core.cache_wiring import hypernode_informer, informers_for, mark_synced
from core.gc_pauses import freeze_on_growth
from core.kube.client import (
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
from core.resources import ResourceVector

log = logging.getLogger("vulcan.cache")


class ClusterCache:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeRecord] = {}
        self.pods: dict[str, PodRecord] = {}
        self.podgroups: dict[str, PodGroupRecord] = {}
        self.queues: dict[str, QueueRecord] = {}
        self.pods_by_node: dict[str, set[str]] = {}
        self.pods_by_group: dict[str, set[str]] = {}
        self.groups_by_queue: dict[str, set[str]] = {}
        self.node_requested: dict[str, ResourceVector] = {}
        self.queue_allocated: dict[str, ResourceVector] = {}
        self.queue_pending: dict[str, ResourceVector] = {}
        # queue -> its pods holding a node (bound, not finished, not leaving): what reclaim
        # and preempt may take of it.
        self.bound_by_queue: dict[str, set[str]] = {}
        self.namespace_queues: dict[str, str] = {}  # namespace -> its queue annotation
        # The few pods whose constraints reach other pods (required anti-affinity, host ports):
        # the gang planner walks these instead of every pod.
        self.anti_affinity_pods: set[str] = set()
        self.host_port_pods: set[str] = set()
        self.numa_pods: set[str] = set()  # Guaranteed pods (the numa-aware plugin's)
        # PriorityClass name -> value, and the globalDefault class's value under "": a
        # PodGroup's priority when it has no pods yet (a Volcano Job's before enqueue).
        self.priority_classes: dict[str, int] = {}
        # Node name -> its Numatopology (Volcano's resource-exporter; the numa-aware plugin).
        self.numa: dict[str, NumaRecord] = {}
        self._priority_records: dict[str, PriorityClassRecord] = {}
        # Cluster sums kept with every event, so a scheduling pass never walks all nodes for
        # them (at 5,000 nodes that walk was a fifth of the extender's gang pass).
        self.total_allocatable = _ZERO
        self.total_requested = _ZERO
        # What each pod currently contributes, so any event can take it back exactly.
        self._node_share: dict[str, tuple[str, ResourceVector]] = {}
        self._queue_share: dict[str, tuple[str, ResourceVector]] = {}
        self._pending_share: dict[str, tuple[str, ResourceVector]] = {}
        # Bumped whenever a PodGroup or one of its pods changes: a scheduling pass can tell a
        # group it decided before and that nothing has touched since (and skip it).
        self.group_versions: dict[str, int] = {}
        self._version = 0
        self._dirty_groups: set[str] = set()
        # Told the name of a node whenever its capacity or load changes (node added, updated or
        # deleted, a pod's contribution moved, a ledger reservation made or freed), so memos of
        # per-node answers on the hot path can forget it.
        self.node_listeners: list[Callable[[str], None]] = []
        self.epochs = CacheEpochs()
        self._columns = NodeColumns()
        self._stale_columns: set[str] = set()  # nodes whose slot `node_columns` refreshes
        self.informers: list[Informer] = []  # type: ignore[type-arg]
        self._tasks: list[asyncio.Task[None]] = []
        self.synced = asyncio.Event()
        self.changed = asyncio.Event()  # set on every change
        # Called on every change (the scheduling loop wakes on them).
        self.change_listeners: list[Callable[[], None]] = []
        # Told (key, record or None when deleted, the record before or None when new) of every
        # pod change a scheduling decision reads, after the accounting: e.g. a member bound
        # gives up its reservation at once instead of counting twice until the next pass, and
        # a gang that loses a bound member is told before any other event is handled.
        self.pod_listeners: list[Callable[[str, PodRecord | None, PodRecord | None], None]] = []
        self.leaving = LeavingPods()  # evictions asked, not seen yet (`core.cache_leaving`)
        # The HyperNodes and their tree (`core.cache_topology`); its informer is not waited
        # for at sync: a cluster without the HyperNode CRD schedules all but topology gangs.
        self.topology = TopologyBook(self.nodes, self._topology_changed)
        self.optional_informers: list[Informer] = []  # type: ignore[type-arg]

    def _changed(self) -> None:
        self.changed.set()
        for listener in self.change_listeners:
            listener()

    # ---------------------------------------------------------------------- nodes

    def bump_node(self, name: str) -> None:
        """Note that `name`'s capacity or load changed: its columns are refreshed when next
        read, and the `node_listeners` told now. Harmless for a node the cache does not (or no
        longer) know."""
        self._stale_columns.add(name)
        self.epochs.bump_room()
        for listener in self.node_listeners:
            listener(name)

    def node_columns(self) -> NodeColumns:
        """Every node's allocatable and requested as columns, current. Refreshed here, on
        read: a node's load moves with every pod bound to it, and only the extender's
        vectorised paths read the columns (the filter of a pod with a gang's room held on a
        candidate, prioritize), so a node bound to ten times between two reads is written
        once."""
        if self._stale_columns:
            nodes, requested, columns = self.nodes, self.node_requested, self._columns
            for name in self._stale_columns:
                node = nodes.get(name)
                allocatable = node.allocatable if node is not None else None
                columns.set(name, allocatable, requested.get(name, _ZERO))
            self._stale_columns.clear()
        return self._columns

    def _set_node(self, name: str, node: NodeRecord | None) -> None:
        old = self.nodes.get(name)
        if old is not None and node is not None and _same_node(old, node):
            # A heartbeat (conditions' times, images, ...): nothing scheduling reads changed.
            self.nodes[name] = node
            return
        if old is None or node is None or old.labels != node.labels:
            self.topology.nodes_changed()
        if old is not None and old.ready:
            self.total_allocatable = self.total_allocatable - old.allocatable
        if node is None:
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = node
            if node.ready:
                self.total_allocatable = self.total_allocatable + node.allocatable
        self.bump_node(name)
        self._changed()

    def on_node_add(self, node: NodeRecord) -> None:
        self._set_node(node.name, node)

    def on_node_update(self, old: NodeRecord, new: NodeRecord) -> None:
        self._set_node(new.name, new)

    def on_node_delete(self, node: NodeRecord) -> None:
        self._set_node(node.name, None)

    # ----------------------------------------------------------------------- pods

    def queue_of(self, pod: PodRecord) -> str | None:
        """The queue a pod's resources count against: its PodGroup's `spec.queue`; for a pod
        outside any group its annotation `scheduling.volcano.sh/queue-name`, then its
        namespace's, then `default`. None while the pod's PodGroup is not known yet."""
        if pod.group is not None:
            group = self.podgroups.get(pod.group)
            return group.queue if group is not None else None
        return (
            pod.queue_annotation or self.namespace_queues.get(pod.namespace) or keys.DEFAULT_QUEUE
        )

    def _account(self, pod: PodRecord | None, key: str) -> None:
        """Replace the pod's contribution to node and queue totals by its current one."""
        old_node = self._node_share.pop(key, None)
        if old_node is not None:
            _sub(self.node_requested, old_node[0], old_node[1])
            self.total_requested = self.total_requested - old_node[1]
            self.bump_node(old_node[0])
        old_queue = self._queue_share.pop(key, None)
        if old_queue is not None:
            _sub(self.queue_allocated, old_queue[0], old_queue[1])
            self._discard(self.bound_by_queue, old_queue[0], key)
        old_pending = self._pending_share.pop(key, None)
        if old_pending is not None:
            _sub(self.queue_pending, old_pending[0], old_pending[1])
        if pod is None or pod.terminal:
            return
        queue = self.queue_of(pod)
        if pod.node is None:
            if queue is not None and not pod.deleting:
                self._pending_share[key] = (queue, pod.requests)
                _add(self.queue_pending, queue, pod.requests)
            return
        self._node_share[key] = (pod.node, pod.requests)
        _add(self.node_requested, pod.node, pod.requests)
        self.total_requested = self.total_requested + pod.requests
        self.bump_node(pod.node)
        # A terminating pod still holds its node's room but no longer counts for its queue
        # (Volcano's Releasing is not an allocated status): a queue that is being reclaimed
        # stops being over its share when its victims start terminating, not when they are gone.
        if queue is not None and not pod.deleting:
            self._queue_share[key] = (queue, pod.requests)
            _add(self.queue_allocated, queue, pod.requests)
            self.bound_by_queue.setdefault(queue, set()).add(key)

    def _bound_changed(self, old: PodRecord | None, new: PodRecord | None) -> None:
        """A pod that holds (or held) a node changed: what reclaim and preempt may take of its
        queue moved (`CacheEpochs.queue_pods`)."""
        for pod in (old, new):
            if pod is not None and pod.node is not None:
                self.epochs.bump_queue(self.queue_of(pod))

    def _holds_a_node(self, group_key: str) -> bool:
        pods = self.pods
        return any(
            (pod := pods.get(k)) is not None and pod.node is not None
            for k in self.pods_by_group.get(group_key, ())
        )

    def _touch_group(self, key: str | None) -> None:
        if key is not None:
            self.epochs.tick()
            self._version += 1
            self.group_versions[key] = self._version
            self._dirty_groups.add(key)

    def take_dirty_groups(self) -> set[str]:
        """The groups touched since the last call (for one consumer: the scheduling loop)."""
        dirty, self._dirty_groups = self._dirty_groups, set()
        return dirty

    def _index_pod(self, pod: PodRecord, old: PodRecord | None) -> None:
        self._touch_group(pod.group)
        if old is not None and old.group != pod.group:
            self._touch_group(old.group)
        if old is not None:
            if old.node and old.node != pod.node:
                self._discard(self.pods_by_node, old.node, old.key)
            if old.group and old.group != pod.group:
                self._discard(self.pods_by_group, old.group, old.key)
        if pod.node:
            self.pods_by_node.setdefault(pod.node, set()).add(pod.key)
        if pod.group:
            self.pods_by_group.setdefault(pod.group, set()).add(pod.key)

    def _index_constraints(self, key: str, pod: PodRecord | None) -> None:
        constraints = pod.constraints if pod is not None and not pod.terminal else None
        if constraints is not None and constraints.pod_anti_affinity:
            self.anti_affinity_pods.add(key)
        else:
            self.anti_affinity_pods.discard(key)
        if constraints is not None and constraints.host_ports:
            self.host_port_pods.add(key)
        else:
            self.host_port_pods.discard(key)
        if pod is not None and pod.numa is not None and not pod.terminal:
            self.numa_pods.add(key)
        else:
            self.numa_pods.discard(key)

    @staticmethod
    def _discard(index: dict[str, set[str]], name: str, key: str) -> None:
        members = index.get(name)
        if members is not None:
            members.discard(key)
            if not members:
                del index[name]

    def assume_deleting(self, pod: PodRecord) -> bool:
        """Show `pod` (the record the cache holds) as being deleted from now on, until the API
        server shows it deleted or `forget_deleting` (`core.cache_leaving`); False when the
        cache holds another record of it or it is being deleted already."""
        if self.pods.get(pod.key) is not pod or pod.deleting:
            return False
        self.leaving.mark(pod)
        self.on_pod_add(pod)
        return True

    def forget_deleting(self, key: str) -> None:
        """The deletion asked for did not happen (an eviction refused): the cache shows the pod
        as the API server last did."""
        last = self.leaving.drop(key)
        if last is not None and self.pods.get(key) is not None:
            self.on_pod_add(last)

    def on_pod_add(self, pod: PodRecord) -> None:
        if pod.key in self.leaving:
            pod = self.leaving.overlay(pod)
        old = self.pods.get(pod.key)
        self.pods[pod.key] = pod
        if old is not None and _same_for_scheduling(old, pod):
            # A status write (conditions, container states) or an annotation: nothing any
            # decision reads changed, so no group is touched and no pass has work to redo.
            return
        self._index_pod(pod, old)
        self._index_constraints(pod.key, pod)
        self._account(pod, pod.key)
        self._bound_changed(old, pod)
        self.epochs.tick()
        for listener in self.pod_listeners:
            listener(pod.key, pod, old)
        self._changed()

    def on_pod_update(self, old: PodRecord, new: PodRecord) -> None:
        self.on_pod_add(new)

    def on_pod_delete(self, pod: PodRecord) -> None:
        self.leaving.drop(pod.key)
        known = self.pods.pop(pod.key, None) or pod
        self._touch_group(known.group)
        if known.node:
            self._discard(self.pods_by_node, known.node, known.key)
        if known.group:
            self._discard(self.pods_by_group, known.group, known.key)
            if known.group not in self.podgroups and known.group not in self.pods_by_group:
                self.group_versions.pop(known.group, None)
        self._account(None, pod.key)
        self._bound_changed(known, None)
        self.epochs.tick()
        self._index_constraints(pod.key, None)
        for listener in self.pod_listeners:
            listener(pod.key, None, known)
        self._changed()

    # ------------------------------------------------------------------ podgroups

    def _reaccount_group(self, group_key: str) -> None:
        for pod_key in self.pods_by_group.get(group_key, ()):
            self._account(self.pods.get(pod_key), pod_key)

    def on_podgroup_add(self, group: PodGroupRecord) -> None:
        old = self.podgroups.get(group.key)
        self.podgroups[group.key] = group
        if old is not None and _same_podgroup(old, group):
            # A status write (conditions, counts): nothing a decision reads changed.
            return
        self._touch_group(group.key)
        if self._holds_a_node(group.key):  # its running members are a victim unit
            self.epochs.bump_queue(group.queue)
            if old is not None:
                self.epochs.bump_queue(old.queue)
        if old is not None and old.queue != group.queue:
            self._discard(self.groups_by_queue, old.queue, group.key)
        self.groups_by_queue.setdefault(group.queue, set()).add(group.key)
        if old is None or old.queue != group.queue:
            self._reaccount_group(group.key)
        self._changed()

    def on_podgroup_update(self, old: PodGroupRecord, new: PodGroupRecord) -> None:
        self.on_podgroup_add(new)

    def on_podgroup_delete(self, group: PodGroupRecord) -> None:
        known = self.podgroups.pop(group.key, None) or group
        self._touch_group(group.key)
        if self._holds_a_node(group.key):
            self.epochs.bump_queue(known.queue)
        if group.key not in self.pods_by_group:
            self.group_versions.pop(group.key, None)
        self._discard(self.groups_by_queue, known.queue, known.key)
        self._reaccount_group(group.key)
        self._changed()

    # --------------------------------------------------------------------- queues

    def on_queue_add(self, queue: QueueRecord) -> None:
        self.queues[queue.name] = queue
        self.epochs.bump_queue(queue.name)
        self._changed()

    def on_queue_update(self, old: QueueRecord, new: QueueRecord) -> None:
        known = self.queues.get(new.name)
        self.queues[new.name] = new
        if known is not None and _same_queue(known, new):
            return  # its status: the extender's own write
        self.epochs.bump_queue(new.name)
        self._changed()

    def on_queue_delete(self, queue: QueueRecord) -> None:
        self.queues.pop(queue.name, None)
        self.epochs.bump_queue(queue.name)
        self._changed()

    # ----------------------------------------------------------------- namespaces

    def _set_namespace_queue(self, name: str, queue: str | None) -> None:
        if self.namespace_queues.get(name) == queue:
            return
        self.epochs.tick()
        if queue is None:
            self.namespace_queues.pop(name, None)
        else:
            self.namespace_queues[name] = queue
        # Rare (a namespace annotated or re-annotated): re-account its pods outside groups.
        for key, pod in self.pods.items():
            if pod.namespace == name and pod.group is None:
                self._account(pod, key)
        self._changed()

    def on_namespace_add(self, namespace: NamespaceRecord) -> None:
        self._set_namespace_queue(namespace.name, namespace.queue)

    def on_namespace_update(self, old: NamespaceRecord, new: NamespaceRecord) -> None:
        self._set_namespace_queue(new.name, new.queue)

    def on_namespace_delete(self, namespace: NamespaceRecord) -> None:
        self._set_namespace_queue(namespace.name, None)

    # ------------------------------------------------------------------ HyperNodes

    def _topology_changed(self) -> None:
        self.epochs.bump_topology()
        self._changed()

    def on_hypernode_add(self, record: HyperNodeRecord) -> None:
        self.topology.set(record)

    def on_hypernode_update(self, old: HyperNodeRecord, new: HyperNodeRecord) -> None:
        self.topology.set(new)

    def on_hypernode_delete(self, record: HyperNodeRecord) -> None:
        self.topology.delete(record)

    # ------------------------------------------------------------ priority classes

    def _priority_classes_changed(self) -> None:
        values = {r.name: r.value for r in self._priority_records.values()}
        defaults = [r.value for r in self._priority_records.values() if r.global_default]
        if defaults:
            values[""] = max(defaults)
        if values == self.priority_classes:
            return
        self.priority_classes = values
        # Rare: every group's priority may have moved (decisions and job order read it).
        for key in self.podgroups:
            self._touch_group(key)
        self._changed()

    def on_priority_class_add(self, record: PriorityClassRecord) -> None:
        self._priority_records[record.name] = record
        self._priority_classes_changed()

    def on_priority_class_update(self, old: PriorityClassRecord, new: PriorityClassRecord) -> None:
        self._priority_records[new.name] = new
        self._priority_classes_changed()

    def on_priority_class_delete(self, record: PriorityClassRecord) -> None:
        self._priority_records.pop(record.name, None)
        self._priority_classes_changed()

    # --------------------------------------------------------------- Numatopologies

    def on_numa_add(self, record: NumaRecord) -> None:
        self.numa[record.name] = record
        self._numa_changed(record.name)

    def on_numa_update(self, old: NumaRecord, new: NumaRecord) -> None:
        self.numa[new.name] = new
        self._numa_changed(new.name)

    def on_numa_delete(self, record: NumaRecord) -> None:
        self.numa.pop(record.name, None)
        self._numa_changed(record.name)

    def _numa_changed(self, name: str) -> None:
        # What the node offers a Guaranteed pod moved: read as the node's room.
        self.bump_node(name)
        self._changed()

    # --------------------------------------------------------------------- reads

    def node_free(self, name: str) -> ResourceVector:
        return _free(self.nodes, self.node_requested, name)

    def live_view(self, *, numa: bool = True) -> Snapshot:
        """The cache itself seen as a Snapshot, without copying anything: valid only until
        the next event is applied, i.e. for synchronous code that does not await (a
        scheduling pass). Copying 10,000 groups' member sets cost a quarter of a pass.
        `numa=False` leaves the Numatopologies out (a conf without the numa-aware plugin)."""
        return Snapshot(
            nodes=self.nodes,
            pods=self.pods,
            pods_by_node=self.pods_by_node,  # type: ignore[arg-type]
            pods_by_group=self.pods_by_group,  # type: ignore[arg-type]
            podgroups=self.podgroups,
            queues=self.queues,
            node_requested=self.node_requested,
            queue_allocated=self.queue_allocated,
            queue_pending=self.queue_pending,
            namespace_queues=self.namespace_queues,
            total_allocatable=self.total_allocatable,
            total_requested=self.total_requested,
            anti_affinity_pods=self.anti_affinity_pods,
            host_port_pods=self.host_port_pods,
            priority_classes=self.priority_classes,
            group_versions=self.group_versions,
            bound_by_queue=self.bound_by_queue,  # type: ignore[arg-type]
            epochs=self.epochs,
            numa=self.numa if numa else {},
            numa_pods=self.numa_pods,
            hypernodes=self.topology.tree(),
            live_columns=LiveColumns(self.node_columns, self.nodes, self.node_requested),
        )

    def snapshot(self) -> Snapshot:
        """A copy that stays consistent across awaits."""
        return Snapshot(
            nodes=dict(self.nodes),
            pods=dict(self.pods),
            pods_by_node={k: frozenset(v) for k, v in self.pods_by_node.items()},
            pods_by_group={k: frozenset(v) for k, v in self.pods_by_group.items()},
            podgroups=dict(self.podgroups),
            queues=dict(self.queues),
            node_requested=dict(self.node_requested),
            queue_allocated=dict(self.queue_allocated),
            queue_pending=dict(self.queue_pending),
            namespace_queues=dict(self.namespace_queues),
            total_allocatable=self.total_allocatable,
            total_requested=self.total_requested,
            anti_affinity_pods=frozenset(self.anti_affinity_pods),
            host_port_pods=frozenset(self.host_port_pods),
            priority_classes=self.priority_classes,
            group_versions=dict(self.group_versions),
            bound_by_queue={k: frozenset(v) for k, v in self.bound_by_queue.items()},
            epochs=self.epochs.copy(),
            numa=dict(self.numa),
            numa_pods=frozenset(self.numa_pods),
            hypernodes=self.topology.tree(),
        )

    def recompute(self) -> tuple[dict[str, ResourceVector], dict[str, ResourceVector]]:
        """Node requested and queue allocated computed from scratch (for checks and tests)."""
        nodes: dict[str, ResourceVector] = {}
        queues: dict[str, ResourceVector] = {}
        for pod in self.pods.values():
            if not pod.occupies_node:
                continue
            assert pod.node is not None
            _add(nodes, pod.node, pod.requests)
            queue = self.queue_of(pod)
            if queue is not None and not pod.deleting:
                _add(queues, queue, pod.requests)
        return nodes, queues

    # ------------------------------------------------------------------ wiring

    def start(
        self, client: KubeClient, *, watch_list: bool = False, pod_field_selector: str | None = None
    ) -> None:
        """Start informers for nodes, pods, PodGroups, Queues, Namespaces, PriorityClasses and
        Numatopologies feeding this cache (`core.cache_wiring`)."""
        self.informers = informers_for(
            self, client, watch_list=watch_list, pod_field_selector=pod_field_selector
        )
        self.optional_informers = [hypernode_informer(self, client, watch_list=watch_list)]
        self.topology.listing()
        self._tasks = [
            asyncio.create_task(i.run(), name=f"informer-{i.resource.plural}")
            for i in (*self.informers, *self.optional_informers)
        ]
        self._tasks.append(
            asyncio.create_task(self._topology_synced(), name="cache-hypernodes-synced")
        )
        self._tasks.append(asyncio.create_task(self._mark_synced(), name="cache-synced"))
        self._tasks.append(
            asyncio.create_task(freeze_on_growth(self.object_count), name="cache-gc-freeze")
        )

    def object_count(self) -> int:
        return len(self.nodes) + len(self.pods) + len(self.podgroups) + len(self.queues)

    async def _mark_synced(self) -> None:
        await mark_synced(self)

    async def _topology_synced(self) -> None:
        await self.optional_informers[0].synced.wait()
        self.topology.synced()

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
