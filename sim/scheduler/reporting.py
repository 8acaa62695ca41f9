"""What the stand-in reports of its attempts, as kube-scheduler does: events (through one
recorder per scheduler profile) and, for a pod that could not be scheduled, the
`PodScheduled=False` condition with its reason (and the node it is nominated to).

Separate because the scheduling cycle (`sim.scheduler.cycle`), the binding
(`sim.scheduler.binding`) and preemption (`sim.scheduler.preemption`) all report through it;
`Scheduler` (`sim.scheduler.scheduler`) combines them.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.kube.client import PODS, STRATEGIC_MERGE_PATCH, ApiError
from core.kube.events import WARNING, EventRecorder

if TYPE_CHECKING:
    from core.kube.client import KubeClient
    from sim.scheduler.framework import SchedPod

log = logging.getLogger("vulcan.sim.scheduler")


class Reporting:
    """`Scheduler`'s event recorders and PodScheduled condition writes."""

    # Provided by Scheduler.
    client: KubeClient
    recorders: dict[str, EventRecorder]
    _writes: set[asyncio.Task[None]]

    # ------------------------------------------------------------------ reporting

    def _recorder(self, pod: SchedPod) -> EventRecorder:
        return self.recorders.get(pod.scheduler_name) or next(iter(self.recorders.values()))

    def _record_failure(
        self, pod: SchedPod, reason: str, message: str, nominated: str | None
    ) -> None:
        self._recorder(pod).record(
            pod.reference(), WARNING, "FailedScheduling", message, action="Scheduling"
        )
        task = asyncio.create_task(self._write_condition(pod, reason, message, nominated))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write_condition(
        self, pod: SchedPod, reason: str, message: str, nominated: str | None
    ) -> None:
        """PodScheduled=False with the reason (strategic merge: conditions merge by type)."""
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if not _condition_changed(pod.raw, condition) and nominated is None:
            return
        status: dict[str, Any] = {"conditions": [condition]}
        if nominated is not None:
            status["nominatedNodeName"] = nominated
        patch = {"metadata": {"uid": pod.uid}, "status": status}
        try:
            await self.client.patch(
                PODS,
                pod.name,
                patch,
                pod.namespace,
                subresource="status",
                content_type=STRATEGIC_MERGE_PATCH,
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                log.warning(
                    "could not update pod status", extra={"pod": pod.key, "error": str(exc)}
                )


def _condition_changed(raw: dict[str, Any] | None, condition: dict[str, Any]) -> bool:
    """kube-scheduler skips the write when status, reason and message are unchanged."""
    if raw is None:
        return True
    for existing in (raw.get("status") or {}).get("conditions") or ():
        if existing.get("type") == "PodScheduled":
            return any(existing.get(k) != condition[k] for k in ("status", "reason", "message"))
    return True
