"""The parts of kube-controller-manager's node lifecycle controller and taint eviction
controller that the embedded cluster needs.

- Node health: a node whose Lease (kube-node-lease/NAME) and Ready heartbeat have not moved for
  `node_monitor_grace_period` gets its kubelet-owned conditions set to Unknown
  (NodeStatusUnknown, "Kubelet stopped posting node status.").
- Condition taints: Ready=True clears `node.kubernetes.io/not-ready` and `.../unreachable`;
  Ready=False sets not-ready NoSchedule+NoExecute; Ready=Unknown sets unreachable
  NoSchedule+NoExecute (each with `timeAdded`). A node that has never reported keeps the
  not-ready NoSchedule taint the API server's admission gave it.
- NoExecute eviction: a pod on a node with a NoExecute taint it does not tolerate is evicted
  at once; tolerated with `tolerationSeconds: S`, S seconds after the taint's `timeAdded`;
  tolerated without `tolerationSeconds`, never. Whatever its phase: a finished pod is evicted
  too, as by the real taint eviction controller (the API server deletes it at once). Eviction
  adds the DisruptionTarget condition and deletes the pod gracefully; on a lost node the pod
  then stays terminating, in the phase its kubelet last reported, until its kubelet confirms
  the deletion (as on a real cluster: pod GC force-deletes such pods only on a node tainted
  `node.kubernetes.io/out-of-service`).

Health is sampled every `node_monitor_period` (as the real controller does); evictions are
timers, one per pod that has a deadline, rescheduled on pod and node events.

This module holds `NodeLifecycleController` itself (its informers, queues, start/stop); node
health is in `sim.nodelifecycle_health`, NoExecute eviction in `sim.nodelifecycle_eviction`,
the records both read in `sim.nodelifecycle_views`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from core.kube.client import LEASES, NODES, PODS, KubeClient
from core.kube.events import CORE_API, EventRecorder
from core.kube.informer import Informer
from core.kube.workqueue import WorkQueue
from sim.nodelifecycle_eviction import COMPONENT as COMPONENT
from sim.nodelifecycle_eviction import EVICTION_REASON as EVICTION_REASON
from sim.nodelifecycle_eviction import TaintEviction
from sim.nodelifecycle_eviction import eviction_time as eviction_time
from sim.nodelifecycle_health import KUBELET_CONDITIONS as KUBELET_CONDITIONS
from sim.nodelifecycle_health import MANAGED_TAINT_KEYS as MANAGED_TAINT_KEYS
from sim.nodelifecycle_health import NEVER_UPDATED_MESSAGE as NEVER_UPDATED_MESSAGE
from sim.nodelifecycle_health import NEVER_UPDATED_REASON as NEVER_UPDATED_REASON
from sim.nodelifecycle_health import NODE_CONTROLLER as NODE_CONTROLLER
from sim.nodelifecycle_health import UNKNOWN_MESSAGE as UNKNOWN_MESSAGE
from sim.nodelifecycle_health import UNKNOWN_REASON as UNKNOWN_REASON
from sim.nodelifecycle_health import NodeHealth
from sim.nodelifecycle_health import desired_taints as desired_taints
from sim.nodelifecycle_views import _LeaseView, _NodeView, _PodView

log = logging.getLogger("vulcan.sim.nodelifecycle")

LEASE_NAMESPACE = "kube-node-lease"


class NodeLifecycleController(NodeHealth, TaintEviction):
    def __init__(
        self,
        client: KubeClient,
        *,
        node_monitor_grace_period: float = 40.0,
        node_monitor_period: float = 5.0,
        workers: int = 4,
        record_events: bool = True,
    ) -> None:
        self.client = client
        self.node_monitor_grace_period = node_monitor_grace_period
        self.node_monitor_period = node_monitor_period
        self.workers = workers
        self._nodes: Informer[_NodeView] = Informer(client, NODES, _NodeView)
        self._leases: Informer[_LeaseView] = Informer(
            client, LEASES, _LeaseView, namespace=LEASE_NAMESPACE
        )
        self._pods: Informer[_PodView] = Informer(
            client, PODS, _PodView, field_selector="spec.nodeName!="
        )
        self._probe: dict[str, float] = {}  # node -> monotonic time of its last sign of life
        self._pods_on: dict[str, set[str]] = {}  # node -> keys of pods bound to it
        self._scheduled: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._evicted: set[str] = set()  # UIDs already evicted
        self._node_queue: WorkQueue[str] = WorkQueue("nodelifecycle", base_delay=0.05, max_delay=10)
        self._evict_queue: WorkQueue[str] = WorkQueue(
            "taint-eviction", base_delay=0.05, max_delay=10
        )
        self._recorder = (
            EventRecorder(client, COMPONENT, f"{COMPONENT}-{socket.gethostname()}", api=CORE_API)
            if record_events
            else None
        )
        self._node_recorder = (
            EventRecorder(
                client, NODE_CONTROLLER, f"{NODE_CONTROLLER}-{socket.gethostname()}", api=CORE_API
            )
            if record_events
            else None
        )
        self._tasks: list[asyncio.Task[Any]] = []

    # ------------------------------------------------------------------------ public

    async def start(self) -> None:
        """Start the informers and loops; returns once the informers are synced."""
        self._nodes.add_handlers(
            _guard(self._node_added), _guard(self._node_updated), _guard(self._node_deleted)
        )
        self._leases.add_handlers(
            _guard(self._lease_seen), _guard(lambda _old, new: self._lease_seen(new)), None
        )
        self._pods.add_handlers(
            _guard(self._pod_event),
            _guard(lambda _old, new: self._pod_event(new)),
            _guard(self._pod_gone),
        )
        for informer in (self._nodes, self._leases, self._pods):
            self._spawn(informer.run(), f"nodelifecycle-informer-{informer.resource.plural}")
        await asyncio.gather(
            self._nodes.wait_synced(), self._leases.wait_synced(), self._pods.wait_synced()
        )
        for recorder in (self._recorder, self._node_recorder):
            if recorder is not None:
                self._spawn(recorder.run(), f"nodelifecycle-events-{recorder.component}")
        self._spawn(
            self._node_queue.run_workers(self.workers, self._sync_node, max_retries=-1),
            "nodelifecycle-nodes",
        )
        self._spawn(
            self._evict_queue.run_workers(self.workers, self._evict, max_retries=-1),
            "nodelifecycle-evictions",
        )
        self._spawn(self._monitor(), "nodelifecycle-monitor")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for _, handle in self._scheduled.values():
            handle.cancel()
        self._scheduled.clear()
        await self._node_queue.shutdown()
        await self._evict_queue.shutdown()
        for recorder in (self._recorder, self._node_recorder):
            if recorder is not None:
                await recorder.close()

    # ------------------------------------------------------------------------ plumbing

    def _pod_event(self, pod: _PodView) -> None:
        self._pod_seen(pod)
        self._pod_health(pod)

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))


def _guard(handler: Callable[..., None]) -> Callable[..., None]:
    """Informer handlers must not raise (an exception would end the informer's task)."""

    def guarded(*args: Any) -> None:
        try:
            handler(*args)
        except Exception:
            log.exception("node lifecycle event handler failed")

    return guarded
