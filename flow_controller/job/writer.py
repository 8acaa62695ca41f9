"""What the job controller writes for a Job: its status (and TTL deletion), PodGroup, pods,
claims and events. Decisions are the controller's (`jobs`); this applies them, each write
counted in the controller metrics and each failure left as an event on the Job and raised, so
the reconcile is retried with backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from core.api.batch import JobSpec
from core.controller.metrics import ControllerMetrics
from core.decisions import decision
from core.kube.client import JSON_PATCH, PODGROUPS, PODS, PVCS, VCJOBS, ApiError, KubeClient
from core.kube.events import WARNING, EventRecorder
from core.kube.informer import Informer
from core.records import JobRecord, PodGroupRecord, PodRecord
from flow_controller.job import objects
from flow_controller.job.state import ABORTED, FINISHED
from flow_controller.job.status import changed, stamp

CLAIM_RECHECK = 5.0  # seconds between looks for a claim a job names and nobody created yet


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(stamp_: str) -> float:
    return datetime.fromisoformat(stamp_.replace("Z", "+00:00")).timestamp()


class JobWriter:
    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        podgroups: Informer[PodGroupRecord],
        wrote_job: Callable[[dict[str, Any]], None] = lambda job: None,
    ) -> None:
        self.client = client
        # Told every Job this writer's writes return (the reconcile's next read may be older).
        self.wrote_job = wrote_job
        self.recorder = recorder
        self.metrics = metrics
        # Job key -> seconds after which to look at it again (its TTL, a claim not there yet):
        # what its reconcile returns to the runtime.
        self.requeue_after: dict[str, float] = {}
        self.podgroups = podgroups
        # PodGroups a kill deleted (by UID), until the informer sees them go.
        self.deleted_groups: set[str] = set()
        # PodGroups (ns/name) this writer deleted, or found gone, and has not made since: a
        # finished job's every later sync asks to delete its group again (a 7-minute real soak:
        # 1,467 deletes answered 404 Not Found).
        self.gone_groups: set[str] = set()
        podgroups.add_handlers(on_delete=lambda group: self.deleted_groups.discard(group.uid))

    def job_deleted(self, job: JobRecord) -> None:
        """The job is gone: its PodGroup's name (from the job's UID) will not be asked again."""
        self.gone_groups.discard(f"{job.namespace}/{objects.podgroup_name(job.name, job.uid)}")

    async def ensure_volumes(self, job: dict[str, Any], spec: JobSpec) -> bool:
        """Volcano's createJobIOIfNotExist: an unnamed claim gets a generated name, written back
        into the Job; a claim with a `volumeClaim` spec is created (owned by the Job) when
        missing; a named claim without one must exist (else PVCError, and the job waits)."""
        meta = job["metadata"]
        named = []
        for index, volume in enumerate(spec.volumes or ()):
            if not volume.volume_claim_name:
                named.append(
                    {
                        "op": "add",
                        "path": f"/spec/volumes/{index}/volumeClaimName",
                        "value": objects.claim_name(meta["name"]),
                    }
                )
        if named:
            self.wrote_job(
                await self.client.patch(
                    VCJOBS, meta["name"], named, meta["namespace"], content_type=JSON_PATCH
                )
            )
            return False
        for volume in spec.volumes or ():
            name = volume.volume_claim_name or ""
            try:
                await self.client.get(PVCS, name, meta["namespace"])
                continue
            except ApiError as exc:
                if not exc.not_found:
                    raise
            if volume.volume_claim is None:
                self.event(job, WARNING, "PVCError", f"pvc {name} is not found")
                # Nothing this controller watches says when it appears: look again soon.
                self._requeue(meta, CLAIM_RECHECK)
                return False
            try:
                await self.client.create(PVCS, objects.build_claim(meta, name, volume.volume_claim))
            except ApiError as exc:
                if not exc.conflict:
                    self.event(job, WARNING, "PVCError", f"failed to create pvc {name}: {exc}")
                    raise
        return True

    async def initiate(self, job: dict[str, Any], spec: JobSpec) -> dict[str, Any]:
        now = _now()
        status = {
            **(job.get("status") or {}),
            "state": {"phase": "Pending", "lastTransitionTime": now},
            "minAvailable": spec.min_available or 0,
            "conditions": [{"status": "Pending", "lastTransitionTime": now}],
        }
        written = await self.client.replace(VCJOBS, {**job, "status": status}, subresource="status")
        self.wrote_job(written)
        return written

    async def ensure_podgroup(self, job: dict[str, Any], spec: JobSpec) -> PodGroupRecord | None:
        meta = job["metadata"]
        desired = objects.build_podgroup(meta, spec)
        name = desired["metadata"]["name"]
        current = self.podgroups.items.get(f"{meta['namespace']}/{name}")
        if current is not None and current.uid in self.deleted_groups:
            current = None  # deleted by a kill; the informer has not heard yet
        if current is None:
            self.gone_groups.discard(f"{meta['namespace']}/{name}")
            try:
                await self.client.create(PODGROUPS, desired)
                self.metrics.changes.labels("PodGroup", "created").inc()
            except ApiError as exc:
                if not exc.conflict:
                    self.event(job, WARNING, "PodGroupError", str(exc))
                    raise
            return None  # new: Pending until the scheduler admits it
        changes = objects.podgroup_changes(current.spec, desired["spec"])
        if changes:
            await self.client.patch(PODGROUPS, name, {"spec": changes}, meta["namespace"])
            self.metrics.changes.labels("PodGroup", "updated").inc()
        return current

    async def create_pod(self, job: dict[str, Any], body: dict[str, Any]) -> None:
        try:
            await self.client.create(PODS, body, lean=True)  # one per pod of every Job
            self.metrics.changes.labels("Pod", "created").inc()
        except ApiError as exc:
            if exc.conflict:
                return  # created before: the informer had not seen it yet
            self.event(
                job,
                WARNING,
                "FailedCreate",
                f"failed to create pod {body['metadata']['name']}: {exc}",
            )
            raise

    async def delete_pod(self, job: dict[str, Any], pod: PodRecord) -> bool:
        """Mark the pod out of sync (its deletion is the controller's, not an eviction), then
        delete it; True when it is going."""
        try:
            await self.client.patch(
                PODS,
                pod.name,
                {"metadata": {"annotations": {objects.OUT_OF_SYNC: "true"}}},
                pod.namespace,
            )
            await self.client.delete(PODS, pod.name, pod.namespace, uid=pod.uid)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return True
            self.event(job, WARNING, "FailedDelete", f"failed to delete pod {pod.name}: {exc}")
            raise
        self.metrics.changes.labels("Pod", "deleted").inc()
        return True

    async def write_status(
        self,
        job: dict[str, Any],
        previous: dict[str, Any],
        status: dict[str, Any],
        *,
        running_duration: bool = False,
    ) -> None:
        if not changed(previous, status):
            await self.expire(job, previous)
            return
        now = _now()
        status = stamp(previous, status, now)
        if running_duration and job["metadata"].get("creationTimestamp"):
            seconds = _epoch(now) - _epoch(job["metadata"]["creationTimestamp"])
            status["runningDuration"] = f"{max(0, int(seconds))}s"
        body = {**job, "status": status}
        written = await self.client.replace(VCJOBS, body, subresource="status")
        self.wrote_job(written)
        self.metrics.changes.labels("Job", "status").inc()
        before = (previous.get("state") or {}).get("phase")
        after = status["state"]["phase"]
        if after != before:
            meta = job["metadata"]
            decision(
                "job state",
                job=f"{meta.get('namespace')}/{meta['name']}",
                queue=(job.get("spec") or {}).get("queue") or "default",
                from_state=before or "",
                state=after,
                reason=(status.get("state") or {}).get("reason") or "",
            )
        if after != before and after in ("Completed", "Failed"):
            counter = (
                self.metrics.job_completed if after == "Completed" else self.metrics.job_failed
            )
            queue = (job.get("spec") or {}).get("queue") or "default"
            counter.labels(job["metadata"]["name"], queue).inc()
        await self.expire(written, status)

    async def expire(self, job: dict[str, Any], status: dict[str, Any]) -> None:
        """ttlSecondsAfterFinished: a finished job (Completed, Failed, Terminated — and
        Aborted, which Volcano forgets, #4736) is deleted that long after it finished."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        state = status.get("state") or {}
        if ttl is None or state.get("phase") not in (*FINISHED, ABORTED):
            return
        since = state.get("lastTransitionTime")
        left = (_epoch(since) + int(ttl) - time.time()) if since else 0.0
        meta = job["metadata"]
        if left > 0:
            self._requeue(meta, left)
            return
        try:
            await self.client.delete(
                VCJOBS,
                meta["name"],
                meta["namespace"],
                propagation="Foreground",
                uid=meta.get("uid"),
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise

    def _requeue(self, meta: dict[str, Any], seconds: float) -> None:
        key = f"{meta['namespace']}/{meta['name']}"
        self.requeue_after[key] = min(seconds, self.requeue_after.get(key, seconds))

    def event(self, job: dict[str, Any], type_: str, reason: str, note: str) -> None:
        meta = job["metadata"]
        ref = VCJOBS.reference(meta["name"], meta["namespace"], meta.get("uid", ""))
        self.recorder.record(ref, type_, reason, note)

    async def delete_podgroup(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        name = objects.podgroup_name(meta["name"], meta.get("uid", ""))
        key = f"{meta['namespace']}/{name}"
        group = self.podgroups.items.get(key)
        if group is not None:
            self.deleted_groups.add(group.uid)
        elif key in self.gone_groups:
            return  # deleted (or found gone) already, and not made again since
        try:
            gone = await self.client.delete(PODGROUPS, name, meta["namespace"])
            # The group deleted may be one this informer has not seen yet (created by the sync
            # just before): its ADDED event, arriving later, must not pass for the current
            # group, or pods are created for a group about to disappear.
            if isinstance(gone, dict) and gone.get("kind") == "PodGroup":
                uid = (gone.get("metadata") or {}).get("uid")
                if uid:
                    self.deleted_groups.add(uid)
            self.metrics.changes.labels("PodGroup", "deleted").inc()
        except ApiError as exc:
            if not exc.not_found:
                raise
        self.gone_groups.add(key)
