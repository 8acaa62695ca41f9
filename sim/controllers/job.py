"""kube-controller-manager's Job controller (batch/v1), as the embedded cluster needs it.

A Job keeps `min(parallelism, completions - succeeded)` active pods (parallelism 1 and
completions 1 when neither is set; without `completions` it is a work queue: pods run until
one succeeds, then no new ones start). Its pods are made from the template (`generateName:
<job>-`, with the labels kube-apiserver adds to a Job's template, `batch.kubernetes.io/
controller-uid`, `batch.kubernetes.io/job-name`, `controller-uid` and `job-name`, and a
controller reference). A pod counts as failed when it ends `Failed` (the hollow kubelet ends it
so for a non-zero exit code, `vulcan.sh/sim-exit-code`, with `restartPolicy: Never`), and each
container restart of an `OnFailure` pod counts too; more failures than `backoffLimit` (6 by
default) fail the Job (`BackoffLimitExceeded`), as does running longer than
`activeDeadlineSeconds` (`DeadlineExceeded`). A failed pod is replaced after Kubernetes' backoff
(10 s doubling per failure, at most 6 min). A suspended Job (`spec.suspend`) deletes its active
pods. On success or failure the active pods are deleted, then the interim condition
(`SuccessCriteriaMet` / `FailureTarget`) is followed by the terminal one (`Complete` /
`Failed`), so `kubectl wait --for=condition=complete` returns as on a real cluster.

Counts are taken from the pods that exist (kube-controller-manager also keeps the pods with its
`batch.kubernetes.io/job-tracking` finalizer until counted; here nothing but a user deletes a
finished pod early). `Indexed` completion mode, success and pod failure policies are not modelled.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core.kube.client import PODS, ApiError, KubeClient, Resource
from core.kube.events import NORMAL, WARNING
from core.timestamps import parse_time
from sim.apiserver.selectors import label_selector_from_dict
from sim.controllers.expectations import Expectations
from sim.controllers.replicaset import PodView, delete_pod
from sim.controllers.runtime import (
    KeyedController,
    ObjectRecord,
    now_rfc3339,
    owner_reference,
)

JOBS = Resource("batch", "v1", "jobs", True, "Job")
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
BASE_BACKOFF = 10.0
MAX_BACKOFF = 360.0


class JobPodView(PodView):
    """A pod as the Job controller reads it: PodView plus its containers' restarts."""

    __slots__ = ("finished_at", "restarts")

    def __init__(self, obj: dict[str, Any]) -> None:
        super().__init__(obj)
        statuses = (obj.get("status") or {}).get("containerStatuses") or ()
        self.restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
        finished = [
            ((s.get("state") or {}).get("terminated") or {}).get("finishedAt") or ""
            for s in statuses
        ]
        self.finished_at = max(finished, default="")


def job_labels(job: dict[str, Any]) -> dict[str, str]:
    meta = job["metadata"]
    return {
        CONTROLLER_UID: meta["uid"],
        JOB_NAME: meta["name"],
        "controller-uid": meta["uid"],
        "job-name": meta["name"],
    }


def _condition(job: dict[str, Any], type_: str) -> bool:
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_ and condition.get("status") == "True":
            return True
    return False


def _target(spec: dict[str, Any]) -> tuple[int, int | None]:
    """(parallelism, completions) with the API server's defaults."""
    parallelism = spec.get("parallelism")
    completions = spec.get("completions")
    if completions is None and parallelism is None:
        completions = 1
    return (1 if parallelism is None else int(parallelism)), (
        None if completions is None else int(completions)
    )


class JobController(KeyedController):
    name = "job-controller"

    def __init__(self, client: KubeClient, *, base_backoff: float = BASE_BACKOFF) -> None:
        super().__init__(client)
        self.base_backoff = base_backoff
        self.expectations = Expectations()
        self.jobs = self.informer(JOBS, ObjectRecord, lambda r: self.queue.add(r.key))
        self.pods = self.informer(
            PODS, JobPodView, self._pod_changed, label_selector=CONTROLLER_UID
        )
        self._pods_of: dict[str, set[str]] = {}
        self.pods.add_handlers(self._index, self._reindex, self._drop)

    def _pod_changed(self, pod: PodView) -> None:
        if pod.owner is not None and pod.owner[0] == JOBS.kind:
            self.queue.add(f"{pod.namespace}/{pod.owner[1]}")

    def _index(self, pod: PodView) -> None:
        if pod.owner is not None and pod.owner[0] == JOBS.kind:
            self._pods_of.setdefault(pod.owner[2], set()).add(pod.key)
            self.expectations.created(f"{pod.namespace}/{pod.owner[1]}")

    def _reindex(self, old: PodView, new: PodView) -> None:
        if old.owner != new.owner:
            self._drop(old)
            self._index(new)

    def _drop(self, pod: PodView) -> None:
        if pod.owner is not None:
            keys = self._pods_of.get(pod.owner[2])
            if keys is not None:
                keys.discard(pod.key)
                if not keys:
                    del self._pods_of[pod.owner[2]]
            self.expectations.deleted(f"{pod.namespace}/{pod.owner[1]}", pod.key)

    def controlled_pods(self, job: dict[str, Any]) -> list[JobPodView]:
        selector = (job.get("spec") or {}).get("selector")
        match = label_selector_from_dict(selector or {"matchLabels": {CONTROLLER_UID: ""}})
        out = []
        for key in self._pods_of.get(job["metadata"]["uid"], ()):
            pod = self.pods.items.get(key)
            if pod is not None and (selector is None or match.matches(pod.labels)):
                out.append(pod)
        return out

    # ------------------------------------------------------------------ sync

    async def sync(self, key: str) -> None:
        record = self.jobs.items.get(key)
        if record is None:
            self.expectations.forget(key)
            return
        job = record.obj
        if job["metadata"].get("deletionTimestamp"):
            return
        if _condition(job, "Complete") or _condition(job, "Failed"):
            return
        spec = job.get("spec") or {}
        pods = self.controlled_pods(job)
        active = [p for p in pods if p.active]
        terminating = [p for p in pods if p.deleting and p.phase not in ("Succeeded", "Failed")]
        succeeded = sum(1 for p in pods if p.phase == "Succeeded")
        failed_pods = [p for p in pods if p.phase == "Failed"]
        failed = len(failed_pods)
        restart_policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
        if restart_policy == "OnFailure":
            failed += sum(p.restarts for p in active)
        parallelism, completions = _target(spec)
        status = dict(job.get("status") or {})
        start = status.get("startTime")
        suspended = bool(spec.get("suspend"))
        if start is None and not suspended:
            start = now_rfc3339()
        outcome = self._outcome(job, spec, succeeded, failed, active, completions, start)
        if outcome is not None or suspended:
            await self._delete(job, active)
            active = []
        elif self.expectations.satisfied(key):
            active = await self._manage(
                job, key, active, parallelism, completions, succeeded, failed_pods
            )
        await self._write_status(
            job, start, active, terminating, succeeded, failed, outcome, suspended
        )

    def _outcome(
        self,
        job: dict[str, Any],
        spec: dict[str, Any],
        succeeded: int,
        failed: int,
        active: list[JobPodView],
        completions: int | None,
        start: str | None,
    ) -> tuple[str, str, str] | None:
        """(interim and terminal condition types' outcome: `Complete` or `Failed`, reason,
        message) once the Job is decided."""
        if completions is not None and succeeded >= completions:
            return "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
        if completions is None and succeeded > 0 and not active:
            return "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
        if failed > int(spec.get("backoffLimit", 6)):
            return "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        deadline = spec.get("activeDeadlineSeconds")
        began = parse_time(start) if start else None
        if deadline is not None and began is not None:
            left = began.timestamp() + int(deadline) - time.time()
            if left <= 0:
                return "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
            meta = job["metadata"]
            self.queue.add_after(f"{meta['namespace']}/{meta['name']}", left + 0.05)
        return None

    async def _manage(
        self,
        job: dict[str, Any],
        key: str,
        active: list[JobPodView],
        parallelism: int,
        completions: int | None,
        succeeded: int,
        failed_pods: list[JobPodView],
    ) -> list[JobPodView]:
        if completions is None:
            want = parallelism if succeeded == 0 else len(active)
        else:
            want = min(parallelism, completions - succeeded)
        want = max(want, 0)
        if len(active) > want:
            doomed = sorted(active, key=PodView.deletion_rank)[: len(active) - want]
            await self._delete(job, doomed)
            return [p for p in active if p not in doomed]
        missing = want - len(active)
        if missing <= 0:
            return active
        wait = self._backoff_left(len(failed_pods), failed_pods)
        if wait > 0:
            self.queue.add_after(key, wait + 0.05)
            return active
        self.expectations.expect(key, adds=missing)
        results = await asyncio.gather(
            *(self._create_pod(job) for _ in range(missing)), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        for _ in failures:
            self.expectations.created(key)
        if failures:
            raise failures[0]
        return active

    def _backoff_left(self, failures: int, failed_pods: list[JobPodView]) -> float:
        """Seconds until a failed pod may be replaced (10 s doubling per failure, 6 min cap),
        counted from the last failure."""
        if failures == 0:
            return 0.0
        delay = min(self.base_backoff * 2 ** (failures - 1), MAX_BACKOFF)
        last = max((p.finished_at for p in failed_pods), default="")
        when = parse_time(last) if last else None
        if when is None:
            return 0.0
        return when.timestamp() + delay - time.time()

    async def _create_pod(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        template = (job.get("spec") or {}).get("template") or {}
        template_meta = template.get("metadata") or {}
        pod_meta: dict[str, Any] = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": {**(template_meta.get("labels") or {}), **job_labels(job)},
            "ownerReferences": [owner_reference(JOBS, job)],
        }
        if template_meta.get("annotations"):
            pod_meta["annotations"] = template_meta["annotations"]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template["spec"]}
        try:
            pod = await self.create(PODS, body, meta["namespace"])
        except ApiError as exc:
            self.recorder.record(_ref(job), WARNING, "FailedCreate", f"Error creating: {exc}")
            raise
        self.recorder.record(
            _ref(job), NORMAL, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"
        )

    async def _delete(self, job: dict[str, Any], pods: list[JobPodView]) -> None:
        for pod in pods:
            if not await delete_pod(self.client, pod):
                continue
            self.recorder.record(_ref(job), NORMAL, "SuccessfulDelete", f"Deleted pod: {pod.name}")

    # ------------------------------------------------------------------ status

    async def _write_status(
        self,
        job: dict[str, Any],
        start: str | None,
        active: list[JobPodView],
        terminating: list[JobPodView],
        succeeded: int,
        failed: int,
        outcome: tuple[str, str, str] | None,
        suspended: bool,
    ) -> None:
        meta = job["metadata"]
        old = job.get("status") or {}
        conditions = [dict(c) for c in old.get("conditions") or ()]
        now = now_rfc3339()
        status: dict[str, Any] = {
            "startTime": start,
            "active": len(active) or None,
            "ready": sum(1 for p in active if p.ready_since is not None),
            "succeeded": succeeded or None,
            "failed": failed or None,
            "terminating": len(terminating),
            "uncountedTerminatedPods": {},
        }
        _set_condition(conditions, "Suspended", suspended, "JobSuspended", "Job suspended", now)
        if outcome is not None:
            terminal, reason, message = outcome
            interim = "SuccessCriteriaMet" if terminal == "Complete" else "FailureTarget"
            _set_condition(conditions, interim, True, reason, message, now)
            if not active and not terminating:
                _set_condition(conditions, terminal, True, reason, message, now)
                if terminal == "Complete":
                    status["completionTime"] = now
                self.recorder.record(
                    _ref(job),
                    NORMAL if terminal == "Complete" else WARNING,
                    "Completed" if terminal == "Complete" else reason,
                    "Job completed" if terminal == "Complete" else message,
                )
        status["conditions"] = conditions or None
        current = {k: old.get(k) for k in status}
        if current != status:
            await self.patch(
                JOBS, meta["name"], {"status": status}, meta["namespace"], subresource="status"
            )


def _set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    on: bool,
    reason: str,
    message: str,
    now: str,
) -> None:
    existing = next((c for c in conditions if c.get("type") == type_), None)
    if existing is None:
        if on:
            conditions.append(
                {
                    "type": type_,
                    "status": "True",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }
            )
        return
    status = "True" if on else "False"
    if existing.get("status") != status:
        existing.update(
            status=status, lastProbeTime=now, lastTransitionTime=now, reason=reason, message=message
        )


def _ref(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return {
        "apiVersion": JOBS.api_version,
        "kind": JOBS.kind,
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
