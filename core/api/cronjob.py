"""`batch.volcano.sh/v1alpha1` CronJob: Volcano's copy of Kubernetes' CronJob whose `jobTemplate`
is a Volcano Job (volcano-sh/apis pkg/apis/batch/v1alpha1/job.go, CronJobSpec/CronJobStatus).

Field constraints and CRD defaults are Volcano's (its generated CRD): `concurrencyPolicy`
defaults to Allow, `suspend` to false, the history limits to 3 and 1, and those and
`startingDeadlineSeconds` are >= 0. The schedule and time zone are checked in
`core.api.validation_cronjob`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.api.base import INT32_MAX, KubeModel, KubeObject, ObjectMeta, defaulted
from core.api.batch import UNIQUE_TASK_NAMES, JobSpec

CONCURRENCY_POLICIES: tuple[str, ...] = ("Allow", "Forbid", "Replace")

SCHEDULED_TIMESTAMP = "volcano.sh/cronjob-scheduled-timestamp"
"""Volcano's annotation on a Job made by a CronJob: its scheduled time, RFC 3339 in the CronJob's
time zone (Volcano's CronJobScheduledTimestampAnnotation)."""


class JobTemplateSpec(KubeModel):
    """The metadata (labels, annotations) and Volcano JobSpec of the Jobs a CronJob makes."""

    metadata: ObjectMeta | None = None
    spec: JobSpec = Field(default_factory=JobSpec, json_schema_extra=UNIQUE_TASK_NAMES)


class CronJobSpec(KubeModel):
    schedule: str
    time_zone: str | None = None
    starting_deadline_seconds: int | None = Field(default=None, ge=0)
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = defaulted("Allow")
    suspend: bool = defaulted(False)
    job_template: JobTemplateSpec
    successful_jobs_history_limit: int = defaulted(3, ge=0, le=INT32_MAX)
    failed_jobs_history_limit: int = defaulted(1, ge=0, le=INT32_MAX)


class ObjectReference(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class CronJobStatus(KubeModel):
    active: list[ObjectReference] | None = None
    last_schedule_time: str | None = None
    last_successful_time: str | None = None


class CronJob(KubeObject):
    spec: CronJobSpec
    status: CronJobStatus | None = None
