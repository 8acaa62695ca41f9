"""kube-apiserver's table columns for StatefulSets, DaemonSets and Jobs (pkg/printers/
internalversion: printStatefulSet, printDaemonSet, printJob), so `kubectl get sts,ds,job` reads
as on a real cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sim.apiserver import tables as common


def _count(obj: dict[str, Any], section: str, field: str) -> int:
    return int((obj.get(section) or {}).get(field) or 0)


def _node_selector(obj: dict[str, Any]) -> str:
    selector = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "nodeSelector"
    ) or {}
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"


def _has_condition(job: dict[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def job_status(job: dict[str, Any]) -> str:
    if _has_condition(job, "Complete"):
        return "Complete"
    if _has_condition(job, "Failed"):
        return "Failed"
    if job["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if _has_condition(job, "FailureTarget"):
        return "FailureTarget"
    if _has_condition(job, "SuccessCriteriaMet"):
        return "SuccessCriteriaMet"
    if _has_condition(job, "Suspended"):
        return "Suspended"
    return "Running"


def job_completions(job: dict[str, Any]) -> str:
    spec = job.get("spec") or {}
    succeeded = _count(job, "status", "succeeded")
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _parse(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        return None


def job_duration(job: dict[str, Any]) -> str:
    status = job.get("status") or {}
    start = _parse(status.get("startTime") or "")
    if start is None:
        return ""
    end = _parse(status.get("completionTime") or "") or datetime.now(UTC)
    return common.human_duration(int((end - start).total_seconds()))


_STATEFULSET_COLUMNS: list[common.Column] = [
    (
        "Ready",
        "string",
        lambda o: f"{_count(o, 'status', 'readyReplicas')}/{_count(o, 'spec', 'replicas')}",
        0,
    ),
    common._AGE,
    ("Containers", "string", lambda o: common._containers(o, "name"), 1),
    ("Images", "string", lambda o: common._containers(o, "image"), 1),
]
_DAEMONSET_COLUMNS: list[common.Column] = [
    ("Desired", "integer", lambda o: _count(o, "status", "desiredNumberScheduled"), 0),
    ("Current", "integer", lambda o: _count(o, "status", "currentNumberScheduled"), 0),
    ("Ready", "integer", lambda o: _count(o, "status", "numberReady"), 0),
    ("Up-to-date", "integer", lambda o: _count(o, "status", "updatedNumberScheduled"), 0),
    ("Available", "integer", lambda o: _count(o, "status", "numberAvailable"), 0),
    ("Node Selector", "string", _node_selector, 0),
    common._AGE,
    ("Containers", "string", lambda o: common._containers(o, "name"), 1),
    ("Images", "string", lambda o: common._containers(o, "image"), 1),
    ("Selector", "string", common._selector, 1),
]
_JOB_COLUMNS: list[common.Column] = [
    ("Status", "string", job_status, 0),
    ("Completions", "string", job_completions, 0),
    ("Duration", "string", job_duration, 0),
    common._AGE,
    ("Containers", "string", lambda o: common._containers(o, "name"), 1),
    ("Images", "string", lambda o: common._containers(o, "image"), 1),
    ("Selector", "string", common._selector, 1),
]

WORKLOAD_COLUMNS: dict[tuple[str, str], list[common.Column]] = {
    ("apps", "StatefulSet"): _STATEFULSET_COLUMNS,
    ("apps", "DaemonSet"): _DAEMONSET_COLUMNS,
    ("batch", "Job"): _JOB_COLUMNS,
}
