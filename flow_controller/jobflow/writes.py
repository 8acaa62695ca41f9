"""The JobFlow controller's writes: Jobs created from their JobTemplates, failed ones deleted
to run again or released on the flow's deletion, the flow's finalizer, annotations and status,
its events and phase metrics."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from core.api import keys
from core.api.flow import JobFlow
from core.controller.metrics import ControllerMetrics
from core.kube.client import JOBFLOWS, JOBTEMPLATES, VCJOBS, ApiError, KubeClient
from core.kube.events import NORMAL, WARNING, EventRecorder
from core.kube.informer import Informer
from core.records import JobRecord
from flow_controller.jobflow import state as fs
from flow_controller.jobflow.status import flow_status, same_status

log = logging.getLogger("vulcan.controllers.jobflow")

# Held by a flow whose Jobs outlive it (jobRetainPolicy retain, Volcano's default): on deletion
# the controller releases the Jobs from the flow's ownership before the flow goes.
RETAIN_FINALIZER = "vulcan.sh/retain-jobs"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FlowWriter:
    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        jobs: Informer[JobRecord],
        wrote_flow: Callable[[dict[str, Any]], None],
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.jobs = jobs
        # Told what each write of a flow returned: the next reconcile decides on it until the
        # informer's copy is as new (`core.controller.fresh`).
        self.wrote_flow = wrote_flow
        # Jobs deleted to run again that the Job informer may list for a moment still: the
        # next sync must not take one for a failure the flow has no retry left for.
        self.deleted: set[str] = set()
        self._phases: dict[str, str] = {}  # flow key -> phase (the vulcan_jobflows gauge)

    def forget(self, key: str) -> None:
        self._phases.pop(key, None)
        self.count_phases()

    async def create_job(self, flow: dict[str, Any], step: str, why: str, attempt: int) -> None:
        meta = flow["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            template = await self.client.get(JOBTEMPLATES, step, namespace)
        except ApiError as exc:
            if exc.not_found:
                self.event(
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
            self.event(flow, WARNING, "FailedCreate", f"failed to create job {job_name}: {exc}")
            raise
        self.metrics.changes.labels("Job", "created").inc()
        again = f"; retry {attempt}" if attempt else ""
        self.event(flow, NORMAL, "Created", f"create a job named {job_name}! ({why}{again})")

    async def retry(
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
            self.wrote_flow(written)
        limit = fs.max_retries(meta.get("annotations") or {}, step)
        self.event(
            flow,
            NORMAL,
            "Retrying",
            f"job {job.name} {job.phase}: running it again (retry {attempt} of {limit})",
        )
        try:
            await self.client.delete(VCJOBS, job.name, meta["namespace"], propagation="Background")
        except ApiError as exc:
            if not exc.not_found:
                log.warning(
                    "could not delete a failed job to run it again",
                    extra={"job": f"{meta['namespace']}/{job.name}", "error": str(exc)},
                )
                return
        self.deleted.add(job.uid)

    async def delete_jobs(self, flow: dict[str, Any], jobs: dict[str, fs.JobView]) -> None:
        meta = flow["metadata"]
        for job in jobs.values():
            if job.deleting:
                continue
            try:
                await self.client.delete(VCJOBS, job.name, meta["namespace"])
            except ApiError as exc:
                if not exc.not_found:
                    raise
            self.event(flow, NORMAL, "Deleted", f"job {job.name} deleted (jobRetainPolicy delete)")

    async def release_jobs(self, flow: dict[str, Any], *, orphan: bool) -> None:
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
                self.event(
                    flow, NORMAL, "Retained", f"job {job.name} kept (jobRetainPolicy retain)"
                )
        finalizers = [f for f in meta.get("finalizers") or () if f != RETAIN_FINALIZER]
        await self.set_finalizers(flow, finalizers)

    async def set_finalizers(self, flow: dict[str, Any], finalizers: list[str]) -> None:
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
        self.wrote_flow(written)

    async def invalid(self, flow: dict[str, Any], errors: list[str]) -> None:
        """Admission's rules did not hold (a flow older than the webhook, or annotations no
        webhook checks): the flow fails with the reason instead of being retried."""
        reason = "; ".join(errors)
        status = flow.get("status") or {}
        if (status.get("state") or {}).get("phase") == fs.FAILED:
            return
        self.event(flow, WARNING, "InvalidFlow", reason)
        await self.mark_failed(flow, reason)
        written = await self.client.replace(
            JOBFLOWS, {**flow, "status": {**status, "state": {"phase": fs.FAILED}}}, "status"
        )
        self.wrote_flow(written)
        self.note_phase(flow, status, fs.FAILED)

    async def mark_failed(self, flow: dict[str, Any], reason: str) -> None:
        meta = flow["metadata"]
        written = await self.client.patch(
            JOBFLOWS,
            meta["name"],
            {"metadata": {"annotations": {fs.ANNOTATION_FAILURE_REASON: reason}}},
            meta["namespace"],
        )
        meta["resourceVersion"] = written["metadata"]["resourceVersion"]
        self.wrote_flow(written)

    async def write_status(
        self,
        flow: dict[str, Any],
        model: JobFlow,
        jobs: dict[str, fs.JobView],
        decided: fs.Decisions,
    ) -> bool:
        """Write the status if it changed; True when the phase moved (sync again)."""
        meta = flow["metadata"]
        previous = flow.get("status") or {}
        order = [s.name for s in model.spec.flows or ()]
        cleanup = (meta.get("annotations") or {}).get(fs.ANNOTATION_ON_FAILURE)
        if cleanup:
            order.append(cleanup)
        new = flow_status(previous, jobs, list(dict.fromkeys(order)), decided.phase, _now())
        if same_status(previous, new):
            return False
        before = (previous.get("state") or {}).get("phase") or fs.PENDING
        if decided.phase == fs.FAILED and before != fs.FAILED:
            await self.mark_failed(flow, decided.failure)
            self.event(flow, WARNING, "Failed", f"JobFlow failed: {decided.failure}")
        self.wrote_flow(await self.client.replace(JOBFLOWS, {**flow, "status": new}, "status"))
        self.metrics.changes.labels("JobFlow", "status").inc()
        self.note_phase(flow, previous, decided.phase)
        # Volcano's phase moves one step a sync (Pending -> Running -> Succeed): go on.
        return decided.phase != before

    def note_phase(self, flow: dict[str, Any], previous: dict[str, Any], phase: str) -> None:
        meta = flow["metadata"]
        before = (previous.get("state") or {}).get("phase")
        if phase != before:
            if phase == fs.SUCCEED:
                self.metrics.jobflow_succeed.labels(meta["namespace"]).inc()
            elif phase == fs.FAILED:
                self.metrics.jobflow_failed.labels(meta["namespace"]).inc()
        self._phases[f"{meta['namespace']}/{meta['name']}"] = phase
        self.count_phases()

    def count_phases(self) -> None:
        for phase in (fs.PENDING, fs.RUNNING, fs.SUCCEED, fs.FAILED, fs.TERMINATING):
            self.metrics.jobflows.labels(phase).set(
                sum(1 for p in self._phases.values() if p == phase)
            )

    def finished_events(
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
                self.event(flow, kind, "JobFinished", f"job {job.name} {job.phase}")

    def event(self, flow: dict[str, Any], type_: str, reason: str, note: str) -> None:
        meta = flow["metadata"]
        self.recorder.record(
            JOBFLOWS.reference(meta["name"], meta["namespace"], meta.get("uid", "")),
            type_,
            reason,
            note,
        )
