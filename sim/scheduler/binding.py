"""The binding cycle of the stand-in: a pod assumed on its node is bound in a task of its
own (by the binder extender if one is interested, else by the default binder) while the next
pod is scheduled; a failed bind forgets the assumed pod and requeues it with backoff unless it
turns out bound after all.

Separate from the scheduling cycle (`sim.scheduler.cycle`), which decides and assumes and
then hands the pod over; `Scheduler` (`sim.scheduler.scheduler`) combines them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.kube.client import PODS, ApiError
from core.kube.events import NORMAL
from sim.scheduler.extenders import ExtenderError
from sim.scheduler.queue import QueuedPod

if TYPE_CHECKING:
    from core.kube.client import KubeClient
    from core.kube.events import EventRecorder
    from sim.scheduler.extenders import HTTPExtender
    from sim.scheduler.framework import SchedNode, SchedPod
    from sim.scheduler.queue import SchedulingQueue


class Binding:
    """`Scheduler`'s bind of an assumed pod and what a failed bind undoes."""

    # Provided by Scheduler.
    client: KubeClient
    extenders: list[HTTPExtender]
    queue: SchedulingQueue
    nodes: dict[str, SchedNode]
    pods: dict[str, SchedPod]
    assumed: dict[str, tuple[SchedPod, str]]
    scheduled: int
    error_attempts: int

    if TYPE_CHECKING:
        # Provided by Reporting (declared for the type checker only, so that these never
        # shadow the real methods).
        def _recorder(self, pod: SchedPod) -> EventRecorder: ...

        def _record_failure(
            self, pod: SchedPod, reason: str, message: str, nominated: str | None
        ) -> None: ...

    # ------------------------------------------------------------------ binding

    async def _bind(self, queued: QueuedPod, pod: SchedPod, node: str) -> None:
        binder = next((e for e in self.extenders if e.is_binder() and e.is_interested(pod)), None)
        try:
            if binder is not None:
                await binder.bind(pod, node)
            else:
                await self.client.bind_pod(pod.namespace, pod.name, node, uid=pod.uid)
        except (ExtenderError, ApiError) as exc:
            await self._bind_failed(queued, pod, node, exc)
            return
        self.scheduled += 1
        self._recorder(pod).record(
            pod.reference(),
            NORMAL,
            "Scheduled",
            f"Successfully assigned {pod.key} to {node}",
            action="Binding",
        )

    async def _bind_failed(
        self, queued: QueuedPod, pod: SchedPod, node: str, exc: Exception
    ) -> None:
        self.error_attempts += 1
        # ForgetPod: release the assumed capacity, then let waiting pods try again.
        assumed = self.assumed.pop(pod.key, None)
        if assumed is not None:
            target = self.nodes.get(assumed[1])
            if target is not None:
                target.remove(assumed[0])
        self.queue.move_all()
        message = (
            f'running Bind plugin "DefaultBinder": {exc}' if isinstance(exc, ApiError) else str(exc)
        )
        self._record_failure(pod, "SchedulerError", message, None)
        # Re-read the pod: bound after all (a late answer) -> not requeued; gone -> forgotten.
        try:
            live = await self.client.get(PODS, pod.name, pod.namespace)
        except ApiError as err:
            if err.not_found:
                return
            live = None
        if live is not None:
            if (live.get("spec") or {}).get("nodeName"):
                return
            if (live.get("metadata") or {}).get("uid") != pod.uid:
                return
        current = self.pods.get(pod.key)
        if current is not None and current.node is None and current.uid == pod.uid:
            queued.pod = current
            self.queue.requeue_error(queued)
