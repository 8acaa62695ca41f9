"""Volcano's JobFlow controller (`jobflow-controller`), with what
Volcano's leaves out (`state`): probes, retries, an on-failure clean-up Job, and a
`jobRetainPolicy: retain` that also holds when the flow is deleted.

Each reconcile reads the flow from its informer, or the newer copy this controller's own last
write of it returned (`core.controller.fresh`, as Volcano's reads its lister; a write on a stale
copy conflicts and the flow is read from the API server once), its Jobs from the shared Job
informer (by Volcano's `volcano.sh/createdByJobFlow` label), decides (`state.decide`) and
applies: Jobs created from their JobTemplates, failed ones deleted to run again, events, the
status (`status`). Job names are deterministic and an existing Job is never created again, so a
restarted controller starts nothing twice.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from typing import Any

from pydantic import ValidationError

from core.api import keys
from core.api.flow import JobFlow
from core.controller.fresh import FreshRecords
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.kube.client import JOBFLOWS, VCJOBS, ApiError, KubeClient
from core.kube.events import NORMAL, EventRecorder
from core.records import FlowObjectRecord, JobRecord
from flow_controller.jobflow import state as fs
from flow_controller.jobflow.probes import FlowProber
from flow_controller.jobflow.writes import RETAIN_FINALIZER, FlowWriter

log = logging.getLogger("vulcan.controllers.jobflow")

JOBFLOW = "jobflow-controller"
PROBE_PERIOD = 2.0  # seconds between probes of a step that waits for one


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


def _flow_changed(old: FlowObjectRecord, new: FlowObjectRecord) -> bool:
    # Our own status writes change none of these: they cost no reconcile.
    return (old.generation, old.annotations, old.deleting, old.finalizers, old.phase) != (
        new.generation,
        new.annotations,
        new.deleting,
        new.finalizers,
        new.phase,
    )


def _job_changed(old: JobRecord, new: JobRecord) -> bool:
    # What the flow's status and its taskStatus probes read of a Job.
    return (old.phase, old.deleting, _watched(old)) != (new.phase, new.deleting, _watched(new))


class JobFlowReconciler(Reconciler[str]):
    name = JOBFLOW

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        probe_timeout: float = 1.0,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.prober = FlowProber(client, probe_timeout)
        self._skipped: set[tuple[str, str]] = set()  # (flow uid, step) already said

    def setup(self, watch: Builder[str]) -> None:
        self.watch = watch
        self.flows = watch.primary(
            JOBFLOWS, FlowObjectRecord, changed=_flow_changed, on_delete=self._flow_deleted
        )
        self.jobs = watch.related(VCJOBS, JobRecord, to_key=_owner_flow, changed=_job_changed)
        self.fresh = FreshRecords(self.flows)
        self.writes = FlowWriter(
            self.client, self.recorder, self.metrics, self.jobs, self.fresh.wrote
        )
        # A Job deleted to run again is going until the informer sees it go (`FlowWriter.deleted`).
        self.jobs.add_handlers(on_delete=lambda job: self.writes.deleted.discard(job.uid))

    def _flow_deleted(self, flow: FlowObjectRecord) -> None:
        self.writes.forget(flow.key)
        self.fresh.forget(flow.key)

    def reference(self, key: str) -> ObjectRef:
        namespace, name = key.split("/", 1)
        flow = self.flows.items.get(key)
        return JOBFLOWS.reference(name, namespace, flow.uid if flow else "")

    async def stop(self) -> None:
        await self.prober.close()

    async def reconcile(self, key: str) -> float | None:
        record = await self.fresh.get(key)
        if record is None:
            return None
        # A copy: the writes note the versions they return on it, and the informer's is shared.
        obj = copy.deepcopy(record.obj)
        try:
            return await self._reconcile(obj)
        except ApiError as exc:
            if exc.conflict:
                self.fresh.conflicted(key)
            raise

    async def _reconcile(self, obj: dict[str, Any]) -> float | None:
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        retain = (obj.get("spec") or {}).get("jobRetainPolicy") != "delete"
        if meta.get("deletionTimestamp"):
            if RETAIN_FINALIZER in finalizers:
                await self.writes.release_jobs(obj, orphan=retain)
            return None
        if retain and RETAIN_FINALIZER not in finalizers:
            await self.writes.set_finalizers(obj, [*finalizers, RETAIN_FINALIZER])
        elif not retain and RETAIN_FINALIZER in finalizers:
            await self.writes.set_finalizers(obj, [f for f in finalizers if f != RETAIN_FINALIZER])
        try:
            # The spec only: the status is this controller's own.
            flow = JobFlow.model_validate({**obj, "status": None})
        except ValidationError as exc:
            await self.writes.invalid(obj, [str(exc)])
            return None
        errors = fs.flow_errors(flow)
        if errors:
            await self.writes.invalid(obj, errors)
            return None
        return await self._sync(obj, flow)

    async def _sync(self, obj: dict[str, Any], flow: JobFlow) -> float | None:
        """One sync; the delay to the next probe when a step waits for one."""
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
            await self.writes.delete_jobs(obj, jobs)
            return None
        for step, attempt in decided.retry:
            await self.writes.retry(obj, step, attempt, jobs[step], retries_used)
        for step, why in decided.create:
            await self.writes.create_job(obj, step, why, retries_used.get(step, 0))
        if decided.on_failure:
            await self.writes.create_job(obj, decided.on_failure, "a job of the flow failed", 0)
        for step, why in decided.skipped:
            if (meta.get("uid", ""), step) not in self._skipped:
                self._skipped.add((meta.get("uid", ""), step))
                self.writes.event(
                    obj, NORMAL, "Skipped", f"job {fs.job_name(name, step)} will not start: {why}"
                )
        self.writes.finished_events(obj, status, jobs)
        if await self.writes.write_status(obj, flow, jobs, decided):
            self.watch.enqueue(f"{namespace}/{name}")
        return PROBE_PERIOD if decided.probes_wanted else None

    def _jobs_of(self, namespace: str, name: str) -> dict[str, fs.JobView]:
        label = f"{namespace}.{name}"
        prefix = f"{name}-"
        out: dict[str, fs.JobView] = {}
        deleted = self.writes.deleted
        for job in self.jobs.items.values():
            labels = job.obj["metadata"].get("labels") or {}
            if (
                job.namespace == namespace
                and labels.get(keys.CREATED_BY_JOB_FLOW) == label
                and job.name.startswith(prefix)
            ):
                view = fs.JobView.of(job.obj)
                if job.uid in deleted:  # deleted to run again: going, not failed for good
                    view = dataclasses.replace(view, deleting=True)
                out[job.name[len(prefix) :]] = view
        return out


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
