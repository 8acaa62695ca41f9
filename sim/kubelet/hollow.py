"""Hollow kubelets: many simulated nodes in one process, reporting to the API server the way
real kubelets do, so that schedulers and controllers see a plausible cluster.

One `HollowKubelets` runs every node of a set of profiles with one node informer, one pod
informer (bound pods only) and one PodGroup informer, two work queues and one lease loop, so a
thousand nodes and ten thousand pods fit one event loop. Everything a pod does is driven by
events and timers (`loop.call_later`), never by a polling loop per pod:

- a pod bound to one of our nodes is acknowledged (Pending/ContainerCreating for `start_delay`),
  then Running; it runs for its `vulcan.sh/sim-duration` and exits with its
  `vulcan.sh/sim-exit-code`, then ends or restarts per its restartPolicy (CrashLoopBackOff in
  between);
- a gang member's run time advances only while its gang is complete (`sim.kubelet.gang`);
- a deleted pod keeps running for its `vulcan.sh/sim-termination-duration` (how long its
  containers take to stop after SIGTERM; at most the deletion's grace period, when they are
  killed; default 0), then is moved to a terminal phase and its deletion confirmed (grace 0,
  UID precondition), as a kubelet does;
- a node annotated `vulcan.sh/sim-node-state=failed` goes NotReady once and then goes quiet (no
  lease renewals, no pod updates) until the annotation is removed.

State changes bump a per-pod version and queue the pod; a worker writes the status of the newest
version (a strategic merge patch of pods/NAME/status, as the kubelet's status manager sends), so
bursts of changes coalesce into one write.

The client's QPS limit bounds all of this: a thousand nodes renewing their leases every 10 s
need 100 requests/s on their own, so give the kubelets a client with `qps=0` (unlimited) or a
limit sized for the cluster.

This module holds `HollowKubelets` itself (its state, informers, start/stop and the test
helpers); a node's registration, status and lease are in `sim.kubelet.node_agent`, its pods'
lifecycle in `sim.kubelet.pod_lifecycle`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from core.kube.client import NAMESPACES, NODES, PODGROUPS, PODS, ApiError, KubeClient
from core.kube.informer import Informer
from core.kube.workqueue import WorkQueue
from sim.kubelet.gang import GangTracker
from sim.kubelet.keys import NODE_STATE_FAILED, SIM_NODE_STATE
from sim.kubelet.node_agent import NodeAgent, NodeView, _Node
from sim.kubelet.numa_exporter import NumaExporter, NumaShape
from sim.kubelet.pod_lifecycle import KILLED_EXIT_CODE as KILLED_EXIT_CODE
from sim.kubelet.pod_lifecycle import PodLifecycle
from sim.kubelet.pods import IpPool, PodGroupView, PodRun, PodView
from sim.kubelet.profiles import NodeProfile
from sim.kubelet.status import LEASE_NAMESPACE

log = logging.getLogger("vulcan.sim.kubelet")


def _guard(handler: Callable[..., None]) -> Callable[..., None]:
    """Informer handlers must not raise (an exception would end the informer's task)."""

    def guarded(*args: Any) -> None:
        try:
            handler(*args)
        except Exception:
            log.exception("hollow kubelet event handler failed")

    return guarded


class HollowKubelets(NodeAgent, PodLifecycle):
    """The kubelets of every node of `profiles` (each profile with its count decided; see
    `sim.kubelet.profiles.expand_profiles`). Not restartable: after `stop()` make a new one,
    which adopts the nodes and pods this one left behind."""

    def __init__(
        self,
        client: KubeClient,
        profiles: Sequence[NodeProfile],
        *,
        name_prefix: str = "hollow-node-",
        lease_interval: float = 10.0,
        lease_duration_seconds: int = 40,
        status_report_interval: float = 300.0,
        default_duration: float | None = 10.0,
        default_exit_code: int = 0,
        start_delay: float = 0.0,
        restart_backoff: tuple[float, float] = (10.0, 300.0),
        workers: int = 16,
        node_workers: int = 16,
    ) -> None:
        self.client = client
        self.lease_interval = lease_interval
        self.lease_duration_seconds = lease_duration_seconds
        self.status_report_interval = status_report_interval
        self.default_duration = default_duration
        self.default_exit_code = default_exit_code
        self.start_delay = start_delay
        self.restart_backoff = restart_backoff
        self.workers = workers
        self.node_workers = node_workers
        self._nodes: dict[str, _Node] = {}
        index = 0
        for profile in profiles:
            if profile.count is None:
                raise ValueError("every node profile needs its count (see expand_profiles)")
            for _ in range(profile.count):
                name = f"{name_prefix}{index}"
                self._nodes[name] = _Node(name, index, profile)
                index += 1
        self._runs: dict[str, PodRun] = {}
        self._group_runs: dict[str, set[str]] = {}  # group -> keys of our pods in it
        self._gang = GangTracker(self._gang_flipped)
        self._ips = IpPool()
        self._pod_queue: WorkQueue[str] = WorkQueue("hollow-pods", base_delay=0.05, max_delay=30)
        self._node_queue: WorkQueue[str] = WorkQueue("hollow-nodes", base_delay=0.05, max_delay=30)
        self._tasks: list[asyncio.Task[Any]] = []
        self._renewals: dict[str, asyncio.Task[None]] = {}
        self._changed = asyncio.Event()
        self._fatal: Exception | None = None
        self._node_informer: Informer[NodeView] | None = None
        self._pod_informer: Informer[PodView] | None = None
        self._podgroup_informer: Informer[PodGroupView] | None = None
        self._numa: NumaExporter | None = None

    # ------------------------------------------------------------------------ public

    @property
    def node_names(self) -> list[str]:
        return list(self._nodes)

    async def start(self) -> None:
        """Register the nodes (or adopt existing Nodes of the same names), start the informers
        and loops; returns once the informers are synced and every node has posted its status
        (Ready, or NotReady for a node annotated failed)."""
        await self._ensure_lease_namespace()
        self._node_informer = Informer(self.client, NODES, NodeView)
        self._node_informer.add_handlers(
            _guard(lambda view: self._node_event(view)),
            _guard(lambda _old, view: self._node_event(view)),
            _guard(self._node_deleted),
        )
        self._pod_informer = Informer(self.client, PODS, PodView, field_selector="spec.nodeName!=")
        self._pod_informer.add_handlers(
            _guard(lambda view: self._pod_event(view)),
            _guard(lambda _old, view: self._pod_event(view)),
            _guard(self._pod_deleted),
        )
        informers: list[Informer[Any]] = [self._node_informer, self._pod_informer]
        if await self._serves_podgroups():
            self._podgroup_informer = Informer(self.client, PODGROUPS, PodGroupView)
            self._podgroup_informer.add_handlers(
                _guard(lambda pg: self._gang.podgroup_changed(pg.key, pg.min_member)),
                _guard(lambda _old, pg: self._gang.podgroup_changed(pg.key, pg.min_member)),
                _guard(lambda pg: self._gang.podgroup_changed(pg.key, None)),
            )
            informers.append(self._podgroup_informer)
        for informer in informers:
            self._spawn(informer.run(), f"hollow-informer-{informer.resource.plural}")
        await asyncio.gather(*(informer.wait_synced() for informer in informers))
        self._spawn(
            self._pod_queue.run_workers(self.workers, self._sync_pod, max_retries=-1),
            "hollow-pod-workers",
        )
        self._spawn(
            self._node_queue.run_workers(self.node_workers, self._sync_node, max_retries=-1),
            "hollow-node-workers",
        )
        for name in self._nodes:
            self._node_queue.add(name)
        self._spawn(self._lease_loop(), "hollow-leases")
        await self._wait_for(lambda: all(self._settled(node) for node in self._nodes.values()))
        shapes = {
            node.name: NumaShape(*node.profile.numa, node.profile.topology_policy)
            for node in self._nodes.values()
            if node.profile.numa is not None
        }
        if shapes:  # the nodes' resource-exporter (their Numatopologies)
            self._numa = NumaExporter(self.client, shapes)
            await self._numa.start()
        log.info("hollow kubelets up", extra={"nodes": len(self._nodes)})

    async def stop(self) -> None:
        """Stop every loop, informer and timer. The Nodes stay; their leases stop."""
        if self._numa is not None:
            await self._numa.stop()
        tasks = self._tasks + list(self._renewals.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._renewals.clear()
        await self._pod_queue.shutdown()
        await self._node_queue.shutdown()
        for run in self._runs.values():
            run.cancel_timer()

    async def fail_node(self, name: str) -> None:
        """Annotate the node failed (as `kubectl annotate node NAME vulcan.sh/sim-node-state=
        failed` does) and return once its kubelet has posted NotReady and gone quiet."""
        node = self._node(name)
        await self.client.patch(
            NODES, name, {"metadata": {"annotations": {SIM_NODE_STATE: NODE_STATE_FAILED}}}
        )
        await self._wait_for(lambda: node.gone or (node.failed and node.posted == "False"))

    async def restore_node(self, name: str) -> None:
        """Remove the failed annotation and return once the node's kubelet is back (Ready
        posted, lease renewed, pods being reconciled)."""
        node = self._node(name)
        await self.client.patch(NODES, name, {"metadata": {"annotations": {SIM_NODE_STATE: None}}})
        await self._wait_for(lambda: node.gone or (not node.failed and not node.down))

    # ------------------------------------------------------------------------ plumbing

    def _node(self, name: str) -> _Node:
        node = self._nodes.get(name)
        if node is None:
            raise ValueError(f"{name} is not a node of these hollow kubelets")
        return node

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_for(self, predicate: Callable[[], bool]) -> None:
        while True:
            if self._fatal is not None:
                raise RuntimeError(f"hollow kubelets failed: {self._fatal}") from self._fatal
            if predicate():
                return
            await self._changed.wait()

    @staticmethod
    def _settled(node: _Node) -> bool:
        if node.gone:
            return True
        if node.failed:
            return node.posted == "False"
        return not node.down

    async def _ensure_lease_namespace(self) -> None:
        try:
            await self.client.create(NAMESPACES, {"metadata": {"name": LEASE_NAMESPACE}})
        except ApiError as exc:
            if not exc.conflict:
                raise

    async def _serves_podgroups(self) -> bool:
        """Without Volcano's CRDs there are no PodGroups, hence no gang rule."""
        try:
            await self.client.list(PODGROUPS, limit=1)
        except ApiError as exc:
            if exc.not_found:
                log.info("no podgroups resource served; gang progress rule disabled")
                return False
            raise
        return True
