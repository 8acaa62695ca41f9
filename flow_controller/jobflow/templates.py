"""Volcano's JobTemplate controller (`jobtemplate-controller`; volcano.md §5.2): a template's
`status.jobDependsOnList` (Volcano's name) lists the Jobs made from it, found by their
`volcano.sh/createdByJobTemplate: <namespace>.<template>` label."""

from __future__ import annotations

import logging

from core.api import keys
from core.controller.informers import SharedInformers
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy, run_reconciler, warn_given_up
from core.kube.client import JOBTEMPLATES, VCJOBS, ApiError, KubeClient
from core.kube.events import EventRecorder
from core.kube.workqueue import WorkQueue
from core.records import FlowObjectRecord, JobRecord

log = logging.getLogger("vulcan.controllers.jobtemplate")

JOBTEMPLATE = "jobtemplate-controller"


def _template_of(job: JobRecord) -> str | None:
    """`namespace/name` of the template a Job was made from (Volcano: the label splits on `.`
    into exactly two parts)."""
    value = (job.obj["metadata"].get("labels") or {}).get(keys.CREATED_BY_JOB_TEMPLATE, "")
    parts = value.split(".")
    return f"{parts[0]}/{parts[1]}" if len(parts) == 2 and all(parts) else None


class JobTemplateController:
    name = JOBTEMPLATE

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        retries: RetryPolicy,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.retries = retries
        self.templates = informers.get(JOBTEMPLATES, FlowObjectRecord)
        self.jobs = informers.get(VCJOBS, JobRecord)
        self.queue: WorkQueue[str] = WorkQueue(
            "jobtemplates", base_delay=retries.base, max_delay=retries.max_delay
        )
        self.templates.add_handlers(on_add=lambda t: self.queue.add(t.key))
        self.jobs.add_handlers(on_add=self._job_added, on_delete=self._job_added)

    def _job_added(self, job: JobRecord) -> None:
        key = _template_of(job)
        if key is not None:
            self.queue.add(key)

    async def run(self) -> None:
        await run_reconciler(
            self.queue, JOBTEMPLATE, 1, self.reconcile, self.metrics, self.retries, self._give_up
        )

    def _give_up(self, key: str, exc: BaseException) -> None:
        namespace, name = key.split("/", 1)
        template = self.templates.items.get(key)
        ref = JOBTEMPLATES.reference(name, namespace, template.uid if template else "")
        warn_given_up(self.recorder, ref, f"jobtemplate {key}", exc)

    async def reconcile(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        label = f"{namespace}.{name}"
        made = sorted(
            job.name
            for job in self.jobs.items.values()
            if job.namespace == namespace
            and (job.obj["metadata"].get("labels") or {}).get(keys.CREATED_BY_JOB_TEMPLATE) == label
            and not job.deleting
        )
        try:
            template = await self.client.get(JOBTEMPLATES, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        status = template.get("status") or {}
        if (status.get("jobDependsOnList") or []) == made:
            return
        await self.client.replace(
            JOBTEMPLATES, {**template, "status": {**status, "jobDependsOnList": made}}, "status"
        )
        self.metrics.changes.labels("JobTemplate", "status").inc()
