"""Volcano's job controller (`job-controller`; shared/spec/volcano-controllers.md §2-§5).

Events about a Job, its pods and its PodGroup become requests (`job_events`), queued per job;
each reconcile drains the job's requests in order, resolves each to an action through the
job's policies and runs the primitive its phase says (`job_state`): **sync** (PodGroup
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
import time
from datetime import UTC, datetime
from typing import Any

from core.api.batch import Job, JobSpec
from core.api.defaults import default_job_spec
from core.controller.informers import SharedInformers
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy, run_reconciler, warn_given_up
from core.kube.client import JSON_PATCH, PODGROUPS, PODS, PVCS, VCJOBS, ApiError, KubeClient
from core.kube.events import NORMAL, WARNING, EventRecorder
from core.kube.workqueue import WorkQueue
from core.records import JobRecord, PodGroupRecord, PodRecord
from flow_controller import job_objects as objects
from flow_controller.job_events import JobEvents
from flow_controller.job_owned import PluginObjects
from flow_controller.job_plugins import JobContext, Plugin, build_plugins
from flow_controller.job_state import (
    ABORTED,
    FINISHED,
    KILL,
    KILL_TARGET,
    RESTART_POD,
    SYNC_JOB,
    Request,
    Step,
    plan_action,
    resolve_action,
)
from flow_controller.job_status import Tally, changed, job_status, stamp, task_ready

log = logging.getLogger("vulcan.controllers.job")

JOB = "job-controller"
CLAIM_RECHECK = 5.0  # seconds between looks for a claim a job names and nobody created yet
# Every unfinished job is synced this often even when nothing was heard of it (client-go's
# informer resync): a change whose event was missed can delay a job, never strand it.
RESYNC = 30.0
_FINISHED_PODS = ("Succeeded", "Failed")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(stamp_: str) -> float:
    return datetime.fromisoformat(stamp_.replace("Z", "+00:00")).timestamp()


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
    ) -> None:
        self.client = client
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
        # PodGroups a kill deleted (by UID), until the informer sees them go.
        self._deleted_groups: set[str] = set()
        self.podgroups.add_handlers(on_delete=lambda group: self._deleted_groups.discard(group.uid))

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
        namespace, name = key.split("/", 1)
        ref = {
            "apiVersion": VCJOBS.api_version,
            "kind": "Job",
            "namespace": namespace,
            "name": name,
            "uid": getattr(self.jobs.items.get(key), "uid", ""),
        }
        warn_given_up(self.recorder, ref, f"job {key}", exc)

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> None:
        requests = self._coalesce(key, self.events.take(key)) or [Request()]
        for position, request in enumerate(requests):
            try:
                await self._handle(key, request)
            except Exception:
                self.events.put_back(key, requests[position:])
                raise

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
                self._event(
                    job, NORMAL, "ExecuteAction", f"Execute action {action} after {timeout}"
                )
            return
        if action != SYNC_JOB:
            self._event(job, NORMAL, "ExecuteAction", f"Start to execute action {action}")
            self.events.delays.executed(key, action, request)
        step = plan_action(phase, action)
        if step.primitive == KILL:
            await self._kill(job, spec, step, target=None)
        elif step.primitive == KILL_TARGET:
            target = request.pod if action == RESTART_POD else request.task
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
            job = await self._initiate(job, spec)
            status = job["status"]
        phase = status["state"]["phase"]
        if phase == "Pending" and not await self._ensure_volumes(job, spec):
            return  # a claim is missing, or its name was just written back (a new sync follows)
        group = await self._ensure_podgroup(job, spec)
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
        await self._write_status(job, status, new)

    async def _ensure_volumes(self, job: dict[str, Any], spec: JobSpec) -> bool:
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
            await self.client.patch(
                VCJOBS, meta["name"], named, meta["namespace"], content_type=JSON_PATCH
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
                self._event(job, WARNING, "PVCError", f"pvc {name} is not found")
                # Nothing this controller watches says when it appears: look again soon.
                self.queue.add_after(f"{meta['namespace']}/{meta['name']}", CLAIM_RECHECK)
                return False
            try:
                await self.client.create(PVCS, objects.build_claim(meta, name, volume.volume_claim))
            except ApiError as exc:
                if not exc.conflict:
                    self._event(job, WARNING, "PVCError", f"failed to create pvc {name}: {exc}")
                    raise
        return True

    def _plugins(self, job: dict[str, Any], spec: JobSpec) -> tuple[JobContext, list[Plugin]]:
        meta = job["metadata"]
        ctx = JobContext(meta["name"], meta["namespace"], spec, objects.owner_reference(meta))
        plugins, missing = build_plugins(spec.plugins)
        if missing:
            self._event(job, WARNING, "PluginError", f"plugins not implemented: {missing}")
        return ctx, plugins

    async def _initiate(self, job: dict[str, Any], spec: JobSpec) -> dict[str, Any]:
        now = _now()
        job["status"] = {
            **(job.get("status") or {}),
            "state": {"phase": "Pending", "lastTransitionTime": now},
            "minAvailable": spec.min_available or 0,
            "conditions": [{"status": "Pending", "lastTransitionTime": now}],
        }
        return await self.client.replace(VCJOBS, job, subresource="status")

    async def _ensure_podgroup(self, job: dict[str, Any], spec: JobSpec) -> PodGroupRecord | None:
        meta = job["metadata"]
        desired = objects.build_podgroup(meta, spec)
        name = desired["metadata"]["name"]
        current = self.podgroups.items.get(f"{meta['namespace']}/{name}")
        if current is not None and current.uid in self._deleted_groups:
            current = None  # deleted by a kill; the informer has not heard yet
        if current is None:
            try:
                await self.client.create(PODGROUPS, desired)
                self.metrics.changes.labels("PodGroup", "created").inc()
            except ApiError as exc:
                if not exc.conflict:
                    self._event(job, WARNING, "PodGroupError", str(exc))
                    raise
            return None  # new: Pending until the scheduler admits it
        changes = objects.podgroup_changes(current.spec, desired["spec"])
        if changes:
            await self.client.patch(PODGROUPS, name, {"spec": changes}, meta["namespace"])
            self.metrics.changes.labels("PodGroup", "updated").inc()
        return current

    def _podgroup_pending(self, job: dict[str, Any], group: PodGroupRecord) -> None:
        """Volcano's PodGroupPending warning, once per PodGroup version."""
        if self.events.note_pending(group.key, group.rv):
            self._event(
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
                        for plugin in plugins:
                            plugin.on_pod_create(body, ctx)
                        create.append(body)
                elif pod.deleting:
                    tally.terminating += 1
                elif pod.out_of_sync:
                    delete.append(pod)
                else:
                    tally.count(pod)
        delete += [p for p in pods if p.name not in wanted and not p.deleting]
        for body in create:
            await self._create_pod(job, body)
        for pod in delete:
            if await self._delete_pod(job, pod):
                tally.terminating += 1

    async def _create_pod(self, job: dict[str, Any], body: dict[str, Any]) -> None:
        try:
            await self.client.create(PODS, body)
            self.metrics.changes.labels("Pod", "created").inc()
        except ApiError as exc:
            if exc.conflict:
                return  # created before: the informer had not seen it yet
            self._event(
                job,
                WARNING,
                "FailedCreate",
                f"failed to create pod {body['metadata']['name']}: {exc}",
            )
            raise

    async def _delete_pod(self, job: dict[str, Any], pod: PodRecord) -> bool:
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
            self._event(job, WARNING, "FailedDelete", f"failed to delete pod {pod.name}: {exc}")
            raise
        self.metrics.changes.labels("Pod", "deleted").inc()
        return True

    async def _kill(
        self, job: dict[str, Any], spec: JobSpec, step: Step, target: str | None
    ) -> None:
        meta = job["metadata"]
        status = job.get("status") or {}
        phase = (status.get("state") or {}).get("phase") or "Pending"
        version = int(status.get("version") or 0)
        retry = int(status.get("retryCount") or 0)
        full = step.primitive == KILL
        # The last retry keeps its finished pods for inspection (Volcano #1651).
        soft = step.soft or (full and retry >= spec.max_retry - 1)
        if step.bump:
            version += 1
        tally = Tally()
        for pod in self._job_pods(job):
            if target is not None and target not in (pod.task, pod.name):
                continue
            if pod.deleting:
                tally.terminating += 1
            elif soft and pod.phase in _FINISHED_PODS:
                # Kept, and counted: Volcano leaves them out, so a finished job's status
                # reads succeeded 0 after its next sync (#4616); the counts say what exists.
                tally.count(pod)
            elif await self._delete_pod(job, pod):
                tally.terminating += 1
        retry_count = retry + (1 if step.retry else 0)
        next_phase = step.next_phase(phase, tally.counts(), spec, retry_count)
        new = job_status(
            status, spec, tally, phase=next_phase, version=version, retry_count=retry_count
        )
        if full:
            # Volcano's OnJobDelete: every plugin drops its objects and its marker.
            ctx, plugins = self._plugins(job, spec)
            await self.owned.delete(ctx, plugins)
            new["controlledResources"] = {
                k: v
                for k, v in (status.get("controlledResources") or {}).items()
                if not k.startswith("plugin-")
            }
        await self._write_status(job, status, new, running_duration=True)
        if full:
            name = objects.podgroup_name(meta["name"], meta.get("uid", ""))
            group = self.podgroups.items.get(f"{meta['namespace']}/{name}")
            if group is not None:
                self._deleted_groups.add(group.uid)
            try:
                await self.client.delete(PODGROUPS, name, meta["namespace"])
                self.metrics.changes.labels("PodGroup", "deleted").inc()
            except ApiError as exc:
                if not exc.not_found:
                    raise

    async def _write_status(
        self,
        job: dict[str, Any],
        previous: dict[str, Any],
        status: dict[str, Any],
        *,
        running_duration: bool = False,
    ) -> None:
        if not changed(previous, status):
            await self._expire(job, previous)
            return
        now = _now()
        status = stamp(previous, status, now)
        if running_duration and job["metadata"].get("creationTimestamp"):
            seconds = _epoch(now) - _epoch(job["metadata"]["creationTimestamp"])
            status["runningDuration"] = f"{max(0, int(seconds))}s"
        body = {**job, "status": status}
        written = await self.client.replace(VCJOBS, body, subresource="status")
        self.metrics.changes.labels("Job", "status").inc()
        before = (previous.get("state") or {}).get("phase")
        after = status["state"]["phase"]
        if after != before and after in ("Completed", "Failed"):
            counter = (
                self.metrics.job_completed if after == "Completed" else self.metrics.job_failed
            )
            queue = (job.get("spec") or {}).get("queue") or "default"
            counter.labels(job["metadata"]["name"], queue).inc()
        await self._expire(written, status)

    async def _expire(self, job: dict[str, Any], status: dict[str, Any]) -> None:
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
            self.queue.add_after(f"{meta['namespace']}/{meta['name']}", left)
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

    def _event(self, job: dict[str, Any], type_: str, reason: str, note: str) -> None:
        meta = job["metadata"]
        self.recorder.record(
            {
                "apiVersion": VCJOBS.api_version,
                "kind": "Job",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta.get("uid", ""),
            },
            type_,
            reason,
            note,
        )
