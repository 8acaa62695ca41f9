"""Volcano's job controller (`job-controller`).

Events about a Job, its pods and its PodGroup become requests (`events`), queued per job;
each reconcile drains the job's requests in order, resolves each to an action through the
job's policies and runs the primitive its phase says (`state`): **sync** (PodGroup
`<job>-<uid>`, pods `<job>-<task>-<i>` once the PodGroup is past Pending — vulcan's extender
admits it, as Volcano's enqueue does — counts and phase), **kill** (every pod but, softly, the
finished ones; version + 1; the PodGroup deleted) or **kill one target** (a task's pods, or
one pod). The job is read from the informer, or the newer copy this controller's last write
of it returned (`core.controller.fresh`; a write on a stale copy conflicts, and the job is read
from the API server for the retry). Finished jobs with
`ttlSecondsAfterFinished` are deleted when it runs out.
"""

from __future__ import annotations

import logging
from typing import Any

from core.api.batch import Job
from core.api.defaults import default_job_spec
from core.controller.fresh import FreshRecords
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.kube.client import VCJOBS, ApiError, KubeClient
from core.kube.events import NORMAL, EventRecorder
from core.records import JobRecord
from flow_controller.job.events import JobEvents
from flow_controller.job.objects import BindMarker
from flow_controller.job.owned import PluginObjects
from flow_controller.job.primitives import JobPrimitives
from flow_controller.job.state import (
    FINISHED,
    KILL,
    KILL_TARGET,
    RESTART_PARTITION,
    RESTART_POD,
    SYNC_JOB,
    TERMINATE_JOB,
    Request,
    plan_action,
    resolve_action,
)
from flow_controller.job.writer import JobWriter

log = logging.getLogger("vulcan.controllers.job")

JOB = "job-controller"
# Every unfinished job is synced this often even when nothing was heard of it (client-go's
# informer resync): a change whose event was missed can delay a job, never strand it.
RESYNC = 30.0


class JobReconciler(Reconciler[str]):
    name = JOB

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        pod_markers: tuple[str, ...] = (),
        gated_schedulers: frozenset[str] | None = None,
        bind_marker: BindMarker | None = None,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.pod_markers = pod_markers
        self.gated_schedulers = gated_schedulers  # `JobPrimitives.gated_schedulers`
        self.bind_marker = bind_marker
        self.owned = PluginObjects(client)
        # The action each job's failing reconcile was running (for the give-up).
        self._acting: dict[str, str] = {}

    def setup(self, watch: Builder[str]) -> None:
        # The job's requests come from its own events, its pods' and its PodGroup's
        # (`JobEvents` registers those handlers on the runtime's builder).
        self.events = JobEvents(watch)
        self.jobs, self.podgroups = self.events.jobs, self.events.podgroups
        self.fresh = FreshRecords(self.jobs)
        self.writer = JobWriter(
            self.client, self.recorder, self.metrics, self.podgroups, self.fresh.wrote
        )
        self.jobs.add_handlers(on_delete=self._job_deleted)
        self.primitives = JobPrimitives(
            self.events,
            self.writer,
            self.owned,
            self.pod_markers,
            self.gated_schedulers,
            self.bind_marker,
        )
        watch.resync(RESYNC, self._unfinished)

    def _job_deleted(self, job: JobRecord) -> None:
        self.fresh.forget(job.key)
        self.writer.job_deleted(job)

    def _unfinished(self) -> list[str]:
        return [
            key
            for key, job in self.jobs.items.items()
            if job.phase not in FINISHED and not job.deleting
        ]

    def reference(self, key: str) -> ObjectRef:
        namespace, name = key.split("/", 1)
        return VCJOBS.reference(name, namespace, getattr(self.jobs.items.get(key), "uid", ""))

    async def stop(self) -> None:
        self.events.stop()

    def given_up(self, key: str, exc: BaseException) -> bool:
        """`--max-requeue-num` failed reconciles of a job: as Volcano, say which action failed
        (`ExecuteAction`) and terminate the job, releasing its pods and PodGroup, instead of
        leaving it half-done. The requests that kept failing are dropped (Volcano forgets
        them); if terminating is what failed, the job is given up (`FailedSync`, where
        Volcano only logs "Failed to terminate Job")."""
        ref = self.reference(key)
        action = self._acting.pop(key, SYNC_JOB)
        self.events.take(key)
        if action == TERMINATE_JOB:
            return False  # the runtime's FailedSync
        # Volcano's recordJobEvent: type Normal, reason ExecuteAction; its FailedSync-like
        # log line ("Dropping job ... because max retries has reached") is a log, not an event.
        self.recorder.record(
            ref,
            NORMAL,
            "ExecuteAction",
            f"Job failed on action {action} for retry limit reached",
        )
        log.warning(
            "terminating job after retry limit",
            extra={"job": key, "action": action, "error": str(exc)},
        )
        self.events.request(key, Request(action=TERMINATE_JOB))
        return True

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> float | None:
        """Every request queued for the job, in order; the seconds after which to look at the
        job again (its TTL, a claim not there yet), if any."""
        self.writer.requeue_after.pop(key, None)
        requests = self._coalesce(key, self.events.take(key)) or [Request()]
        for position, request in enumerate(requests):
            try:
                await self._handle(key, request)
            except Exception:
                self.events.put_back(key, requests[position:])
                raise
        self._acting.pop(key, None)
        return self.writer.requeue_after.pop(key, None)

    def _coalesce(self, key: str, requests: list[Request]) -> list[Request]:
        """Requests that can only sync the job (no Command action, and a job without any
        policy) are one sync however many there are: a 1,000-pod job's pods report 1,000
        events, and one sync afterwards sees them all."""
        record = self.jobs.items.get(key)
        spec = (record.obj.get("spec") or {}) if record is not None else {}
        if spec.get("policies") or any(t.get("policies") for t in spec.get("tasks") or ()):
            return requests
        kept = [r for r in requests if r.action]
        if len(kept) < len(requests):
            kept.append(Request())
        return kept

    async def _handle(self, key: str, request: Request) -> None:
        record = await self.fresh.get(key)
        if record is None:
            return
        try:
            await self._act(key, record.obj, request)
        except ApiError as exc:
            if exc.conflict:
                self.fresh.conflicted(key)
            raise

    async def _act(self, key: str, job: dict[str, Any], request: Request) -> None:
        meta = job["metadata"]
        if meta.get("deletionTimestamp"):
            return
        spec = default_job_spec(Job.model_validate(job).spec)
        status = job.get("status") or {}
        phase = (status.get("state") or {}).get("phase") or ""
        version = int(status.get("version") or 0)
        action, timeout = resolve_action(
            spec, request, job_uid=meta.get("uid", ""), job_version=version
        )
        if timeout:
            if self.events.delays.add(key, request, action, timeout):
                self.writer.event(
                    job, NORMAL, "ExecuteAction", f"Execute action {action} after {timeout}"
                )
            return
        if action != SYNC_JOB:
            self.writer.event(job, NORMAL, "ExecuteAction", f"Start to execute action {action}")
            self.events.delays.executed(key, action, request)
        self._acting[key] = action
        step = plan_action(phase, action)
        if step.primitive == KILL:
            await self.primitives.kill(job, spec, step, target=None)
        elif step.primitive == KILL_TARGET:
            target: str | tuple[str, str] = (
                request.pod
                if action == RESTART_POD
                else (request.task, request.partition)
                if action == RESTART_PARTITION
                else request.task
            )
            await self.primitives.kill(job, spec, step, target=target or None)
        else:
            await self.primitives.sync(job, spec, step)
