"""Volcano's JobTemplate controller (`jobtemplate-controller`): a template's
`status.jobDependsOnList` (Volcano's name) lists the Jobs made from it, found by their
`volcano.sh/createdByJobTemplate: <namespace>.<template>` label."""

from __future__ import annotations

import logging

from core.api import keys
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.kube.client import JOBTEMPLATES, VCJOBS, ApiError, KubeClient
from core.records import FlowObjectRecord, JobRecord

log = logging.getLogger("vulcan.controllers.jobtemplate")

JOBTEMPLATE = "jobtemplate-controller"


def _template_of(job: JobRecord) -> str | None:
    """`namespace/name` of the template a Job was made from (Volcano: the label splits on `.`
    into exactly two parts)."""
    value = (job.obj["metadata"].get("labels") or {}).get(keys.CREATED_BY_JOB_TEMPLATE, "")
    parts = value.split(".")
    return f"{parts[0]}/{parts[1]}" if len(parts) == 2 and all(parts) else None


def _never(old: object, new: object) -> bool:
    return False  # only adds and deletes change what a template lists


class JobTemplateReconciler(Reconciler[str]):
    name = JOBTEMPLATE

    def __init__(self, client: KubeClient, metrics: ControllerMetrics) -> None:
        self.client = client
        self.metrics = metrics

    def setup(self, watch: Builder[str]) -> None:
        self.templates = watch.primary(JOBTEMPLATES, FlowObjectRecord, changed=_never)
        self.jobs = watch.related(
            VCJOBS, JobRecord, to_key=_template_of, changed=_never, on_delete=True
        )

    def reference(self, key: str) -> ObjectRef:
        namespace, name = key.split("/", 1)
        template = self.templates.items.get(key)
        return JOBTEMPLATES.reference(name, namespace, template.uid if template else "")

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
