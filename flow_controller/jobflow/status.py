"""A JobFlow's `status` as Volcano computes it (`getAllJobStatus`), from
the Jobs the flow created: Jobs by phase, one `jobStatusList` entry per Job with its running
histories, and `conditions` per Job. Pure: the controller writes what this returns."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from flow_controller.jobflow.state import JobView

# Job phase -> the status list it is reported in. Volcano reports Completing and Terminating
# Jobs in no list (#4134); vulcan counts them as running and terminated.
_LISTS = {
    "Pending": "pendingJobs",
    "Running": "runningJobs",
    "Completing": "runningJobs",
    "Completed": "completedJobs",
    "Failed": "failedJobs",
    "Terminated": "terminatedJobs",
    "Terminating": "terminatedJobs",
}
_LIST_NAMES = (
    "pendingJobs",
    "runningJobs",
    "failedJobs",
    "completedJobs",
    "terminatedJobs",
    "unKnowJobs",
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _seconds(duration: str) -> float | None:
    """A Go duration (`1h2m3s`, `45s`) in seconds; None if it is not one."""
    parts = _DURATION.findall(duration or "")
    if not parts:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _plus(stamp: str, duration: str) -> str | None:
    seconds = _seconds(duration)
    if not stamp or seconds is None:
        return None
    start = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return (start + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _histories(previous: Sequence[Mapping[str, Any]], phase: str, now: str) -> list[dict[str, Any]]:
    """Volcano's runningHistories: when the Job's phase differs from the last entry's, the last
    entry ends now and a new one starts now."""
    histories = [dict(h) for h in previous]
    if histories and histories[-1].get("state") == phase:
        return histories
    if histories:
        histories[-1]["endTimestamp"] = now
    histories.append({"startTimestamp": now, "state": phase})
    return histories


def flow_status(
    previous: Mapping[str, Any],
    jobs: Mapping[str, JobView],
    order: Sequence[str],
    phase: str,
    now: str,
) -> dict[str, Any]:
    """The new status: `jobs` by step name, listed in `order` (the flow's steps, then any
    clean-up Job); Jobs not created yet are absent, as in Volcano."""
    lists: dict[str, list[str]] = {name: [] for name in _LIST_NAMES}
    before = {e.get("name"): e for e in previous.get("jobStatusList") or ()}
    entries: list[dict[str, Any]] = []
    conditions: dict[str, Any] = {}
    for step in order:
        job = jobs.get(step)
        if job is None:
            continue
        lists[_LISTS.get(job.phase, "unKnowJobs")].append(job.name)
        entry: dict[str, Any] = {
            "name": job.name,
            "state": job.phase or None,
            "startTimestamp": job.created or None,
            "endTimestamp": _plus(job.created, job.running_duration),
            "restartCount": job.retry_count,
            "runningHistories": _histories(
                (before.get(job.name) or {}).get("runningHistories") or (),
                job.phase,
                now,
            ),
        }
        entries.append({k: v for k, v in entry.items() if v is not None})
        condition: dict[str, Any] = {"phase": job.phase or None, "createTime": job.created or None}
        if job.running_duration:
            condition["runningDuration"] = job.running_duration
        if job.task_status_count:
            condition["taskStatusCount"] = dict(job.task_status_count)
        conditions[job.name] = {k: v for k, v in condition.items() if v is not None}
    status: dict[str, Any] = {name: items for name, items in lists.items() if items}
    if entries:
        status["jobStatusList"] = entries
    if conditions:
        status["conditions"] = conditions
    status["state"] = {"phase": phase}
    return status


def same_status(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal but for the `runningHistories` stamps a write would only move."""
    return _strip(a) == _strip(b)


def _strip(status: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(status)
    out["jobStatusList"] = [
        {
            **e,
            "runningHistories": [h.get("state") for h in e.get("runningHistories") or ()],
        }
        for e in status.get("jobStatusList") or ()
    ]
    return out
