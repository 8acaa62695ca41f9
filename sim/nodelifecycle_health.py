"""Node health, the node lifecycle controller's first half: a node whose Lease and Ready
heartbeat stop moving goes Unknown after the grace period, every node carries the condition
taints (`node.kubernetes.io/not-ready`, `.../unreachable`) that match its Ready status, and the
pods on a node whose Ready is False or Unknown are marked not Ready (MarkPodsNotReady).

Separate from NoExecute eviction (`sim.nodelifecycle_eviction`), which acts on the taints this
half sets; `NodeLifecycleController` (`sim.nodelifecycle`) combines the two and owns the
informers, queues and loops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.kube.client import MERGE_PATCH, NODES, PODS, STRATEGIC_MERGE_PATCH, ApiError
from core.kube.events import WARNING
from sim.nodelifecycle_views import _LeaseView, _NodeView, _PodView, _rfc3339
from sim.taints import NO_EXECUTE, NO_SCHEDULE, TAINT_NOT_READY, TAINT_UNREACHABLE

if TYPE_CHECKING:
    from core.kube.client import KubeClient
    from core.kube.events import EventRecorder
    from core.kube.informer import Informer
    from core.kube.workqueue import WorkQueue

log = logging.getLogger("vulcan.sim.nodelifecycle")

MANAGED_TAINT_KEYS = (TAINT_NOT_READY, TAINT_UNREACHABLE)
# The conditions a kubelet owns, which go Unknown when it stops reporting.
KUBELET_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NEVER_UPDATED_REASON = "NodeStatusNeverUpdated"
NEVER_UPDATED_MESSAGE = "Kubelet never posted node status."
NODE_CONTROLLER = "node-controller"  # the node lifecycle controller's events' component
NOT_READY_STATES = ("False", "Unknown")


def desired_taints(
    taints: Sequence[Mapping[str, Any]], ready: str | None, now: float
) -> list[dict[str, Any]]:
    """The node's taints with the condition taints matching its Ready status; other taints and
    the timeAdded of taints already present are kept."""
    if ready == "True":
        wanted: list[tuple[str, str]] = []
    elif ready == "False":
        wanted = [(TAINT_NOT_READY, NO_SCHEDULE), (TAINT_NOT_READY, NO_EXECUTE)]
    elif ready == "Unknown":
        wanted = [(TAINT_UNREACHABLE, NO_SCHEDULE), (TAINT_UNREACHABLE, NO_EXECUTE)]
    else:
        return [dict(t) for t in taints]  # never reported: admission's not-ready taint stays
    result: list[dict[str, Any]] = []
    present: set[tuple[str, str]] = set()
    for taint in taints:
        identity = (taint.get("key") or "", taint.get("effect") or "")
        if identity[0] in MANAGED_TAINT_KEYS and identity not in wanted:
            continue
        if identity in present:
            continue  # a duplicate: the API would refuse it
        present.add(identity)
        result.append(dict(taint))
    for key, effect in wanted:
        if (key, effect) not in present:
            result.append({"key": key, "effect": effect, "timeAdded": _rfc3339(now)})
    return result


class NodeHealth:
    """The health half of `NodeLifecycleController`: node and lease events, the monitor, and
    the node sync (Unknown status, condition taints)."""

    # Provided by NodeLifecycleController.
    client: KubeClient
    node_monitor_grace_period: float
    node_monitor_period: float
    _nodes: Informer[_NodeView]
    _pods: Informer[_PodView]
    _probe: dict[str, float]
    _pods_on: dict[str, set[str]]
    _node_queue: WorkQueue[str]
    _node_recorder: EventRecorder | None

    if TYPE_CHECKING:
        # Provided by TaintEviction (declared for the type checker only, so that these never
        # shadow the real methods).
        def _reschedule(self, pod: _PodView) -> None: ...

        def _cancel(self, key: str) -> None: ...

    # -------------------------------------------------------------------------- health

    def _node_added(self, view: _NodeView) -> None:
        # A node first seen gets the full grace period (the real controller's observation
        # time, not the kubelet's clock, decides).
        self._probe.setdefault(view.key, time.monotonic())
        self._node_changed(view, None)

    def _node_updated(self, old: _NodeView, new: _NodeView) -> None:
        if new.heartbeat != old.heartbeat:
            self._probe[new.key] = time.monotonic()
        self._node_changed(new, old)

    def _node_changed(self, view: _NodeView, old: _NodeView | None) -> None:
        self._node_queue.add(view.key)
        if old is None or _no_execute_identity(old) != _no_execute_identity(view):
            for key in self._pods_on.get(view.key, ()):
                pod = self._pods.items.get(key)
                if pod is not None:
                    self._reschedule(pod)

    def _node_deleted(self, view: _NodeView) -> None:
        self._probe.pop(view.key, None)
        for key in self._pods_on.get(view.key, ()):
            self._cancel(key)

    def _pod_health(self, pod: _PodView) -> None:
        """A pod Ready on a node that is not is marked by its node's sync (the real
        controller's pod handler does the same)."""
        node = self._nodes.items.get(pod.node)
        if pod.ready == "True" and node is not None and node.ready in NOT_READY_STATES:
            self._node_queue.add(node.key)

    def _lease_seen(self, lease: _LeaseView) -> None:
        self._probe[lease.name] = time.monotonic()

    async def _monitor(self) -> None:
        while True:
            await asyncio.sleep(self.node_monitor_period)
            now = time.monotonic()
            for name, view in self._nodes.items.items():
                probe = self._probe.setdefault(name, now)
                if now - probe > self.node_monitor_grace_period and view.ready != "Unknown":
                    self._node_queue.add(name)

    async def _sync_node(self, name: str) -> None:
        view = self._nodes.items.get(name)
        if view is None:
            return
        now = time.monotonic()
        stale = now - self._probe.setdefault(name, now) > self.node_monitor_grace_period
        try:
            if stale and view.ready != "Unknown":
                await self._mark_unknown(view)
                return  # the informer's update brings the node back here for its taints
            taints = desired_taints(view.taints, view.ready, time.time())
            if taints != view.taints:
                # The resourceVersion makes a concurrent taint edit a conflict, retried with
                # the newer node instead of overwritten.
                await self.client.patch(
                    NODES,
                    name,
                    {"metadata": {"resourceVersion": view.rv}, "spec": {"taints": taints}},
                    content_type=MERGE_PATCH,
                )
                log.debug("node taints updated", extra={"node": name, "ready": view.ready})
            if view.ready in NOT_READY_STATES:
                await self._mark_pods_not_ready(view)
        except ApiError as exc:
            if exc.not_found:
                return
            raise  # conflicts included: retried with the informer's newer view

    async def _mark_unknown(self, view: _NodeView) -> None:
        stamp = _rfc3339(time.time())
        current = {c.get("type"): c for c in view.conditions}
        never = view.ready is None
        conditions = []
        for type_ in KUBELET_CONDITIONS:
            old = current.get(type_)
            if old is None and type_ != "Ready":
                continue
            conditions.append(
                {
                    "type": type_,
                    "status": "Unknown",
                    "reason": NEVER_UPDATED_REASON if never else UNKNOWN_REASON,
                    "message": NEVER_UPDATED_MESSAGE if never else UNKNOWN_MESSAGE,
                    "lastHeartbeatTime": (old or {}).get("lastHeartbeatTime") or stamp,
                    "lastTransitionTime": stamp
                    if (old or {}).get("status") != "Unknown"
                    else old.get("lastTransitionTime") or stamp,
                }
            )
        await self.client.patch(
            NODES,
            view.key,
            {"metadata": {"resourceVersion": view.rv}, "status": {"conditions": conditions}},
            subresource="status",
            content_type=STRATEGIC_MERGE_PATCH,
        )
        log.info("node stopped reporting; status Unknown", extra={"node": view.key})

    async def _mark_pods_not_ready(self, view: _NodeView) -> None:
        """kube-controller-manager's MarkPodsNotReady: each pod on the node whose Ready
        condition is True gets it False (a status write conditional on the version seen; a
        conflict is retried with the informer's newer pod), then a NodeNotReady Warning."""
        stamp = _rfc3339(time.time())
        for key in sorted(self._pods_on.get(view.key, ())):
            pod = self._pods.items.get(key)
            if pod is None or pod.ready != "True":
                continue
            ready = {"type": "Ready", "status": "False", "lastTransitionTime": stamp}
            try:
                await self.client.patch(
                    PODS,
                    pod.name,
                    {
                        "metadata": {"uid": pod.uid, "resourceVersion": pod.rv},
                        "status": {"conditions": [ready]},
                    },
                    pod.namespace,
                    subresource="status",
                    content_type=STRATEGIC_MERGE_PATCH,
                )
            except ApiError as exc:
                if exc.not_found:
                    continue
                raise
            if self._node_recorder is not None:
                self._node_recorder.record(
                    PODS.reference(pod.name, pod.namespace, pod.uid),
                    WARNING,
                    "NodeNotReady",
                    "Node is not ready",
                )


def _no_execute_identity(view: _NodeView) -> tuple[tuple[Any, ...], ...]:
    return tuple((t.get("key"), t.get("value"), t.get("timeAdded")) for t in view.no_execute())
