"""Volcano's JobFlow controller (`jobflow-controller`; volcano-controllers.md §8.3), with what
Volcano's leaves out (`state`): probes, retries, an on-failure clean-up Job, and a
`jobRetainPolicy: retain` that also holds when the flow is deleted.

Each reconcile reads the flow from the API server, its Jobs from the shared Job informer (by
Volcano's `volcano.sh/createdByJobFlow` label), decides (`state.decide`) and applies: Jobs
created from their JobTemplates, failed ones deleted to run again, events, the status
(`status`). Job names are deterministic and an existing Job is never created again, so a
restarted controller starts nothing twice.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from core.api import keys
from core.api.flow import JobFlow
from core.controller.informers import SharedInformers
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy, run_reconciler, warn_given_up
from core.kube.client import JOBFLOWS, JOBTEMPLATES, VCJOBS, ApiError, KubeClient
from core.kube.events import NORMAL, WARNING, EventRecorder
from core.kube.workqueue import WorkQueue
from core.records import FlowObjectRecord, JobRecord
from flow_controller.jobflow import state as fs
from flow_controller.jobflow.probes import FlowProber
from flow_controller.jobflow.status import flow_status, same_status

log = logging.getLogger("vulcan.controllers.jobflow")

JOBFLOW = "jobflow-controller"
# Held by a flow whose Jobs outlive it (jobRetainPolicy retain, Volcano's default): on deletion
# the controller releases the Jobs from the flow's ownership before the flow goes.
RETAIN_FINALIZER = "vulcan.sh/retain-jobs"
PROBE_PERIOD = 2.0  # seconds between probes of a step that waits for one


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _owner_flow(job: JobRecord) -> str | None:
    ref = next(
        (r for r in job.obj["metadata"].get("ownerReferences") or () if r.get("controller")),
        None,
    )
    if ref is None or ref.get("kind") != "JobFlow" or "volcano" not in ref.get("apiVersion", ""):
        return None
    return f"{job.namespace}/{ref.get('name')}"


def _watched(job: JobRecord) -> tuple[Any, ...]:
    status = job.obj.get("status") or {}
    return (status.get("taskStatusCount"), status.get("runningDuration"), status.get("retryCount"))


class JobFlowController:
    name = JOBFLOW

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        retries: RetryPolicy,
        probe_timeout: float = 1.0,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.retries = retries
        self.flows = informers.get(JOBFLOWS, FlowObjectRecord)
        self.jobs = informers.get(VCJOBS, JobRecord)
        self.queue: WorkQueue[str] = WorkQueue(
            "jobflows", base_delay=retries.base, max_delay=retries.max_delay
        )
        self.prober = FlowProber(client, probe_timeout)
        self._skipped: set[tuple[str, str]] = set()  # (flow uid, step) already said
        self._phases: dict[str, str] = {}  # flow key -> phase (the vulcan_jobflows gauge)
        self.flows.add_handlers(
            on_add=lambda f: self.queue.add(f.key),
            on_update=self._flow_updated,
            on_delete=self._flow_deleted,
        )
        self.jobs.add_handlers(
            on_add=self._job_changed, on_update=self._job_updated, on_delete=self._job_changed
        )

    # ------------------------------------------------------------------ events in

    def _flow_updated(self, old: FlowObjectRecord, new: FlowObjectRecord) -> None:
        # Our own status writes change none of these: they cost no reconcile.
        if (old.generation, old.annotations, old.deleting, old.finalizers, old.phase) != (
            new.generation,
            new.annotations,
            new.deleting,
            new.finalizers,
            new.phase,
        ):
            self.queue.add(new.key)

    def _flow_deleted(self, flow: FlowObjectRecord) -> None:
        self._phases.pop(flow.key, None)
        self._count_phases()

    def _job_changed(self, job: JobRecord) -> None:
        key = _owner_flow(job)
        if key is not None:
            self.queue.add(key)

    def _job_updated(self, old: JobRecord, new: JobRecord) -> None:
        # What the flow's status and its taskStatus probes read of a Job.
        if (old.phase, old.deleting, _watched(old)) != (new.phase, new.deleting, _watched(new)):
            self._job_changed(new)

    # ------------------------------------------------------------------ loop

    async def run(self) -> None:
        try:
            await run_reconciler(
                self.queue,
                JOBFLOW,
                1,  # Volcano runs one worker
                self.reconcile,
                self.metrics,
                self.retries,
                self._give_up,
            )
        finally:
            await self.prober.close()

    def _give_up(self, key: str, exc: BaseException) -> None:
        namespace, name = key.split("/", 1)
        flow = self.flows.items.get(key)
        ref = JOBFLOWS.reference(name, namespace, flow.uid if flow else "")
        warn_given_up(self.recorder, ref, key, exc)

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        try:
            obj = await self.client.get(JOBFLOWS, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        retain = (obj.get("spec") or {}).get("jobRetainPolicy") != "delete"
        if meta.get("deletionTimestamp"):
            if RETAIN_FINALIZER in finalizers:
                await self._release_jobs(obj, orphan=retain)
            return
        if retain and RETAIN_FINALIZER not in finalizers:
            await self._set_finalizers(obj, [*finalizers, RETAIN_FINALIZER])
        elif not retain and RETAIN_FINALIZER in finalizers:
            await self._set_finalizers(obj, [f for f in finalizers if f != RETAIN_FINALIZER])
        try:
            # The spec only: the status is this controller's own.
            flow = JobFlow.model_validate({**obj, "status": None})
        except ValidationError as exc:
            await self._invalid(obj, [str(exc)])
            return
        errors = fs.flow_errors(flow)
        if errors:
            await self._invalid(obj, errors)
            return
        await self._sync(obj, flow)

    async def _sync(self, obj: dict[str, Any], flow: JobFlow) -> None:
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        annotations = meta.get("annotations") or {}
        status = obj.get("status") or {}
        phase = (status.get("state") or {}).get("phase") or fs.PENDING
        jobs = self._jobs_of(namespace, name)
        retries_used = _retries_used(annotations)
        decided = fs.decide(name, flow.spec, annotations, phase, jobs, retries_used, {})
        if decided.probes_wanted:
            probes = {}
            steps = {s.name: s for s in flow.spec.flows or ()}
            for step in decided.probes_wanted:
                targets = [fs.job_name(name, t) for t in fs.targets_of(steps[step])]
                probes[step] = await self.prober.probe(namespace, steps[step], targets)
            decided = fs.decide(name, flow.spec, annotations, phase, jobs, retries_used, probes)
        if decided.delete_jobs:
            await self._delete_jobs(obj, jobs)
            return
        for step, attempt in decided.retry:
            await self._retry(obj, step, attempt, jobs[step], retries_used)
        for step, why in decided.create:
            await self._create_job(obj, step, why, retries_used.get(step, 0))
        if decided.on_failure:
            await self._create_job(obj, decided.on_failure, "a job of the flow failed", 0)
        for step, why in decided.skipped:
            if (meta.get("uid", ""), step) not in self._skipped:
                self._skipped.add((meta.get("uid", ""), step))
                self._event(
                    obj, NORMAL, "Skipped", f"job {fs.job_name(name, step)} will not start: {why}"
                )
        self._finished_events(obj, status, jobs)
        await self._write_status(obj, flow, jobs, decided)
        if decided.probes_wanted:
            self.queue.add_after(f"{namespace}/{name}", PROBE_PERIOD)

    def _jobs_of(self, namespace: str, name: str) -> dict[str, fs.JobView]:
        label = f"{namespace}.{name}"
        prefix = f"{name}-"
        out: dict[str, fs.JobView] = {}
        for job in self.jobs.items.values():
            labels = job.obj["metadata"].get("labels") or {}
            if (
                job.namespace == namespace
                and labels.get(keys.CREATED_BY_JOB_FLOW) == label
                and job.name.startswith(prefix)
            ):
                out[job.name[len(prefix) :]] = fs.JobView.of(job.obj)
        return out

    # ------------------------------------------------------------------ writes

    async def _create_job(self, flow: dict[str, Any], step: str, why: str, attempt: int) -> None:
        meta = flow["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            template = await self.client.get(JOBTEMPLATES, step, namespace)
        except ApiError as exc:
            if exc.not_found:
                self._event(
                    flow, WARNING, "TemplateNotFound", f"JobTemplate {namespace}/{step} not found"
                )
            raise
        job_name = fs.job_name(name, step)
        marks = {
            keys.CREATED_BY_JOB_TEMPLATE: f"{namespace}.{step}",
            keys.CREATED_BY_JOB_FLOW: f"{namespace}.{name}",
        }
        annotations = dict(marks)
        if attempt:
            annotations[fs.ANNOTATION_ATTEMPT] = str(attempt)
        body = {
            "apiVersion": VCJOBS.api_version,
            "kind": "Job",
            "metadata": {
                "name": job_name,
                "namespace": namespace,
                "labels": marks,
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": JOBFLOWS.api_version,
                        "kind": "JobFlow",
                        "name": name,
                        "uid": meta.get("uid", ""),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        try:
            await self.client.create(VCJOBS, body)
        except ApiError as exc:
            if exc.conflict:
                return  # made before; the informer had not seen it yet
            self._event(flow, WARNING, "FailedCreate", f"failed to create job {job_name}: {exc}")
            raise
        self.metrics.changes.labels("Job", "created").inc()
        again = f"; retry {attempt}" if attempt else ""
        self._event(flow, NORMAL, "Created", f"create a job named {job_name}! ({why}{again})")

    async def _retry(
        self,
        flow: dict[str, Any],
        step: str,
        attempt: int,
        job: fs.JobView,
        used: dict[str, int],
    ) -> None:
        """Record the retry on the flow first (a restart then neither forgets nor repeats it),
        then delete the failed Job; the next sync creates it again."""
        meta = flow["metadata"]
        if used.get(step, 0) < attempt:
            used[step] = attempt
            written = await self.client.patch(
                JOBFLOWS,
                meta["name"],
                {"metadata": {"annotations": {fs.ANNOTATION_RETRIES_USED: json.dumps(used)}}},
                meta["namespace"],
            )
            # The status written at the end of this sync goes on from this version.
            meta["resourceVersion"] = written["metadata"]["resourceVersion"]
        limit = fs.max_retries(meta.get("annotations") or {}, step)
        self._event(
            flow,
            NORMAL,
            "Retrying",
            f"job {job.name} {job.phase}: running it again (retry {attempt} of {limit})",
        )
        with contextlib.suppress(ApiError):
            await self.client.delete(VCJOBS, job.name, meta["namespace"], propagation="Background")

    async def _delete_jobs(self, flow: dict[str, Any], jobs: dict[str, fs.JobView]) -> None:
        meta = flow["metadata"]
        for job in jobs.values():
            if job.deleting:
                continue
            try:
                await self.client.delete(VCJOBS, job.name, meta["namespace"])
            except ApiError as exc:
                if not exc.not_found:
                    raise
            self._event(flow, NORMAL, "Deleted", f"job {job.name} deleted (jobRetainPolicy delete)")

    async def _release_jobs(self, flow: dict[str, Any], *, orphan: bool) -> None:
        """The flow is being deleted: with retain, its Jobs stop being owned by it (so the
        garbage collector keeps them); then the finalizer goes."""
        meta = flow["metadata"]
        uid = meta.get("uid", "")
        if orphan:
            for job in list(self.jobs.items.values()):
                refs = job.obj["metadata"].get("ownerReferences") or []
                if job.namespace != meta["namespace"] or not any(r.get("uid") == uid for r in refs):
                    continue
                kept = [r for r in refs if r.get("uid") != uid]
                await self.client.patch(
                    VCJOBS,
                    job.name,
                    {"metadata": {"ownerReferences": kept or None}},
                    job.namespace,
                )
                self._event(
                    flow, NORMAL, "Retained", f"job {job.name} kept (jobRetainPolicy retain)"
                )
        finalizers = [f for f in meta.get("finalizers") or () if f != RETAIN_FINALIZER]
        await self._set_finalizers(flow, finalizers)

    async def _set_finalizers(self, flow: dict[str, Any], finalizers: list[str]) -> None:
        meta = flow["metadata"]
        patch = {
            "metadata": {
                "finalizers": finalizers or None,
                "resourceVersion": meta["resourceVersion"],
            }
        }
        written = await self.client.patch(JOBFLOWS, meta["name"], patch, meta["namespace"])
        meta["resourceVersion"] = written["metadata"]["resourceVersion"]
        meta["finalizers"] = finalizers

    async def _invalid(self, flow: dict[str, Any], errors: list[str]) -> None:
        """Admission's rules did not hold (a flow older than the webhook, or annotations no
        webhook checks): the flow fails with the reason instead of being retried."""
        reason = "; ".join(errors)
        status = flow.get("status") or {}
        if (status.get("state") or {}).get("phase") == fs.FAILED:
            return
        self._event(flow, WARNING, "InvalidFlow", reason)
        await self._mark_failed(flow, reason)
        await self.client.replace(
            JOBFLOWS, {**flow, "status": {**status, "state": {"phase": fs.FAILED}}}, "status"
        )
        self._note_phase(flow, status, fs.FAILED)

    async def _mark_failed(self, flow: dict[str, Any], reason: str) -> None:
        meta = flow["metadata"]
        written = await self.client.patch(
            JOBFLOWS,
            meta["name"],
            {"metadata": {"annotations": {fs.ANNOTATION_FAILURE_REASON: reason}}},
            meta["namespace"],
        )
        meta["resourceVersion"] = written["metadata"]["resourceVersion"]

    async def _write_status(
        self,
        flow: dict[str, Any],
        model: JobFlow,
        jobs: dict[str, fs.JobView],
        decided: fs.Decisions,
    ) -> None:
        meta = flow["metadata"]
        previous = flow.get("status") or {}
        order = [s.name for s in model.spec.flows or ()]
        cleanup = (meta.get("annotations") or {}).get(fs.ANNOTATION_ON_FAILURE)
        if cleanup:
            order.append(cleanup)
        new = flow_status(previous, jobs, list(dict.fromkeys(order)), decided.phase, _now())
        if same_status(previous, new):
            return
        before = (previous.get("state") or {}).get("phase") or fs.PENDING
        if decided.phase == fs.FAILED and before != fs.FAILED:
            await self._mark_failed(flow, decided.failure)
            self._event(flow, WARNING, "Failed", f"JobFlow failed: {decided.failure}")
        await self.client.replace(JOBFLOWS, {**flow, "status": new}, "status")
        self.metrics.changes.labels("JobFlow", "status").inc()
        self._note_phase(flow, previous, decided.phase)
        if decided.phase != before:
            # Volcano's phase moves one step a sync (Pending -> Running -> Succeed): go on.
            self.queue.add(f"{meta['namespace']}/{meta['name']}")

    def _note_phase(self, flow: dict[str, Any], previous: dict[str, Any], phase: str) -> None:
        meta = flow["metadata"]
        before = (previous.get("state") or {}).get("phase")
        if phase != before:
            if phase == fs.SUCCEED:
                self.metrics.jobflow_succeed.labels(meta["namespace"]).inc()
            elif phase == fs.FAILED:
                self.metrics.jobflow_failed.labels(meta["namespace"]).inc()
        self._phases[f"{meta['namespace']}/{meta['name']}"] = phase
        self._count_phases()

    def _count_phases(self) -> None:
        for phase in (fs.PENDING, fs.RUNNING, fs.SUCCEED, fs.FAILED, fs.TERMINATING):
            self.metrics.jobflows.labels(phase).set(
                sum(1 for p in self._phases.values() if p == phase)
            )

    def _finished_events(
        self, flow: dict[str, Any], previous: dict[str, Any], jobs: dict[str, fs.JobView]
    ) -> None:
        """One event per Job reaching a final phase (the previous status says what was seen)."""
        seen = previous.get("conditions") or {}
        for job in jobs.values():
            if (
                job.phase in fs.JOB_FINISHED
                and (seen.get(job.name) or {}).get("phase") != job.phase
            ):
                kind = NORMAL if job.phase == fs.JOB_COMPLETED else WARNING
                self._event(flow, kind, "JobFinished", f"job {job.name} {job.phase}")

    def _event(self, flow: dict[str, Any], type_: str, reason: str, note: str) -> None:
        meta = flow["metadata"]
        self.recorder.record(
            JOBFLOWS.reference(meta["name"], meta["namespace"], meta.get("uid", "")),
            type_,
            reason,
            note,
        )


def _retries_used(annotations: dict[str, str]) -> dict[str, int]:
    try:
        data = json.loads(annotations.get(fs.ANNOTATION_RETRIES_USED) or "{}")
    except ValueError:
        return {}
    return (
        {str(k): int(v) for k, v in data.items() if isinstance(v, int)}
        if isinstance(data, dict)
        else {}
    )
