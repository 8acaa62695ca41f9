"""Volcano's job controller (`job-controller`; shared/spec/volcano-controllers.md §2-§5).

Events about a Job, its pods and its PodGroup become requests (`events`), queued per job;
each reconcile drains the job's requests in order, resolves each to an action through the
job's policies and runs the primitive its phase says (`state`): **sync** (PodGroup
`<job>-<uid>`, pods `<job>-<task>-<i>` once the PodGroup is past Pending — vulcan's extender
admits it, as Volcano's enqueue does — counts and phase), **kill** (every pod but, softly, the
finished ones; version + 1; the PodGroup deleted) or **kill one target** (a task's pods, or
one pod). The job itself is read from the API server at each reconcile (jobs are few, and a
decision on a stale phase or version would restart twice). Finished jobs with
`ttlSecondsAfterFinished` are deleted when it runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from core.api.batch import Job, JobSpec
from core.api.defaults import default_job_spec
from core.controller.informers import SharedInformers
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy, run_reconciler, warn_given_up
from core.kube.client import PODGROUPS, VCJOBS, ApiError, KubeClient
from core.kube.events import NORMAL, WARNING, EventRecorder
from core.kube.workqueue import WorkQueue
from core.records import JobRecord, PodGroupRecord, PodRecord
from flow_controller.job import objects
from flow_controller.job.events import JobEvents
from flow_controller.job.owned import PluginObjects
from flow_controller.job.partitions import in_partition
from flow_controller.job.plugin_registry import build_plugins
from flow_controller.job.plugins import JobContext, Plugin, PluginFailed
from flow_controller.job.state import (
    FINISHED,
    KILL,
    KILL_TARGET,
    RESTART_PARTITION,
    RESTART_POD,
    SYNC_JOB,
    TERMINATE_JOB,
    Request,
    Step,
    plan_action,
    resolve_action,
)
from flow_controller.job.status import Tally, job_status, task_ready
from flow_controller.job.writer import JobWriter

log = logging.getLogger("vulcan.controllers.job")

JOB = "job-controller"
# Every unfinished job is synced this often even when nothing was heard of it (client-go's
# informer resync): a change whose event was missed can delay a job, never strand it.
RESYNC = 30.0
_FINISHED_PODS = ("Succeeded", "Failed")


class JobController:
    name = JOB

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        retries: RetryPolicy,
        workers: int = 3,
        pod_markers: tuple[str, ...] = (),
    ) -> None:
        self.client = client
        self.pod_markers = pod_markers
        self.recorder = recorder
        self.metrics = metrics
        self.retries = retries
        self.workers = workers
        self.jobs = informers.get(VCJOBS, JobRecord)
        self.podgroups = informers.get(PODGROUPS, PodGroupRecord)
        self.queue: WorkQueue[str] = WorkQueue(
            "jobs", base_delay=retries.base, max_delay=retries.max_delay
        )
        self.owned = PluginObjects(client)
        self.events = JobEvents(client, informers, self.jobs, self.podgroups, self.queue, recorder)
        self.pods = self.events.pods
        self.writer = JobWriter(client, recorder, metrics, self.queue, self.podgroups)
        # The action each job's failing reconcile was running (for the give-up).
        self._acting: dict[str, str] = {}

    async def run(self) -> None:
        await self.events.start()
        resync = asyncio.create_task(self._resync(), name="job-resync")
        try:
            await run_reconciler(
                self.queue,
                JOB,
                self.workers,
                self.reconcile,
                self.metrics,
                self.retries,
                self._give_up,
            )
        finally:
            resync.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await resync
            await self.events.stop()

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(RESYNC)
            for key, job in list(self.jobs.items.items()):
                if job.phase not in FINISHED and not job.deleting:
                    self.queue.add(key)

    def _give_up(self, key: str, exc: BaseException) -> None:
        """`--max-requeue-num` failed reconciles of a job: as Volcano, say which action failed
        (`ExecuteAction`) and terminate the job, releasing its pods and PodGroup, instead of
        leaving it half-done. The requests that kept failing are dropped (Volcano forgets
        them); if terminating is what failed, the job is given up (`FailedSync`, where
        Volcano only logs "Failed to terminate Job")."""
        namespace, name = key.split("/", 1)
        ref = VCJOBS.reference(name, namespace, getattr(self.jobs.items.get(key), "uid", ""))
        action = self._acting.pop(key, SYNC_JOB)
        self.events.take(key)
        if action == TERMINATE_JOB:
            warn_given_up(self.recorder, ref, f"job {key}", exc)
            return
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

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> None:
        requests = self._coalesce(key, self.events.take(key)) or [Request()]
        for position, request in enumerate(requests):
            try:
                await self._handle(key, request)
            except Exception:
                self.events.put_back(key, requests[position:])
                raise
        self._acting.pop(key, None)

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
        namespace, name = key.split("/", 1)
        try:
            job = await self.client.get(VCJOBS, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return
            raise
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
            await self._kill(job, spec, step, target=None)
        elif step.primitive == KILL_TARGET:
            target: str | tuple[str, str] = (
                request.pod
                if action == RESTART_POD
                else (request.task, request.partition)
                if action == RESTART_PARTITION
                else request.task
            )
            await self._kill(job, spec, step, target=target or None)
        else:
            await self._sync(job, spec, step)

    # ------------------------------------------------------------------ primitives

    def _job_pods(self, job: dict[str, Any]) -> list[PodRecord]:
        return self.events.pods_of(
            job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"].get("uid", "")
        )

    async def _sync(self, job: dict[str, Any], spec: JobSpec, step: Step) -> None:
        status = job.get("status") or {}
        if not (status.get("state") or {}).get("phase"):
            job = await self.writer.initiate(job, spec)
            status = job["status"]
        phase = status["state"]["phase"]
        if phase == "Pending" and not await self.writer.ensure_volumes(job, spec):
            return  # a claim is missing, or its name was just written back (a new sync follows)
        group = await self.writer.ensure_podgroup(job, spec)
        ctx, plugins = self._plugins(job, spec)
        await self.owned.ensure(ctx, plugins)
        pods = self._job_pods(job)
        tally = Tally()
        if group is None or group.phase == "Pending":
            if group is not None:
                self._podgroup_pending(job, group)
            for pod in pods:
                if pod.deleting:
                    tally.terminating += 1
                else:
                    tally.count(pod)
        else:
            await self._converge(job, spec, pods, tally, ctx, plugins)
        version = int(status.get("version") or 0)
        retry = int(status.get("retryCount") or 0)
        next_phase = step.next_phase(phase, tally.counts(), spec, retry)
        new = job_status(
            status,
            spec,
            tally,
            phase=next_phase,
            version=version,
            retry_count=retry + (1 if step.retry else 0),
        )
        new["controlledResources"] = {
            **(status.get("controlledResources") or {}),
            **{f"plugin-{p.name}": p.name for p in plugins},
            **{
                f"volume-pvc-{v.volume_claim_name}": v.volume_claim_name
                for v in spec.volumes or ()
                if v.volume_claim_name
            },
        }
        # A sync that finishes the job (every pod done) releases what the job holds at once.
        # Volcano leaves that to the kill its next event runs in the finished phase, so for a
        # moment a Completed job still has its plugins' objects and its PodGroup.
        finished = next_phase in FINISHED and phase not in FINISHED
        if finished:
            await self._release_plugins(job, spec, new)
        await self.writer.write_status(job, status, new)
        if finished:
            await self.writer.delete_podgroup(job)

    def _plugins(self, job: dict[str, Any], spec: JobSpec) -> tuple[JobContext, list[Plugin]]:
        meta = job["metadata"]
        ctx = JobContext(meta["name"], meta["namespace"], spec, objects.owner_reference(meta))
        plugins, missing = build_plugins(spec.plugins)
        if missing:
            self.writer.event(job, WARNING, "PluginError", f"plugins not implemented: {missing}")
        return ctx, plugins

    def _podgroup_pending(self, job: dict[str, Any], group: PodGroupRecord) -> None:
        """Volcano's PodGroupPending warning, once per PodGroup version."""
        if self.events.note_pending(group.key, group.rv):
            self.writer.event(
                job,
                WARNING,
                "PodGroupPending",
                f"PodGroup {group.key} is Pending: waiting for admission",
            )

    async def _converge(
        self,
        job: dict[str, Any],
        spec: JobSpec,
        pods: list[PodRecord],
        tally: Tally,
        ctx: JobContext,
        plugins: list[Plugin],
    ) -> None:
        """Create the missing pods (tasks whose dependsOn holds), delete surplus and
        out-of-sync ones, and count the rest."""
        meta = job["metadata"]
        status = job["status"]
        version = int(status.get("version") or 0)
        retry = int(status.get("retryCount") or 0)
        by_name = {pod.name: pod for pod in pods}
        wanted: set[str] = set()
        by_task: dict[str, list[PodRecord]] = {}
        for pod in pods:
            by_task.setdefault(pod.task or "", []).append(pod)
        tasks = {t.name or "": t for t in spec.tasks or ()}
        ready = {n: task_ready(by_task.get(n, ()), t.min_available) for n, t in tasks.items()}
        create: list[dict[str, Any]] = []
        delete: list[PodRecord] = []
        for task_name, task in tasks.items():
            allowed = objects.dependencies_met(task, ready)
            for index in range(task.replicas):
                name = objects.pod_name(meta["name"], task_name, index)
                wanted.add(name)
                pod = by_name.get(name)
                if pod is None:
                    if allowed:
                        body = objects.build_pod(
                            meta, spec, task, index, version=version, retry_count=retry
                        )
                        objects.mount_volumes(body, meta["name"], spec)
                        objects.add_markers(body, self.pod_markers)
                        for plugin in plugins:
                            try:
                                plugin.on_pod_create(body, ctx)
                            except PluginFailed as exc:
                                # Volcano only logs it; the sync fails and is retried.
                                self.writer.event(job, WARNING, "PluginError", str(exc))
                                raise
                        create.append(body)
                elif pod.deleting:
                    tally.terminating += 1
                elif pod.out_of_sync:
                    delete.append(pod)
                else:
                    tally.count(pod)
        delete += [p for p in pods if p.name not in wanted and not p.deleting]
        for body in create:
            await self.writer.create_pod(job, body)
        for pod in delete:
            if await self.writer.delete_pod(job, pod):
                tally.terminating += 1

    async def _kill(
        self, job: dict[str, Any], spec: JobSpec, step: Step, target: str | tuple[str, str] | None
    ) -> None:
        """`target`: a task or pod name, or (task, partition id) for RestartPartition."""
        status = job.get("status") or {}
        phase = (status.get("state") or {}).get("phase") or "Pending"
        version = int(status.get("version") or 0)
        retry = int(status.get("retryCount") or 0)
        full = step.primitive == KILL
        # The last retry keeps its finished pods for inspection (Volcano #1651).
        soft = step.soft or (full and retry >= spec.max_retry - 1)
        if step.bump:
            version += 1
        pods = self._job_pods(job)
        if isinstance(target, tuple):
            pods = [p for p in pods if in_partition(p, *target)]
            if not pods:
                return  # no such partition: Volcano skips the kill, status untouched
        elif target is not None:
            pods = [p for p in pods if target in (p.task, p.name)]
        tally = Tally()
        for pod in pods:
            if pod.deleting:
                tally.terminating += 1
            elif soft and pod.phase in _FINISHED_PODS:
                # Kept, and counted: Volcano leaves them out, so a finished job's status
                # reads succeeded 0 after its next sync (#4616); the counts say what exists.
                tally.count(pod)
            elif await self.writer.delete_pod(job, pod):
                tally.terminating += 1
        retry_count = retry + (1 if step.retry else 0)
        next_phase = step.next_phase(phase, tally.counts(), spec, retry_count)
        new = job_status(
            status, spec, tally, phase=next_phase, version=version, retry_count=retry_count
        )
        if full:
            await self._release_plugins(job, spec, new)
        await self.writer.write_status(job, status, new, running_duration=True)
        if full:
            await self.writer.delete_podgroup(job)

    async def _release_plugins(
        self, job: dict[str, Any], spec: JobSpec, new: dict[str, Any]
    ) -> None:
        """Volcano's OnJobDelete: every plugin drops its objects and its marker (from the
        status about to be written, `new`)."""
        ctx, plugins = self._plugins(job, spec)
        await self.owned.delete(ctx, plugins)
        new["controlledResources"] = {
            k: v
            for k, v in (new.get("controlledResources") or {}).items()
            if not k.startswith("plugin-")
        }
