"""A hollow node's own life, apart from its pods: registering (or adopting) its Node,
posting its status (Ready/NotReady heartbeats), renewing its Lease, and going down and coming
back up when its `vulcan.sh/sim-node-state` annotation says so.

Separate from the pods' lifecycle (`sim.kubelet.pod_lifecycle`) because a node talks to the API
about itself on its own schedule (registration, status reports, lease renewals) whatever its
pods do; `HollowKubelets` (`sim.kubelet.hollow`) combines the two and owns the shared state.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from typing import TYPE_CHECKING, Any

from core.kube.client import LEASES, NODES, STRATEGIC_MERGE_PATCH, ApiError
from core.kube.events import micro_time
from core.timestamps import epoch_seconds
from sim.kubelet.keys import NODE_STATE_FAILED, SIM_NODE_STATE
from sim.kubelet.pods import node_ip
from sim.kubelet.profiles import NodeProfile
from sim.kubelet.status import (
    KUBELET_VERSION,
    LEASE_NAMESPACE,
    lease_object,
    node_labels,
    node_object,
    node_status,
)

if TYPE_CHECKING:
    from core.kube.client import KubeClient
    from core.kube.informer import Informer
    from core.kube.workqueue import WorkQueue
    from sim.kubelet.pods import PodRun

log = logging.getLogger("vulcan.sim.kubelet")


class NodeView:
    """The fields of a Node the hollow kubelets react to."""

    __slots__ = ("key", "ready", "rv", "state", "uid")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.uid: str = meta.get("uid", "")
        self.state: str | None = (meta.get("annotations") or {}).get(SIM_NODE_STATE)
        self.ready: str | None = None
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "Ready":
                self.ready = condition.get("status")


class _Node:
    """One hollow node and what its kubelet has done so far."""

    __slots__ = (
        "down",
        "failed",
        "gone",
        "index",
        "ip",
        "last_post",
        "name",
        "posted",
        "profile",
        "ready_since",
        "ready_status",
        "registered",
        "registered_at",
        "runs",
        "uid",
        "was_up",
    )

    def __init__(self, name: str, index: int, profile: NodeProfile) -> None:
        self.name = name
        self.index = index
        self.profile = profile
        self.ip = node_ip(index)
        self.uid = ""
        self.registered = False
        # `failed` is what the node should be (its annotation); `down` is whether its kubelet
        # is out of action right now. A node comes up (down=False) only after posting Ready.
        self.failed = False
        self.down = True
        self.gone = False  # the Node object was deleted: this kubelet has nothing left to do
        self.was_up = False
        self.posted: str | None = None  # the Ready status we last wrote ("True"/"False")
        self.ready_status: bool | None = None
        now = time.time()
        self.ready_since = now
        self.registered_at = now
        self.last_post = 0.0  # monotonic time of the last node status write
        self.runs: set[str] = set()  # keys of the pods bound here


class NodeAgent:
    """The node half of `HollowKubelets`: node events, registration, status posts and leases."""

    # Provided by HollowKubelets.
    client: KubeClient
    lease_interval: float
    lease_duration_seconds: int
    status_report_interval: float
    _nodes: dict[str, _Node]
    _runs: dict[str, PodRun]
    _node_queue: WorkQueue[str]
    _renewals: dict[str, asyncio.Task[None]]
    _fatal: Exception | None
    _node_informer: Informer[NodeView] | None

    if TYPE_CHECKING:
        # Provided by HollowKubelets and PodLifecycle (declared for the type checker only, so
        # that these never shadow the real methods).
        def _notify(self) -> None: ...

        def _freeze(self, run: PodRun) -> None: ...

        def _resume_pods(self, node: _Node, *, restored: bool) -> None: ...

    # ------------------------------------------------------------------------- nodes

    def _node_event(self, view: NodeView) -> None:
        node = self._nodes.get(view.key)
        if node is None or node.gone:
            return
        if view.uid:
            node.uid = view.uid
        failed = view.state == NODE_STATE_FAILED
        if failed != node.failed:
            self._set_failed(node, failed)
        elif node.registered and not node.down and view.ready not in (None, "True"):
            # Someone (the node lifecycle controller) says we are not Ready while we are up:
            # post our status again, as a kubelet's next status update would.
            self._node_queue.add(node.name)

    def _node_deleted(self, view: NodeView) -> None:
        node = self._nodes.get(view.key)
        if node is None or not node.registered:
            return
        # A real kubelet does not re-register a deleted Node until it restarts; this one
        # simply stops (its lease goes with the Node, by owner reference).
        log.info("node deleted; its hollow kubelet stops", extra={"node": node.name})
        node.gone = True
        self._take_down(node)
        self._notify()

    def _set_failed(self, node: _Node, failed: bool) -> None:
        node.failed = failed
        if failed:
            self._take_down(node)
        log.info("node %s", "failed" if failed else "restoring", extra={"node": node.name})
        self._node_queue.add(node.name)
        self._notify()

    def _take_down(self, node: _Node) -> None:
        if not node.down:
            node.down = True
            for key in node.runs:
                self._freeze(self._runs[key])
        renewal = self._renewals.pop(node.name, None)
        if renewal is not None:
            renewal.cancel()

    async def _sync_node(self, name: str) -> None:
        node = self._nodes[name]
        if node.gone:
            return
        try:
            if not node.registered:
                await self._register(node)
            if node.failed:
                if node.posted != "False":
                    await self._post_status(node, ready=False)
                    node.posted = "False"
                    self._notify()
                return
            assert self._node_informer is not None
            view = self._node_informer.items.get(name)
            api_ready = view.ready if view is not None else None
            report_due = time.monotonic() - node.last_post >= self.status_report_interval
            if node.posted != "True" or report_due or api_ready not in (None, "True"):
                await self._post_status(node, ready=True)
                if node.failed:
                    return  # failed meanwhile; the queue holds the node again
                node.posted = "True"
        except ApiError as exc:
            if exc.not_found and node.registered:
                return  # deleted; the informer's delete event retires the node
            if not exc.retryable and not node.registered:
                self._fatal = exc
                log.error("cannot register node", extra={"node": name, "error": str(exc)})
                self._notify()
                return
            raise
        if node.down:
            # Back up in a kubelet's order: Ready posted, lease renewed, then the pods.
            await self._renew(node)
            if node.failed or node.gone:
                return  # failed again meanwhile; the queue holds the node again
            node.down = False
            restored = node.was_up
            node.was_up = True
            self._resume_pods(node, restored=restored)
            self._notify()

    async def _kubelet_version(self) -> str:
        """The API server's gitVersion (GET /version, read once): what the hollow kubelets
        report as their version; the built-in one when /version cannot be read."""
        known: str | None = getattr(self, "_server_version", None)
        if known is None:
            try:
                info = await self.client.request("GET", "/version")
            except ApiError as exc:
                log.warning("cannot read the API server's version", extra={"error": str(exc)})
                return KUBELET_VERSION
            known = str((info or {}).get("gitVersion") or KUBELET_VERSION)
            self._server_version = known
        return known

    async def _register(self, node: _Node) -> None:
        now = time.time()
        version = await self._kubelet_version()
        try:
            created = await self.client.create(
                NODES, node_object(node.name, node.ip, node.profile, now, version)
            )
        except ApiError as exc:
            if not exc.conflict:
                raise
            # The Node exists (a restarted sim): adopt it, refresh our labels, and post our
            # whole status on the next step.
            existing = await self.client.get(NODES, node.name)
            meta = existing["metadata"]
            node.uid = meta.get("uid", "")
            node.registered_at = epoch_seconds(meta.get("creationTimestamp")) or now
            labels = node_labels(node.name, node.profile)
            current = meta.get("labels") or {}
            if any(current.get(k) != v for k, v in labels.items()):
                await self.client.patch(NODES, node.name, {"metadata": {"labels": labels}})
            node.posted = None
        else:
            node.uid = created["metadata"].get("uid", "")
            node.posted = "True"
            node.ready_status = True
            node.ready_since = node.registered_at = now
            node.last_post = time.monotonic()
        node.registered = True
        log.debug("node registered", extra={"node": node.name})

    async def _post_status(self, node: _Node, *, ready: bool) -> None:
        now = time.time()
        if node.ready_status != ready:
            node.ready_status = ready
            node.ready_since = now
        status = node_status(
            node.name,
            node.ip,
            node.profile,
            ready=ready,
            heartbeat=now,
            ready_since=node.ready_since,
            registered_at=node.registered_at,
            kubelet_version=await self._kubelet_version(),
        )
        await self.client.patch(
            NODES,
            node.name,
            {"status": status},
            subresource="status",
            content_type=STRATEGIC_MERGE_PATCH,
        )
        node.last_post = time.monotonic()

    # ------------------------------------------------------------------------ leases

    async def _lease_loop(self) -> None:
        """Renew every node's lease each `lease_interval`, the nodes spread evenly over the
        interval so that a thousand nodes do not renew in one burst."""
        loop = asyncio.get_running_loop()
        names = list(self._nodes)
        if not names:
            return
        start = loop.time()
        heap = [(start + self.lease_interval * (i + 1) / len(names), i) for i in range(len(names))]
        heapq.heapify(heap)
        while True:
            due, i = heap[0]
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            now = loop.time()
            # Running behind by more than an interval (a stalled loop): start afresh rather
            # than renewing everything that was missed in one burst.
            next_due = due + self.lease_interval
            if next_due < now:
                next_due = now + self.lease_interval * (i + 1) / len(names)
            heapq.heapreplace(heap, (next_due, i))
            node = self._nodes[names[i]]
            if node.down or node.gone:
                continue
            self._renew_soon(node)
            if time.monotonic() - node.last_post >= self.status_report_interval:
                self._node_queue.add(node.name)

    def _renew_soon(self, node: _Node) -> None:
        if node.name in self._renewals:
            return  # the previous renewal is still in flight
        task = asyncio.create_task(self._renew(node), name=f"hollow-lease-{node.name}")
        self._renewals[node.name] = task
        task.add_done_callback(lambda _t: self._renewals.pop(node.name, None))

    async def _renew(self, node: _Node) -> None:
        now = time.time()
        spec = {
            "holderIdentity": node.name,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "renewTime": micro_time(now),
        }
        try:
            try:
                await self.client.patch(LEASES, node.name, {"spec": spec}, LEASE_NAMESPACE)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                lease = lease_object(node.name, node.uid, self.lease_duration_seconds, now)
                try:
                    await self.client.create(LEASES, lease)
                except ApiError as create_error:
                    if not create_error.conflict:
                        raise
        except ApiError as exc:
            # The next renewal tries again; the lease lasts several intervals.
            log.debug("lease renewal failed", extra={"node": node.name, "error": str(exc)})
