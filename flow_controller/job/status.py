"""A Job's pods counted as Volcano counts them, and the `status` written from the counts. Pure
functions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.api.batch import JobSpec
from core.records import PodRecord
from flow_controller.job.state import Counts

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


@dataclass(slots=True)
class Tally:
    """Pods by phase and by task as a sync or kill walks them."""

    terminating: int = 0
    phases: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    tasks: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, pod: PodRecord) -> None:
        phase = pod.phase if pod.phase in PHASES else "Unknown"
        self.phases[phase] += 1
        per_task = self.tasks.setdefault(pod.task or "", {})
        per_task[phase] = per_task.get(phase, 0) + 1

    def counts(self) -> Counts:
        return Counts(
            pending=self.phases["Pending"],
            running=self.phases["Running"],
            succeeded=self.phases["Succeeded"],
            failed=self.phases["Failed"],
            unknown=self.phases["Unknown"],
            terminating=self.terminating,
            task_succeeded={t: c.get("Succeeded", 0) for t, c in self.tasks.items()},
        )


def task_ready(pods: Iterable[PodRecord], minimum: int | None) -> bool:
    """A task is ready (for `dependsOn`) when at least its minAvailable pods are Succeeded or
    Running with every container ready."""
    if minimum is None:
        return True
    done = sum(
        1
        for pod in pods
        if not pod.deleting and (pod.phase == "Succeeded" or (pod.phase == "Running" and pod.ready))
    )
    return done >= minimum


def job_status(
    previous: Mapping[str, Any],
    spec: JobSpec,
    tally: Tally,
    *,
    phase: str,
    version: int,
    retry_count: int,
) -> dict[str, Any]:
    """The status fields a sync or kill computes (without the transition time and conditions,
    which `stamp` adds when something changed)."""
    counts = tally.counts()
    status: dict[str, Any] = {
        "state": {"phase": phase},
        "minAvailable": spec.min_available or 0,
        "pending": counts.pending,
        "running": counts.running,
        "succeeded": counts.succeeded,
        "failed": counts.failed,
        "terminating": counts.terminating,
        "unknown": counts.unknown,
        "version": version,
        "retryCount": retry_count,
        "taskStatusCount": {
            task: {"phase": {p: n for p, n in phases.items() if n}}
            for task, phases in sorted(tally.tasks.items())
        },
    }
    if previous.get("controlledResources"):
        status["controlledResources"] = previous["controlledResources"]
    return status


_STAMPS = ("state", "conditions", "runningDuration")


def changed(previous: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether `status` says anything `previous` does not (times and conditions aside)."""
    if (previous.get("state") or {}).get("phase") != status["state"]["phase"]:
        return True
    for name, value in status.items():
        if name in _STAMPS:
            continue
        if (previous.get(name) or None) != (value or None):
            return True
    return False


def stamp(previous: Mapping[str, Any], status: dict[str, Any], now: str) -> dict[str, Any]:
    """Volcano's write of a changed status: lastTransitionTime now, and a condition for the
    phase appended (replacing an older one of the same phase)."""
    phase = status["state"]["phase"]
    status["state"]["lastTransitionTime"] = now
    conditions = [c for c in previous.get("conditions") or () if c.get("status") != phase]
    conditions.append({"status": phase, "lastTransitionTime": now})
    status["conditions"] = conditions
    return status
