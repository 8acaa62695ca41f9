"""The stand-in's picture of the cluster, kept by its informers: the nodes (in a stable order,
with their accounting and column copy), the active pods, and the pods assumed on a node while
their bind is in flight.

Separate from the scheduling cycle (`sim.scheduler.cycle`) and the binding
(`sim.scheduler.binding`), which read and assume into this picture; `Scheduler`
(`sim.scheduler.scheduler`) combines them and owns the state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sim.scheduler.framework import SchedNode, SchedPod

if TYPE_CHECKING:
    from sim.scheduler.columns import NodeColumns
    from sim.scheduler.queue import SchedulingQueue


class _NodeObject:
    """Informer record for nodes: the raw object (SchedNode keeps the accounting)."""

    __slots__ = ("key", "obj", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.key: str = obj["metadata"]["name"]
        self.rv: str = obj["metadata"].get("resourceVersion", "")


class SchedulerCache:
    """The informer handlers of `Scheduler` and what they keep: nodes, pods, assumed pods."""

    # Provided by Scheduler.
    served: frozenset[str]
    queue: SchedulingQueue
    nodes: dict[str, SchedNode]
    node_order: list[str]
    columns: NodeColumns
    pods: dict[str, SchedPod]
    assumed: dict[str, tuple[SchedPod, str]]
    affinity_pods: dict[str, SchedPod]
    waiting_on_pods: set[str]

    # ------------------------------------------------------------------ informer handlers

    def _node_added(self, record: _NodeObject) -> None:
        node = self.nodes.get(record.key)
        if node is None:
            node = self.nodes[record.key] = SchedNode(record.obj)
            node.on_change = self.columns.mark
            self.node_order.append(record.key)
            self.columns.reset()
            for pod in self.pods.values():  # pods seen before their node
                if pod.node == record.key:
                    node.add(pod)
        else:
            node.update(record.obj)
        self.queue.move_all()

    def _node_updated(self, old: _NodeObject, new: _NodeObject) -> None:
        node = self.nodes.get(new.key)
        if node is None:
            self._node_added(new)
            return
        before = (node.allocatable, node.labels, node.taints, node.unschedulable)
        node.update(new.obj)
        if before != (node.allocatable, node.labels, node.taints, node.unschedulable):
            self.queue.move_all()

    def _node_deleted(self, record: _NodeObject) -> None:
        if self.nodes.pop(record.key, None) is not None:
            self.node_order.remove(record.key)
            self.columns.reset()

    def _pod_added(self, pod: SchedPod) -> None:
        self._pod_changed(None, pod)

    def _pod_updated(self, old: SchedPod, new: SchedPod) -> None:
        self._pod_changed(old, new)

    def _pod_changed(self, old: SchedPod | None, pod: SchedPod) -> None:
        previous = self.pods.get(pod.key)
        self._unaccount(pod.key, previous)
        self.pods[pod.key] = pod
        if pod.pod_affinity is not None:
            self.affinity_pods[pod.key] = pod  # counts only while on a node (or assumed)
        else:
            self.affinity_pods.pop(pod.key, None)
        if pod.node is not None:
            self.assumed.pop(pod.key, None)
            node = self.nodes.get(pod.node)
            if node is not None:
                node.add(pod)
            self.queue.delete(pod.key)
            self.waiting_on_pods.discard(pod.key)
            if self.waiting_on_pods and (previous is None or previous.node is None):
                # AssignedPodAdd: what InterPodAffinity and PodTopologySpread wait for.
                self.queue.move(self.waiting_on_pods)
            return
        if pod.key in self.assumed:
            # Binding in flight: keep the assumption (the pod is no longer queued).
            assumed_node = self.nodes.get(self.assumed[pod.key][1])
            if assumed_node is not None:
                assumed_node.add(pod)
            self.assumed[pod.key] = (pod, self.assumed[pod.key][1])
            return
        if pod.scheduler_name not in self.served or pod.deleting:
            self.queue.delete(pod.key)
            return
        if pod.gated:
            self.queue.hold_gated(pod.key)
            return
        if old is None or self.queue.location(pod.key) is None:
            self.queue.add(pod)
        else:
            self.queue.update(pod, relevant=old.signature != pod.signature)

    def _pod_deleted(self, pod: SchedPod) -> None:
        previous = self.pods.pop(pod.key, None)
        was_assigned = previous is not None and (previous.node or pod.key in self.assumed)
        self._unaccount(pod.key, previous)
        self.assumed.pop(pod.key, None)
        self.affinity_pods.pop(pod.key, None)
        self.waiting_on_pods.discard(pod.key)
        self.queue.delete(pod.key)
        if was_assigned:
            self.queue.move_all()  # AssignedPodDelete: its room may fit a waiting pod

    def _unaccount(self, key: str, previous: SchedPod | None) -> None:
        if previous is not None and previous.node is not None:
            node = self.nodes.get(previous.node)
            if node is not None:
                node.remove(previous)
        assumed = self.assumed.get(key)
        if assumed is not None:
            node = self.nodes.get(assumed[1])
            if node is not None:
                node.remove(assumed[0])

    def pods_on(self, node: str) -> Sequence[SchedPod]:
        target = self.nodes.get(node)
        if target is None:
            return ()
        found = []
        for key in target.pod_keys:
            pod = self.pods.get(key)
            if pod is not None and pod.node == node:
                found.append(pod)
        return found
