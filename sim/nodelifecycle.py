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
  tolerated without `tolerationSeconds`, never. Eviction adds the DisruptionTarget condition,
  deletes the pod gracefully, and, when its node is not Ready (the kubelet cannot finish the
  pod), marks it Failed with reason NodeLost, as pod GC does for pods of lost nodes. The pod
  then stays terminating until its kubelet confirms the deletion.

Health is sampled every `node_monitor_period` (as the real controller does); evictions are
timers, one per pod that has a deadline, rescheduled on pod and node events.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from core.kube.client import (
    LEASES,
    MERGE_PATCH,
    NODES,
    PODS,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    KubeClient,
)
from core.kube.events import NORMAL, EventRecorder
from core.kube.informer import Informer
from core.kube.workqueue import WorkQueue
from sim.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_NOT_READY,
    TAINT_UNREACHABLE,
    matching_toleration,
)

log = logging.getLogger("vulcan.sim.nodelifecycle")

LEASE_NAMESPACE = "kube-node-lease"
MANAGED_TAINT_KEYS = (TAINT_NOT_READY, TAINT_UNREACHABLE)
# The conditions a kubelet owns, which go Unknown when it stops reporting.
KUBELET_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NEVER_UPDATED_REASON = "NodeStatusNeverUpdated"
NEVER_UPDATED_MESSAGE = "Kubelet never posted node status."
EVICTION_REASON = "TaintManagerEviction"
COMPONENT = "taint-eviction-controller"


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def eviction_time(
    tolerations: Sequence[Mapping[str, Any]], taints: Sequence[Mapping[str, Any]], now: float
) -> float | None:
    """When (epoch seconds) a pod with `tolerations` on a node with `taints` is to be evicted,
    or None for never. For each NoExecute taint Kubernetes reads the first toleration that
    tolerates it: none means now; `tolerationSeconds` S means S after the taint's timeAdded
    (`now` if it has none; S <= 0 means at once); no tolerationSeconds means never. The
    earliest of these wins."""
    deadline: float | None = None
    for taint in taints:
        if taint.get("effect") != NO_EXECUTE:
            continue
        toleration = matching_toleration(tolerations, taint)
        if toleration is None:
            return now
        seconds = toleration.get("tolerationSeconds")
        if seconds is None:
            continue
        added = _parse_time(taint.get("timeAdded")) or now
        at = added + max(0, int(seconds))
        deadline = at if deadline is None else min(deadline, at)
    return deadline


class _NodeView:
    __slots__ = ("conditions", "heartbeat", "key", "ready", "rv", "taints", "uid")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.uid: str = meta.get("uid", "")
        self.taints: list[dict[str, Any]] = list((obj.get("spec") or {}).get("taints") or ())
        self.conditions: list[dict[str, Any]] = list(
            (obj.get("status") or {}).get("conditions") or ()
        )
        self.ready: str | None = None
        self.heartbeat: str | None = None
        for condition in self.conditions:
            if condition.get("type") == "Ready":
                self.ready = condition.get("status")
                self.heartbeat = condition.get("lastHeartbeatTime")

    def no_execute(self) -> list[dict[str, Any]]:
        return [t for t in self.taints if t.get("effect") == NO_EXECUTE]


class _LeaseView:
    __slots__ = ("key", "name", "renew", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.key = f"{meta.get('namespace') or ''}/{self.name}"
        self.rv: str = meta.get("resourceVersion", "")
        self.renew: str | None = (obj.get("spec") or {}).get("renewTime")


class _PodView:
    __slots__ = (
        "deleting",
        "key",
        "name",
        "namespace",
        "node",
        "phase",
        "rv",
        "tolerations",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        self.namespace: str = meta.get("namespace") or ""
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.rv: str = meta.get("resourceVersion", "")
        self.uid: str = meta.get("uid", "")
        self.node: str = spec.get("nodeName") or ""
        self.phase: str = (obj.get("status") or {}).get("phase") or "Pending"
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.tolerations: list[dict[str, Any]] = list(spec.get("tolerations") or ())

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


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


class NodeLifecycleController:
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
            EventRecorder(client, COMPONENT, f"{COMPONENT}-{socket.gethostname()}")
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
            _guard(self._pod_seen),
            _guard(lambda _old, new: self._pod_seen(new)),
            _guard(self._pod_gone),
        )
        for informer in (self._nodes, self._leases, self._pods):
            self._spawn(informer.run(), f"nodelifecycle-informer-{informer.resource.plural}")
        await asyncio.gather(
            self._nodes.wait_synced(), self._leases.wait_synced(), self._pods.wait_synced()
        )
        if self._recorder is not None:
            self._spawn(self._recorder.run(), "nodelifecycle-events")
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
        if self._recorder is not None:
            await self._recorder.close()

    # ------------------------------------------------------------------------ plumbing

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

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

    # ------------------------------------------------------------------------ eviction

    def _pod_seen(self, pod: _PodView) -> None:
        self._pods_on.setdefault(pod.node, set()).add(pod.key)
        self._reschedule(pod)

    def _pod_gone(self, pod: _PodView) -> None:
        keys = self._pods_on.get(pod.node)
        if keys is not None:
            keys.discard(pod.key)
            if not keys:
                del self._pods_on[pod.node]
        self._cancel(pod.key)
        self._evicted.discard(pod.uid)

    def _cancel(self, key: str) -> None:
        scheduled = self._scheduled.pop(key, None)
        if scheduled is not None:
            scheduled[1].cancel()

    def _reschedule(self, pod: _PodView) -> None:
        if pod.terminal or pod.uid in self._evicted:
            self._cancel(pod.key)
            return
        node = self._nodes.items.get(pod.node)
        now = time.time()
        deadline = eviction_time(pod.tolerations, node.no_execute() if node else [], now)
        if deadline is None:
            self._cancel(pod.key)
            return
        existing = self._scheduled.get(pod.key)
        if existing is not None and existing[0] <= deadline:
            # An eviction already scheduled keeps its start, as the taint manager does when a
            # node's NoExecute taints change (not-ready -> unreachable) or time passes.
            return
        self._cancel(pod.key)
        handle = asyncio.get_running_loop().call_later(
            max(0.0, deadline - now), self._evict_queue.add, pod.key
        )
        self._scheduled[pod.key] = (deadline, handle)

    async def _evict(self, key: str) -> None:
        self._scheduled.pop(key, None)
        pod = self._pods.items.get(key)
        if pod is None or pod.terminal or pod.uid in self._evicted:
            return
        node = self._nodes.items.get(pod.node)
        taints = node.no_execute() if node else []
        if eviction_time(pod.tolerations, taints, time.time()) is None:
            return  # the taint went away (node recovered) before the timer fired
        node_ready = node is not None and node.ready == "True"
        stamp = _rfc3339(time.time())
        try:
            await self.client.patch(
                PODS,
                pod.name,
                {
                    "metadata": {"uid": pod.uid},
                    "status": {
                        "conditions": [
                            {
                                "type": "DisruptionTarget",
                                "status": "True",
                                "reason": "DeletionByTaintManager",
                                "message": "Taint manager: deleting due to NoExecute taint",
                                "lastTransitionTime": stamp,
                            }
                        ]
                    },
                },
                pod.namespace,
                subresource="status",
                content_type=STRATEGIC_MERGE_PATCH,
            )
            if not pod.deleting:
                await self.client.delete(PODS, pod.name, pod.namespace, uid=pod.uid)
            if not node_ready:
                # Its kubelet cannot finish the pod: record the loss as pod GC does. Set after
                # the graceful delete, because the API server deletes a terminal pod at once
                # and the pod must stay visible until its kubelet confirms.
                await self.client.patch(
                    PODS,
                    pod.name,
                    {
                        "metadata": {"uid": pod.uid},
                        "status": {
                            "phase": "Failed",
                            "reason": "NodeLost",
                            "message": f"Node {pod.node} which was running pod {pod.name} "
                            "is unresponsive",
                        },
                    },
                    pod.namespace,
                    subresource="status",
                    content_type=STRATEGIC_MERGE_PATCH,
                )
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return  # gone or replaced: nothing to evict
            raise
        self._evicted.add(pod.uid)
        log.info("pod evicted by NoExecute taint", extra={"pod": key, "node": pod.node})
        if self._recorder is not None:
            self._recorder.record(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "uid": pod.uid,
                },
                NORMAL,
                EVICTION_REASON,
                f"Marking for deletion Pod {key}",
            )


def _guard(handler: Callable[..., None]) -> Callable[..., None]:
    """Informer handlers must not raise (an exception would end the informer's task)."""

    def guarded(*args: Any) -> None:
        try:
            handler(*args)
        except Exception:
            log.exception("node lifecycle event handler failed")

    return guarded


def _no_execute_identity(view: _NodeView) -> tuple[tuple[Any, ...], ...]:
    return tuple((t.get("key"), t.get("value"), t.get("timeAdded")) for t in view.no_execute())
