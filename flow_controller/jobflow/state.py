"""What a JobFlow should do next, as pure functions: which Jobs start now, which failed Job runs
again, which never will, the flow's status and phase. `controller` reads the inputs and applies
the decisions.

Volcano's rules, plus what its users ask for (its `probe` is accepted and ignored there):
- A flow step's Job `<flow>-<step>` starts when every `dependsOn.targets` Job is `Completed`,
  or, when the step has a `probe`, when every target Job is Running or Completed and the probe
  passes: each `taskStatusList` item (the target's task has a pod in that phase) here, each
  `httpGetList` / `tcpSocketList` item by the controller (`ProbeResult`).
- A Job that ends Failed or Terminated fails the flow (Volcano) unless the flow allows retries
  (`vulcan.sh/max-retries`, per step `vulcan.sh/max-retries.<step>`): then it is deleted and
  created again, up to that many times. With `vulcan.sh/on-failure: <template>`, a Job that
  fails for good starts the clean-up Job `<flow>-<template>`; the flow is Failed once it ends.
- Completing Jobs count as running and Terminating ones as terminated (Volcano lists neither).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.api.flow import Flow, JobFlow, JobFlowSpec
from core.api.validation import validate_jobflow

ANNOTATION_MAX_RETRIES = "vulcan.sh/max-retries"
ANNOTATION_ON_FAILURE = "vulcan.sh/on-failure"
# The retries each step has used ({"step": n}, JSON), written before a failed Job is deleted so
# a restarted controller neither forgets nor repeats one.
ANNOTATION_RETRIES_USED = "vulcan.sh/retries-used"
ANNOTATION_FAILURE_REASON = "vulcan.sh/failure-reason"
# On a Job the flow created again after a failure: which retry it is.
ANNOTATION_ATTEMPT = "vulcan.sh/flow-retry"

PENDING, RUNNING, SUCCEED, FAILED, TERMINATING = (
    "Pending",
    "Running",
    "Succeed",
    "Failed",
    "Terminating",
)
JOB_COMPLETED = "Completed"
JOB_DONE_BADLY = frozenset({"Failed", "Terminated"})
JOB_FINISHED = frozenset({"Completed", "Failed", "Terminated", "Aborted"})


@dataclass(frozen=True, slots=True)
class JobView:
    """A Job the flow created, as the flow reads it."""

    name: str
    phase: str
    created: str = ""
    running_duration: str = ""
    retry_count: int = 0
    task_status_count: Mapping[str, Any] = field(default_factory=dict)
    deleting: bool = False
    uid: str = ""

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> JobView:
        meta = job.get("metadata") or {}
        status = job.get("status") or {}
        return cls(
            name=meta.get("name", ""),
            # Not written yet by the job controller: a new Job is Pending.
            phase=(status.get("state") or {}).get("phase") or "Pending",
            created=meta.get("creationTimestamp", ""),
            running_duration=status.get("runningDuration") or "",
            retry_count=int(status.get("retryCount") or 0),
            task_status_count=status.get("taskStatusCount") or {},
            deleting=bool(meta.get("deletionTimestamp")),
            uid=meta.get("uid", ""),
        )


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """The controller's httpGet/tcpSocket checks for one step: passed, or why not."""

    passed: bool
    reason: str = ""


@dataclass(slots=True)
class Decisions:
    create: list[tuple[str, str]] = field(default_factory=list)  # (step, why now)
    retry: list[tuple[str, int]] = field(default_factory=list)  # (step, attempt it starts)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (step, why never)
    waiting: dict[str, str] = field(default_factory=dict)  # step -> what it waits for
    probes_wanted: list[str] = field(default_factory=list)  # steps whose probe must be run
    on_failure: str | None = None  # the clean-up template to start now
    delete_jobs: bool = False  # jobRetainPolicy delete, flow Succeed
    phase: str = PENDING
    failure: str = ""  # why the flow failed


def job_name(flow: str, step: str) -> str:
    return f"{flow}-{step}"


def max_retries(annotations: Mapping[str, str], step: str) -> int:
    text = annotations.get(
        f"{ANNOTATION_MAX_RETRIES}.{step}", annotations.get(ANNOTATION_MAX_RETRIES)
    )
    try:
        return max(0, int(text)) if text is not None else 0
    except ValueError:
        return 0


def flow_errors(flow: JobFlow) -> list[str]:
    """Why the flow cannot be run: the admission rules (an unknown target, a cycle) checked
    again here, since a flow may predate the webhook; and its vulcan.sh/ policy annotations."""
    errors = [str(e) for e in validate_jobflow(flow)]
    annotations = flow.metadata.annotations or {}
    cleanup = annotations.get(ANNOTATION_ON_FAILURE)
    if cleanup is not None and (
        not cleanup or cleanup in {step.name for step in flow.spec.flows or ()}
    ):
        errors.append(
            f"{ANNOTATION_ON_FAILURE}: {cleanup!r} must name a JobTemplate that is not a step "
            "of the flow"
        )
    for key, value in annotations.items():
        if key == ANNOTATION_MAX_RETRIES or key.startswith(ANNOTATION_MAX_RETRIES + "."):
            try:
                if int(value) < 0:
                    raise ValueError
            except ValueError:
                errors.append(f"{key}: must be a non-negative integer, got {value!r}")
    return errors


def _task_phase_reached(job: JobView, task: str | None, phase: str | None) -> bool:
    counts = (job.task_status_count.get(task or "") or {}).get("phase") or {}
    return int(counts.get(phase or "", 0) or 0) > 0


def targets_of(step: Flow) -> list[str]:
    return list(step.depends_on.targets or []) if step.depends_on else []


def has_network_probe(step: Flow) -> bool:
    probe = step.depends_on.probe if step.depends_on else None
    return bool(probe and (probe.http_get_list or probe.tcp_socket_list))


def decide(
    name: str,
    spec: JobFlowSpec,
    annotations: Mapping[str, str],
    phase: str,
    jobs: Mapping[str, JobView],
    retries_used: Mapping[str, int],
    probes: Mapping[str, ProbeResult],
) -> Decisions:
    """The next steps of flow `name` in `phase`, given its Jobs by step name."""
    out = Decisions(phase=phase or PENDING)
    steps: dict[str, Flow] = {}
    for step in spec.flows or ():
        steps.setdefault(step.name, step)  # duplicate names are one step (Volcano)
    if phase == SUCCEED:
        out.delete_jobs = spec.job_retain_policy == "delete"
        return out
    if phase in (FAILED, TERMINATING):
        return out  # final: nothing more starts (jobs already running go on)
    failed_for_good: list[str] = []
    for step_name in steps:
        job = jobs.get(step_name)
        if job is None or job.deleting or job.phase not in JOB_DONE_BADLY:
            continue
        used = retries_used.get(step_name, 0)
        if used < max_retries(annotations, step_name):
            out.retry.append((step_name, used + 1))
        else:
            failed_for_good.append(step_name)
    retrying = {s for s, _ in out.retry}
    if not failed_for_good:
        _plan_starts(name, steps, jobs, retrying, probes, out)
    else:
        _skip_dependents(steps, jobs, failed_for_good, out)
    out.phase, out.failure = _phase(
        name, phase, steps, jobs, retrying, failed_for_good, annotations
    )
    if failed_for_good and out.phase != FAILED:
        cleanup = annotations.get(ANNOTATION_ON_FAILURE)
        if cleanup and cleanup not in jobs:
            out.on_failure = cleanup
    return out


def _plan_starts(
    name: str,
    steps: Mapping[str, Flow],
    jobs: Mapping[str, JobView],
    retrying: set[str],
    probes: Mapping[str, ProbeResult],
    out: Decisions,
) -> None:
    for step_name, step in steps.items():
        if step_name in jobs:
            continue
        targets = targets_of(step)
        if not targets:
            out.create.append((step_name, "no dependencies"))
            continue
        probe = step.depends_on.probe if step.depends_on else None
        missing = [t for t in targets if t not in jobs or t in retrying]
        if missing:
            out.waiting[step_name] = f"waiting for {', '.join(missing)} to start"
            continue
        if probe is None:
            pending = [t for t in targets if jobs[t].phase != JOB_COMPLETED]
            if pending:
                out.waiting[step_name] = "waiting for " + ", ".join(
                    f"{t} to complete ({jobs[t].phase or 'Pending'})" for t in pending
                )
                continue
            out.create.append((step_name, f"{', '.join(targets)} completed"))
            continue
        not_up = [t for t in targets if jobs[t].phase not in ("Running", JOB_COMPLETED)]
        if not_up:
            out.waiting[step_name] = f"waiting for {', '.join(not_up)} to run"
            continue
        unmet = [
            f"task {item.task_name} of a target is not {item.phase}"
            for item in probe.task_status_list or ()
            if not any(_task_phase_reached(jobs[t], item.task_name, item.phase) for t in targets)
        ]
        if unmet:
            out.waiting[step_name] = "; ".join(unmet)
            continue
        if has_network_probe(step):
            result = probes.get(step_name)
            if result is None:
                out.probes_wanted.append(step_name)
                out.waiting[step_name] = "probing"
                continue
            if not result.passed:
                out.probes_wanted.append(step_name)
                out.waiting[step_name] = result.reason
                continue
        out.create.append((step_name, f"the probe of {', '.join(targets)} passed"))


def _skip_dependents(
    steps: Mapping[str, Flow], jobs: Mapping[str, JobView], failed: list[str], out: Decisions
) -> None:
    """Steps not started that can never start: they depend, directly or not, on a failed one."""
    doomed = set(failed)
    changed = True
    while changed:
        changed = False
        for step_name, step in steps.items():
            if step_name not in doomed and any(t in doomed for t in targets_of(step)):
                doomed.add(step_name)
                changed = True
    for step_name in steps:
        if step_name in doomed and step_name not in jobs:
            cause = next(t for t in targets_of(steps[step_name]) if t in doomed)
            out.skipped.append((step_name, f"its dependency {cause} failed"))


def _phase(
    name: str,
    phase: str,
    steps: Mapping[str, Flow],
    jobs: Mapping[str, JobView],
    retrying: set[str],
    failed_for_good: list[str],
    annotations: Mapping[str, str],
) -> tuple[str, str]:
    """Volcano's phase callbacks: Pending -> Running once a Job runs or completed; Succeed
    once every step's Job completed; Failed once one failed or was terminated (for good: not
    being retried, and after the on-failure clean-up Job, if any, ended)."""
    if failed_for_good:
        reason = f"job {job_name(name, failed_for_good[0])} {jobs[failed_for_good[0]].phase}"
        cleanup = annotations.get(ANNOTATION_ON_FAILURE)
        if cleanup:
            cleanup_job = jobs.get(cleanup)
            if cleanup_job is None or cleanup_job.phase not in JOB_FINISHED:
                return (RUNNING, "")
            reason += f"; clean-up {job_name(name, cleanup)} {cleanup_job.phase}"
        return FAILED, reason
    counted = {s: j for s, j in jobs.items() if s in steps and s not in retrying}
    if (
        steps
        and all(j.phase == JOB_COMPLETED for j in counted.values())
        and len(counted) == len(steps)
    ):
        return (SUCCEED if phase == RUNNING else RUNNING), ""
    if any(j.phase in ("Running", "Completing", JOB_COMPLETED) for j in counted.values()):
        return RUNNING, ""
    return (phase or PENDING), ""
