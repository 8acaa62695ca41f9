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
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from core.kube.client import (
    LEASES,
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    KubeClient,
)
from core.kube.events import micro_time
from core.kube.informer import Informer
from core.kube.workqueue import WorkQueue
from sim.kubelet.gang import GangTracker
from sim.kubelet.keys import NODE_STATE_FAILED, SIM_NODE_STATE
from sim.kubelet.pods import (
    BACKOFF,
    CREATING,
    FAILED,
    RUNNING,
    STARTED,
    SUCCEEDED,
    TERMINATED,
    IpPool,
    PodGroupView,
    PodRun,
    PodView,
    node_ip,
    parse_time,
    termination_delay,
)
from sim.kubelet.profiles import NodeProfile
from sim.kubelet.status import (
    CONTAINER_ID_SCHEME,
    LEASE_NAMESPACE,
    lease_object,
    never_started_state,
    node_labels,
    node_object,
    node_status,
    pod_status,
    terminated_state,
)

log = logging.getLogger("vulcan.sim.kubelet")

KILLED_EXIT_CODE = 137  # 128 + SIGKILL


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


def _guard(handler: Callable[..., None]) -> Callable[..., None]:
    """Informer handlers must not raise (an exception would end the informer's task)."""

    def guarded(*args: Any) -> None:
        try:
            handler(*args)
        except Exception:
            log.exception("hollow kubelet event handler failed")

    return guarded


class HollowKubelets:
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
        log.info("hollow kubelets up", extra={"nodes": len(self._nodes)})

    async def stop(self) -> None:
        """Stop every loop, informer and timer. The Nodes stay; their leases stop."""
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

    async def _register(self, node: _Node) -> None:
        now = time.time()
        try:
            created = await self.client.create(
                NODES, node_object(node.name, node.ip, node.profile, now)
            )
        except ApiError as exc:
            if not exc.conflict:
                raise
            # The Node exists (a restarted sim): adopt it, refresh our labels, and post our
            # whole status on the next step.
            existing = await self.client.get(NODES, node.name)
            meta = existing["metadata"]
            node.uid = meta.get("uid", "")
            node.registered_at = parse_time(meta.get("creationTimestamp")) or now
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

    # -------------------------------------------------------------------------- pods

    def _pod_event(self, view: PodView) -> None:
        self._gang.set_pod(view.key, view.group if view.gang_present else None)
        run = self._runs.get(view.key)
        if run is not None and run.uid != view.uid:
            self._forget(run)  # replaced by a new pod of the same name
            run = None
        node = self._nodes.get(view.node)
        if node is None or node.gone:
            return  # bound elsewhere
        if run is None:
            if view.terminal and not view.deleting:
                return  # finished before this kubelet knew it: nothing left to run
            self._adopt(view, node)
            return
        if view.deleting and not run.deleting:
            run.deleting = True
            self._freeze(run)
            delay = termination_delay(view) if run.state == STARTED else 0.0
            if delay > 0:
                # SIGTERM sent: the pod runs on, holding its room, until its containers stop
                # (or are killed when the grace period ends), as a kubelet terminates a pod.
                run.stop_timer = asyncio.get_running_loop().call_later(
                    delay, self._containers_stopped, run
                )
            else:
                self._pod_queue.add(run.key)
        if view.terminal and run.state != TERMINATED:
            # Someone else ended the pod (the node lifecycle controller, for a lost node).
            self._freeze(run)
            run.state = TERMINATED
            run.phase = view.phase
            run.written = run.version

    def _pod_deleted(self, view: PodView) -> None:
        self._gang.set_pod(view.key, None)
        run = self._runs.get(view.key)
        if run is not None and run.uid == view.uid:
            self._forget(run)

    def _adopt(self, view: PodView, node: _Node) -> None:
        """Start tracking a pod bound to one of our nodes: a new one, or one an earlier hollow
        kubelet was running (a restarted sim carries on where the API says it was)."""
        now = time.time()
        run = PodRun(view, self.default_duration, self.default_exit_code, now)
        self._runs[run.key] = run
        node.runs.add(run.key)
        if run.group is not None:
            self._group_runs.setdefault(run.group, set()).add(run.key)
        if view.terminal:
            run.state = TERMINATED
            run.phase = view.phase
        elif view.phase == RUNNING:
            run.restart_count = view.restart_count
            run.start_time = parse_time(view.start_time) or now
            run.container_id = view.container_id or ""
            if view.pod_ip and self._ips.claim(view.pod_ip):
                run.pod_ip = view.pod_ip
            started = parse_time(view.running_since)
            if started is not None:
                run.state = STARTED
                run.started_at = started
                if run.duration is not None:
                    run.remaining = max(0.0, run.duration - (now - started))
            else:
                run.state = BACKOFF  # it was between restarts
                run.backoff = self.restart_backoff[0]
            if run.pod_ip is None:
                run.pod_ip = run.fixed_ip or self._ips.allocate()
                run.changed()
        log.debug("pod acknowledged", extra={"pod": run.key, "node": node.name})
        if not node.down:
            self._activate(run)

    def _activate(self, run: PodRun) -> None:
        """Set the run's timers going for its state (its node is up)."""
        if run.deleting:
            self._pod_queue.add(run.key)
            return
        if run.state == CREATING:
            if self.start_delay > 0:
                run.changed()  # report ContainerCreating meanwhile
                run.timer = asyncio.get_running_loop().call_later(
                    self.start_delay, self._start_containers, run
                )
            else:
                self._start_containers(run)
        elif run.state == STARTED:
            self._update_clock(run)
        elif run.state == BACKOFF:
            run.timer = asyncio.get_running_loop().call_later(
                run.backoff or 0.0, self._start_containers, run
            )
        if run.version != run.written:
            self._pod_queue.add(run.key)

    def _resume_pods(self, node: _Node, *, restored: bool) -> None:
        """The node came up: run its pods. After a failure, containers that were running died
        with the node: they exit as killed and restart or fail per restartPolicy."""
        for key in list(node.runs):
            run = self._runs[key]
            if restored and run.state == STARTED and not run.deleting:
                self._containers_exited(run, KILLED_EXIT_CODE)
            else:
                self._activate(run)

    def _start_containers(self, run: PodRun) -> None:
        run.timer = None
        if self._runs.get(run.key) is not run or run.deleting or self._nodes[run.node].down:
            return
        if run.state == BACKOFF:
            run.restart_count += 1
        run.state = STARTED
        run.started_at = time.time()
        run.container_id = CONTAINER_ID_SCHEME + secrets.token_hex(32)
        run.remaining = run.duration
        run.clock_since = None
        if run.pod_ip is None:
            run.pod_ip = run.fixed_ip or self._ips.allocate()
        run.changed()
        self._pod_queue.add(run.key)
        self._update_clock(run)

    def _update_clock(self, run: PodRun) -> None:
        """Start or pause the run-time clock: it ticks while the containers run, the node is
        up and the pod's gang (if any) is complete."""
        if run.remaining is None:
            return  # runs until deleted: nothing to time
        ticking = (
            run.state == STARTED
            and not run.deleting
            and not self._nodes[run.node].down
            and self._gang.satisfied(run.group)
        )
        loop = asyncio.get_running_loop()
        if ticking and run.clock_since is None:
            run.clock_since = loop.time()
            run.timer = loop.call_later(run.remaining, self._containers_exited, run)
        elif not ticking and run.clock_since is not None:
            run.remaining = max(0.0, run.remaining - (loop.time() - run.clock_since))
            run.clock_since = None
            run.cancel_timer()

    def _freeze(self, run: PodRun) -> None:
        """Stop every timer of the run, keeping the run time left."""
        if run.clock_since is not None and run.remaining is not None:
            elapsed = asyncio.get_running_loop().time() - run.clock_since
            run.remaining = max(0.0, run.remaining - elapsed)
        run.clock_since = None
        run.cancel_timer()

    def _gang_flipped(self, group: str) -> None:
        for key in self._group_runs.get(group, ()):
            run = self._runs.get(key)
            if run is not None:
                self._update_clock(run)

    def _containers_exited(self, run: PodRun, exit_code: int | None = None) -> None:
        """The containers exited: the pod ends, or restarts after a backoff, per its
        restartPolicy (Never: ends; OnFailure: restarts on non-zero; Always: restarts)."""
        run.cancel_timer()
        run.clock_since = None
        if run.remaining is not None:
            run.remaining = 0.0
        code = run.exit_code if exit_code is None else exit_code
        now = time.time()
        terminated = terminated_state(run, code, now)
        policy = run.restart_policy
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            initial, maximum = self.restart_backoff
            ran = now - run.started_at
            # The kubelet's backoff doubles per crash and forgets a container that ran
            # for twice the maximum.
            if run.backoff is None or ran >= 2 * maximum:
                run.backoff = initial
            else:
                run.backoff = min(maximum, run.backoff * 2)
            run.last_terminated = terminated
            run.state = BACKOFF
            run.timer = asyncio.get_running_loop().call_later(
                run.backoff, self._start_containers, run
            )
            log.debug("containers exited; restarting", extra={"pod": run.key, "code": code})
        else:
            run.state = TERMINATED
            run.terminated = terminated
            run.phase = SUCCEEDED if code == 0 else FAILED
            log.debug("pod finished", extra={"pod": run.key, "phase": run.phase})
        run.changed()
        self._pod_queue.add(run.key)

    def _kill(self, run: PodRun) -> None:
        """A deleted pod's containers are killed and the pod ends Failed (a kubelet moves a
        deleted pod to a terminal phase before confirming the deletion)."""
        self._freeze(run)
        if run.state == STARTED:
            run.terminated = terminated_state(run, KILLED_EXIT_CODE, time.time())
        elif run.state == BACKOFF and run.last_terminated is not None:
            run.terminated = run.last_terminated
        else:
            run.terminated = never_started_state()
        run.state = TERMINATED
        run.phase = FAILED
        run.changed()

    def _containers_stopped(self, run: PodRun) -> None:
        run.stop_timer = None
        if self._runs.get(run.key) is run:
            self._pod_queue.add(run.key)

    def _forget(self, run: PodRun) -> None:
        self._freeze(run)
        if run.stop_timer is not None:
            run.stop_timer.cancel()
            run.stop_timer = None
        if self._runs.get(run.key) is run:
            del self._runs[run.key]
            node = self._nodes.get(run.node)
            if node is not None:
                node.runs.discard(run.key)
            if run.group is not None:
                members = self._group_runs.get(run.group)
                if members is not None:
                    members.discard(run.key)
                    if not members:
                        del self._group_runs[run.group]
        self._ips.release(run.pod_ip)
        run.pod_ip = None

    async def _sync_pod(self, key: str) -> None:
        run = self._runs.get(key)
        if run is None:
            return
        node = self._nodes[run.node]
        if node.down:
            return  # a down node's kubelet does nothing; coming back up re-queues its pods
        try:
            if run.deleting:
                if run.stop_timer is not None:
                    return  # still stopping: _containers_stopped queues it again
                if run.state != TERMINATED:
                    self._kill(run)
                if run.version != run.written:
                    await self._write_status(run, node)
                if self._runs.get(key) is run and not node.down:
                    await self.client.delete(
                        PODS, run.name, run.namespace, grace_period=0, uid=run.uid
                    )
                    log.debug("pod deletion confirmed", extra={"pod": key})
                return
            if run.version != run.written:
                await self._write_status(run, node)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                # Gone, or replaced by a new pod of the same name: nothing left to report.
                if self._runs.get(key) is run:
                    self._forget(run)
                return
            if exc.retryable:
                raise
            log.warning("pod status refused", extra={"pod": key, "error": str(exc)})
            run.written = run.version

    async def _write_status(self, run: PodRun, node: _Node) -> None:
        version = run.version
        body = {
            # The UID makes the patch fail (409) if the pod was replaced meanwhile.
            "metadata": {"uid": run.uid},
            "status": pod_status(run, node.ip, time.time()),
        }
        await self.client.patch(
            PODS,
            run.name,
            body,
            run.namespace,
            subresource="status",
            content_type=STRATEGIC_MERGE_PATCH,
        )
        run.written = max(run.written, version)
