"""NoExecute eviction, the taint eviction controller's part of the node lifecycle controller:
a pod on a node with a NoExecute taint it does not tolerate is evicted (at once, or when its
`tolerationSeconds` run out), one timer per pod that has a deadline.

Separate from node health (`sim.nodelifecycle_health`), which sets the taints this half acts
on; `NodeLifecycleController` (`sim.nodelifecycle`) combines the two and owns the informers,
queues and loops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.kube.client import PODS, STRATEGIC_MERGE_PATCH, ApiError
from core.kube.events import NORMAL
from core.timestamps import epoch_seconds
from sim.nodelifecycle_views import _NodeView, _PodView, _rfc3339
from sim.taints import NO_EXECUTE, matching_toleration

if TYPE_CHECKING:
    from core.kube.client import KubeClient
    from core.kube.events import EventRecorder
    from core.kube.informer import Informer
    from core.kube.workqueue import WorkQueue

log = logging.getLogger("vulcan.sim.nodelifecycle")

EVICTION_REASON = "TaintManagerEviction"
COMPONENT = "taint-eviction-controller"


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
        added = epoch_seconds(taint.get("timeAdded")) or now
        at = added + max(0, int(seconds))
        deadline = at if deadline is None else min(deadline, at)
    return deadline


class TaintEviction:
    """The eviction half of `NodeLifecycleController`: pod events, eviction timers and the
    eviction itself."""

    # Provided by NodeLifecycleController.
    client: KubeClient
    _nodes: Informer[_NodeView]
    _pods: Informer[_PodView]
    _pods_on: dict[str, set[str]]
    _scheduled: dict[str, tuple[float, asyncio.TimerHandle]]
    _evicted: set[str]
    _evict_queue: WorkQueue[str]
    _recorder: EventRecorder | None

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
        # Finished pods too: the real controller evicts every pod on the node, whatever its
        # phase (the API server then deletes a Succeeded or Failed pod at once).
        if pod.uid in self._evicted:
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
        if pod is None or pod.uid in self._evicted:
            return
        node = self._nodes.items.get(pod.node)
        taints = node.no_execute() if node else []
        if eviction_time(pod.tolerations, taints, time.time()) is None:
            return  # the taint went away (node recovered) before the timer fired
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
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return  # gone or replaced: nothing to evict
            raise
        self._evicted.add(pod.uid)
        log.info("pod evicted by NoExecute taint", extra={"pod": key, "node": pod.node})
        if self._recorder is not None:
            self._recorder.record(
                PODS.reference(pod.name, pod.namespace, pod.uid),
                NORMAL,
                EVICTION_REASON,
                f"Marking for deletion Pod {key}",
            )
