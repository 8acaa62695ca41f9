"""What the job controller hears, turned into requests: Job changes, pod phases (PodPending,
PodRunning, PodFailed with its exit code,
TaskCompleted, TaskFailed, PodEvicted), PodGroup phases (Unknown) and, through `commands`,
Commands. Requests are kept per job, in order, and the job's key is queued:
one job is never reconciled by two workers at once, and no event is lost to de-duplication."""

from __future__ import annotations

import logging
from typing import Any

from core.api import keys
from core.controller.runtime import Builder
from core.kube.client import PODGROUPS, PODS, VCJOBS
from core.records import JobRecord, PodGroupRecord, PodRecord
from flow_controller.job import state as js
from flow_controller.job.delays import DelayedActions
from flow_controller.job.partitions import pod_partition

log = logging.getLogger("vulcan.controllers.job")


class JobEvents:
    """The job controller's watches (on the runtime's builder) and the requests they make."""

    def __init__(
        self,
        watch: Builder[str],
    ) -> None:
        self.watch = watch
        self._requests: dict[str, list[js.Request]] = {}
        self._by_job: dict[str, set[str]] = {}  # job key -> its pods' keys
        self._pending_seen: dict[str, str] = {}  # PodGroup -> version warned about
        self.delays = DelayedActions(self.request)
        # The handlers queue the job through `request` (each event is kept as a request too).
        self.jobs = watch.watch(
            VCJOBS,
            JobRecord,
            on_add=self._job_added,
            on_update=self._job_updated,
            on_delete=self._job_deleted,
        )
        # Only pods Volcano's job controller made carry the job-name label.
        self.pods = watch.watch(
            PODS,
            PodRecord,
            on_add=self._pod_added,
            on_update=self._pod_updated,
            on_delete=self._pod_deleted,
            label_selector=keys.JOB_NAME,
        )
        self.podgroups = watch.watch(PODGROUPS, PodGroupRecord, on_update=self._group_updated)

    def stop(self) -> None:
        self.delays.forget_all()

    # ------------------------------------------------------------------ requests

    def request(self, job_key: str, request: js.Request) -> None:
        self._requests.setdefault(job_key, []).append(request)
        self.watch.enqueue(job_key)

    def take(self, job_key: str) -> list[js.Request]:
        return self._requests.pop(job_key, [])

    def put_back(self, job_key: str, requests: list[js.Request]) -> None:
        """Requests a failed reconcile did not finish go first next time."""
        self._requests[job_key] = requests + self._requests.get(job_key, [])

    def pods_of(self, namespace: str, name: str, uid: str) -> list[PodRecord]:
        """The pods the job controller made for this Job (its UID: not an older namesake's)."""
        pods = []
        for key in self._by_job.get(f"{namespace}/{name}", ()):
            pod = self.pods.items.get(key)
            if pod is not None and pod.owner is not None and pod.owner.uid == uid:
                pods.append(pod)
        return pods

    def note_pending(self, group_key: str, version: str) -> bool:
        """True the first time a PodGroup version is seen Pending (one warning each)."""
        if self._pending_seen.get(group_key) == version:
            return False
        self._pending_seen[group_key] = version
        return True

    # ------------------------------------------------------------------ jobs

    def _job_added(self, job: JobRecord) -> None:
        self.request(job.key, js.Request(js.OUT_OF_SYNC, job_uid=job.uid))

    def _job_updated(self, old: JobRecord, new: JobRecord) -> None:
        # Only a spec change or a phase change: our own status writes would loop otherwise.
        if old.obj.get("spec") != new.obj.get("spec") or old.phase != new.phase:
            self.request(new.key, js.Request(js.OUT_OF_SYNC, job_uid=new.uid))

    def _job_deleted(self, job: JobRecord) -> None:
        self.watch.forget(job.key)  # its TTL, say
        self._requests.pop(job.key, None)
        self.delays.forget(job.key)

    # ------------------------------------------------------------------ pods

    def _job_of(self, pod: PodRecord) -> str | None:
        owner = pod.owner
        if owner is None or owner.kind != "Job" or not pod.job_name or not pod.task:
            return None
        return f"{pod.namespace}/{owner.name}"

    def _pod_request(self, pod: PodRecord, event: str, exit_code: int | None = None) -> None:
        job = self._job_of(pod)
        if job is None:
            return
        if pod.out_of_sync:
            event = js.OUT_OF_SYNC
        self.delays.on_pod_event(job, pod.name, event)
        self.request(
            job,
            js.Request(
                event,
                task=pod.task or "",
                pod=pod.name,
                partition=pod_partition(pod),
                exit_code=exit_code,
                job_uid=pod.owner.uid if pod.owner else "",
                job_version=pod.job_version,
            ),
        )

    def _pod_added(self, pod: PodRecord) -> None:
        job = self._job_of(pod)
        if job is not None:
            self._by_job.setdefault(job, set()).add(pod.key)
        self._pod_request(pod, js.POD_PENDING)

    def _pod_updated(self, old: PodRecord, new: PodRecord) -> None:
        job = self._job_of(new)
        if job is None:
            return
        self._by_job.setdefault(job, set()).add(new.key)
        if new.phase == "Failed" and old.phase != "Failed":
            self._pod_request(new, js.POD_FAILED, new.exit_code)
        elif new.phase == "Succeeded" and old.phase != "Succeeded":
            self._pod_request(
                new, js.TASK_COMPLETED if self._task_done(job, new) else js.OUT_OF_SYNC
            )
        elif new.phase != old.phase and new.phase == "Running":
            self._pod_request(new, js.POD_RUNNING)
        elif new.phase != old.phase and new.phase == "Pending":
            self._pod_request(new, js.POD_PENDING)
        elif new.phase in ("Running", "Pending") and self._task_failed(job, new, old):
            self._pod_request(new, js.TASK_FAILED)
        else:
            self._pod_request(new, js.OUT_OF_SYNC)

    def _pod_deleted(self, pod: PodRecord) -> None:
        job = self._job_of(pod)
        if job is None:
            return
        members = self._by_job.get(job)
        if members is not None:
            members.discard(pod.key)
            if not members:
                del self._by_job[job]
        self._pod_request(pod, js.POD_EVICTED)

    def _task_spec(self, job_key: str, task: str) -> dict[str, Any] | None:
        job = self.jobs.items.get(job_key)
        tasks = ((job.obj.get("spec") or {}).get("tasks") or ()) if job is not None else ()
        return next((t for t in tasks if t.get("name") == task), None)

    def _task_pods(self, job_key: str, task: str) -> list[PodRecord]:
        pods = (self.pods.items.get(k) for k in self._by_job.get(job_key, ()))
        return [p for p in pods if p is not None and p.task == task]

    def _task_done(self, job_key: str, pod: PodRecord) -> bool:
        """Every replica of the pod's task Succeeded (Volcano's TaskCompleted)."""
        task = self._task_spec(job_key, pod.task)
        if task is None:
            return False
        done = sum(1 for p in self._task_pods(job_key, pod.task) if p.phase == "Succeeded")
        return done >= int(task.get("replicas") or 0)

    def _task_failed(self, job_key: str, new: PodRecord, old: PodRecord) -> bool:
        """The task's live pods restarted their containers `maxRetry` times in all."""
        if new.restarts <= old.restarts:
            return False
        task = self._task_spec(job_key, new.task)
        limit = int((task or {}).get("maxRetry") or 3)
        if limit < 0:
            return False
        live = [p for p in self._task_pods(job_key, new.task) if p.phase in ("Running", "Pending")]
        return sum(p.restarts for p in live) >= limit

    # ------------------------------------------------------------------ PodGroups

    def _group_updated(self, old: PodGroupRecord, new: PodGroupRecord) -> None:
        owner = new.owner
        if old.phase == new.phase or owner is None or owner.kind != "Job":
            return
        event = js.UNKNOWN if new.phase == "Unknown" else js.OUT_OF_SYNC
        self.request(f"{new.namespace}/{owner.name}", js.Request(event))
