"""One reconcile of one CronJob (the steps of the controller's docstring): the status being
built, the Jobs it creates and deletes, its events; and the names and times it writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from core.api.cron import CronError, Schedule, load_zone, parse
from core.api.cronjob import SCHEDULED_TIMESTAMP, CronJob
from core.kube.client import CRONJOBS, VCJOBS, ApiError
from core.kube.events import NORMAL, WARNING
from core.records import JobRecord
from core.timestamps import parse_time
from flow_controller.cronjob.times import MANY_MISSED, most_recent_schedule_time
from flow_controller.cronjob.times import next_schedule_delay as _next_delay

if TYPE_CHECKING:
    from flow_controller.cronjob.controller import CronJobReconciler

FINISHED = ("Completed", "Failed", "Terminated")


def job_name(cronjob: str, scheduled: datetime) -> str:
    """`<cronjob>-<minutes since epoch>` (Kubernetes' and Volcano's getJobName)."""
    return f"{cronjob}-{int(scheduled.timestamp()) // 60}"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_rfc3339(moment: datetime) -> str:
    """Go's time.RFC3339 of a zoned time: `Z` for UTC, else the offset (`+08:00`)."""
    text = moment.strftime("%Y-%m-%dT%H:%M:%S%z")
    offset = text[19:]
    if offset in ("+0000", ""):
        return text[:19] + "Z"
    return f"{text[:19]}{offset[:3]}:{offset[3:]}"


def controller_uid(job: JobRecord) -> tuple[str, str] | None:
    for ref in job.obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "CronJob":
            return ref.get("name", ""), ref.get("uid", "")
    return None


def by_age(job: JobRecord) -> tuple[str, str]:
    return (job.obj["metadata"].get("creationTimestamp") or "", job.name)


class CronJobSync:
    """One reconcile of one CronJob: the status being built and the writes it needs."""

    def __init__(self, controller: CronJobReconciler, obj: dict[str, Any]) -> None:
        self.c = controller
        self.obj = obj
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.namespace: str = meta.get("namespace", "")
        self.uid: str = meta.get("uid", "")
        self.ref = CRONJOBS.reference(self.name, self.namespace, self.uid)
        self.original: dict[str, Any] = dict(obj.get("status") or {})
        self.active: list[dict[str, Any]] = list(self.original.get("active") or [])
        self.last_scheduled: str | None = self.original.get("lastScheduleTime")
        self.last_successful: str | None = self.original.get("lastSuccessfulTime")
        self.requeue_at: datetime | None = None

    def event(self, type_: str, reason: str, note: str) -> None:
        self.c.recorder.record(self.ref, type_, reason, note)

    def _active_uids(self) -> set[str]:
        return {a.get("uid", "") for a in self.active}

    def _drop_active(self, uid: str) -> None:
        self.active = [a for a in self.active if a.get("uid") != uid]

    async def run(self) -> None:
        try:
            cronjob = CronJob.model_validate(self.obj)
        except ValidationError as exc:
            self.event(WARNING, "InvalidCronJob", f"cannot read the CronJob: {exc}")
            return
        jobs = [
            j
            for j in self.c.jobs.items.values()
            if j.namespace == self.namespace and (controller_uid(j) or ("", ""))[1] == self.uid
        ]
        await self._account(jobs)
        spec = cronjob.spec
        try:
            if spec.suspend:
                return
            await self._schedule(spec.schedule, spec.time_zone, spec)
        finally:
            await self._trim_history(jobs, spec.successful_jobs_history_limit, "Completed")
            await self._trim_history(jobs, spec.failed_jobs_history_limit, "Failed", "Terminated")

    async def _account(self, jobs: list[JobRecord]) -> None:
        """Step 1: active list and lastSuccessfulTime from the Jobs."""
        children = {j.uid for j in jobs}
        active = self._active_uids()
        for job in jobs:
            finished = job.phase in FINISHED
            if job.uid in active and finished:
                self._drop_active(job.uid)
                self.event(
                    NORMAL, "SawCompletedJob", f"Saw completed job: {job.name}, status: {job.phase}"
                )
            elif (
                job.uid not in active
                and not finished
                and not job.deleting
                and job.uid not in self.c.deleted
            ):
                self.event(
                    WARNING,
                    "UnexpectedJob",
                    f"Saw a job that the controller did not create or forgot: {job.name}",
                )
            if job.phase == "Completed":
                state = (job.obj.get("status") or {}).get("state") or {}
                done = parse_time(state.get("lastTransitionTime"))
                known = parse_time(self.last_successful)
                if done is not None and (known is None or done > known):
                    self.last_successful = rfc3339(done)
        for ref in list(self.active):
            if ref.get("uid") in children:
                continue
            # Not in the informer yet, or gone: ask the API server (Kubernetes does too, so a
            # slow watch does not drop a Job just created).
            try:
                live = await self.c.client.get(VCJOBS, ref.get("name", ""), self.namespace)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                live = None
            if live is None or live["metadata"].get("uid") != ref.get("uid"):
                self.event(NORMAL, "MissingJob", f"Active job went missing: {ref.get('name')}")
                self._drop_active(ref.get("uid", ""))

    async def _schedule(self, text: str, time_zone: str | None, spec: Any) -> None:
        """Step 2: run the most recent unmet schedule time, if any; set requeue_at."""
        try:
            zone = load_zone(time_zone or "")
        except CronError as exc:
            self.event(WARNING, "UnknownTimeZone", f'invalid timeZone: "{time_zone}": {exc}')
            return
        try:
            schedule = parse(text, zone)
        except CronError as exc:
            self.event(WARNING, "UnparseableSchedule", f'unparseable schedule: "{text}" : {exc}')
            return
        now = self.c.clock.now()
        created = parse_time(self.obj["metadata"].get("creationTimestamp")) or now
        deadline = spec.starting_deadline_seconds
        try:
            recent = most_recent_schedule_time(
                created, parse_time(self.last_scheduled), deadline, now, schedule
            )
        except ValueError as exc:
            self.event(WARNING, "InvalidSchedule", f'invalid schedule: "{text}" : {exc}')
            return
        self._set_requeue(created, now, schedule)
        if recent.missed > MANY_MISSED:
            self.event(
                WARNING,
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds "
                "or check clock skew",
            )
        scheduled = recent.most_recent
        if scheduled is None:
            if deadline is not None:
                self._note_missed(created, now, schedule)
            return
        name = job_name(self.name, scheduled)
        if any(a.get("name") == name for a in self.active) or self.last_scheduled == rfc3339(
            scheduled
        ):
            return
        if spec.concurrency_policy == "Forbid" and self.active:
            self.event(
                NORMAL,
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy "
                "is Forbid",
            )
            return
        if spec.concurrency_policy == "Replace":
            for ref in list(self.active):
                await self._delete_job(ref.get("name", ""), ref.get("uid", ""))
        await self._create(name, scheduled, zone)
        self._set_requeue(created, now, schedule)

    def _set_requeue(self, created: datetime, now: datetime, schedule: Schedule) -> None:
        delay = _next_delay(created, parse_time(self.last_scheduled), now, schedule)
        self.requeue_at = None if delay is None else now + delay

    def _note_missed(self, created: datetime, now: datetime, schedule: Schedule) -> None:
        """A schedule time passed unmet and is now beyond the deadline: say so (Kubernetes'
        MissSchedule), since nothing else tells the user why no Job ran."""
        try:
            recent = most_recent_schedule_time(
                created, parse_time(self.last_scheduled), None, now, schedule
            )
        except ValueError:
            return
        if recent.most_recent is not None:
            when = recent.most_recent.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")
            self.event(WARNING, "MissSchedule", f"Missed scheduled time to start a job: {when}")

    async def _create(self, name: str, scheduled: datetime, zone: Any) -> None:
        template = self.obj["spec"]["jobTemplate"]
        meta = template.get("metadata") or {}
        annotations = dict(meta.get("annotations") or {})
        annotations[SCHEDULED_TIMESTAMP] = go_rfc3339(scheduled.astimezone(zone))
        body = {
            "apiVersion": VCJOBS.api_version,
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": dict(meta.get("labels") or {}),
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": CRONJOBS.api_version,
                        "kind": "CronJob",
                        "name": self.name,
                        "uid": self.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template.get("spec") or {},
        }
        try:
            job = await self.c.client.create(VCJOBS, body, self.namespace)
        except ApiError as exc:
            if exc.status != 409:
                self.event(WARNING, "FailedCreate", f"Error creating job: {exc.message}")
                raise
            job = await self._adopt(name)
            if job is None:
                return
        else:
            self.event(NORMAL, "SuccessfulCreate", f"Created job {name}")
            self.c.metrics.changes.labels("Job", "create").inc()
            created = parse_time(job["metadata"].get("creationTimestamp"))
            if created is not None:
                skew = (created - scheduled).total_seconds()
                self.c.metrics.cronjob_creation_skew.observe(max(0.0, skew))
        job_meta = job["metadata"]
        phase = ((job.get("status") or {}).get("state") or {}).get("phase")
        if phase not in FINISHED and job_meta.get("uid") not in self._active_uids():
            self.active.append(
                {
                    "apiVersion": VCJOBS.api_version,
                    "kind": "Job",
                    "name": name,
                    "namespace": self.namespace,
                    "uid": job_meta.get("uid", ""),
                    "resourceVersion": job_meta.get("resourceVersion", ""),
                }
            )
        self.last_scheduled = rfc3339(scheduled)

    async def _adopt(self, name: str) -> dict[str, Any] | None:
        """The Job exists already: ours (made before a restart lost the status write) is taken
        as this run; anyone else's is reported (Volcano's ForeignJob)."""
        # Gone again (not found): the error retries the sync, which creates it.
        job = await self.c.client.get(VCJOBS, name, self.namespace)
        owners = job["metadata"].get("ownerReferences") or []
        if any(o.get("controller") and o.get("uid") == self.uid for o in owners):
            return job  # type: ignore[no-any-return]
        owner = next((o.get("name") for o in owners if o.get("controller")), "none")
        self.event(
            WARNING,
            "ForeignJob",
            f"Job {name} exists but is not owned by this CronJob (current owner: {owner})",
        )
        return None

    async def _delete_job(self, name: str, uid: str) -> bool:
        try:
            await self.c.client.delete(
                VCJOBS, name, self.namespace, propagation="Background", uid=uid or None
            )
        except ApiError as exc:
            if not exc.not_found:
                self.event(WARNING, "FailedDelete", f'Error deleting job "{name}": {exc.message}')
                raise
        self._drop_active(uid)
        self.c.deleted.add(uid)
        self.event(NORMAL, "SuccessfulDelete", f"Deleted job {name}")
        self.c.metrics.changes.labels("Job", "delete").inc()
        return True

    async def _trim_history(self, jobs: list[JobRecord], limit: int, *phases: str) -> None:
        """Step 3: keep the newest `limit` finished Jobs of these phases."""
        finished = sorted((j for j in jobs if j.phase in phases and not j.deleting), key=by_age)
        for job in finished[: max(0, len(finished) - limit)]:
            await self._delete_job(job.name, job.uid)

    async def write_status(self) -> None:
        status: dict[str, Any] = {}
        if self.active != list(self.original.get("active") or []):
            status["active"] = self.active or None
        if self.last_scheduled != self.original.get("lastScheduleTime"):
            status["lastScheduleTime"] = self.last_scheduled
        if self.last_successful != self.original.get("lastSuccessfulTime"):
            status["lastSuccessfulTime"] = self.last_successful
        if not status:
            return
        written = await self.c.client.patch(
            CRONJOBS, self.name, {"status": status}, self.namespace, subresource="status"
        )
        self.c.fresh.wrote(written)
        self.c.metrics.changes.labels("CronJob", "status").inc()
