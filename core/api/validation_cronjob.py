"""Admission rules of a CronJob: Kubernetes' ValidateCronJob (apis/batch/validation) with its
messages, which Volcano's webhook (webhooks/admission/cronjobs) follows in substance:

- the name leaves room for the `-<minutes since epoch>` suffix of the Jobs (52 characters);
- `schedule` parses as a standard cron schedule (robfig/cron's error text), and carries no
  `TZ=`/`CRON_TZ=` prefix (Kubernetes refuses it on create in favour of `timeZone`);
- `timeZone` is non-empty, not `Local`, made of valid characters and known to the tz database;
- `jobTemplate.spec` is valid as a Volcano Job's spec (as defaulted by the Job webhook), so a
  broken template is refused when written rather than at the first scheduled run. Volcano's
  webhook does not check the template; Kubernetes' does (as a batch/v1 JobSpec): we follow
  Kubernetes.
"""

from __future__ import annotations

import re

from core.api.cron import CronError, load_zone, parse
from core.api.cronjob import CronJob
from core.api.defaults import default_job_spec
from core.api.errors import FieldError
from core.api.validation_common import ClusterView
from core.api.validation_job import validate_job_spec

MAX_NAME = 63 - 11  # DNS-1035 label length minus the Job name suffix (Kubernetes: 52)
_TZ_PART = re.compile(r"^[A-Za-z\.\-_0-9+]{1,14}$")
# A Job made from the template is named `<cronjob>-<minutes since epoch>` (8 digits until 2160).
_SUFFIX_EXAMPLE = "-" + "9" * 8


def schedule_errors(schedule: str) -> list[FieldError]:
    if not schedule:
        return [FieldError("spec.schedule", "Required value")]
    errors: list[FieldError] = []
    try:
        parse(schedule)
    except CronError as exc:
        errors.append(FieldError("spec.schedule", f'Invalid value: "{schedule}": {exc}'))
    if "TZ" in schedule:
        errors.append(
            FieldError(
                "spec.schedule",
                f'Invalid value: "{schedule}": cannot use TZ or CRON_TZ in schedule, '
                "use timeZone field instead",
            )
        )
    return errors


def time_zone_errors(time_zone: str | None) -> list[FieldError]:
    if time_zone is None:
        return []
    path, shown = "spec.timeZone", f'Invalid value: "{time_zone}"'
    if not time_zone:
        return [FieldError(path, f"{shown}: timeZone must be nil or non-empty string")]
    for part in time_zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.match(part):
            return [FieldError(path, f"{shown}: unknown time zone {time_zone}")]
    errors: list[FieldError] = []
    if time_zone.lower() == "local":
        errors.append(
            FieldError(
                path,
                f"{shown}: timeZone must be an explicit time zone as defined in "
                "https://www.iana.org/time-zones",
            )
        )
    try:
        load_zone(time_zone)
    except CronError as exc:
        errors.append(FieldError(path, f"{shown}: {exc}"))
    return errors


def validate_cronjob(cronjob: CronJob, view: ClusterView | None = None) -> list[FieldError]:
    """CREATE (and UPDATE) admission of a CronJob."""
    name = cronjob.metadata.name or ""
    errors: list[FieldError] = []
    if len(name) > MAX_NAME:
        errors.append(
            FieldError(
                "metadata.name",
                f'Invalid value: "{name}": must be no more than {MAX_NAME} characters',
            )
        )
    spec = cronjob.spec
    errors += schedule_errors(spec.schedule)
    errors += time_zone_errors(spec.time_zone)
    template = default_job_spec(spec.job_template.spec)
    for err in validate_job_spec(template, name + _SUFFIX_EXAMPLE, view):
        errors.append(FieldError(f"spec.jobTemplate.{err.field}", err.reason))
    return errors
