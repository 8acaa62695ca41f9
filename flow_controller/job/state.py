"""Volcano's Job state machine and lifecycle policies, as pure functions (Volcano's
pkg/controllers/job/state).

A request (an event about the job or one of its pods, or a Command's action) resolves to an
action through the job's and its tasks' `policies` (`resolve_action`); the job's current phase
turns the action into one of three primitives — sync the job, kill all its pods, or kill one
target (a task or a pod) — and says which phase follows once the primitive ran
(`plan_action`, `Step.next_phase`).

Deliberate departure from Volcano, where Volcano has a known bug: ResumeJob does not count as a
retry (Volcano counts it, so a job suspended and resumed `maxRetry` times ends Failed, #3067).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from core.api.batch import JobSpec, LifecyclePolicy

# Phases (Volcano's JobPhase).
PENDING = "Pending"
RUNNING = "Running"
RESTARTING = "Restarting"
ABORTING = "Aborting"
ABORTED = "Aborted"
COMPLETING = "Completing"
COMPLETED = "Completed"
TERMINATING = "Terminating"
TERMINATED = "Terminated"
FAILED = "Failed"
FINISHED = frozenset({COMPLETED, FAILED, TERMINATED})

# Actions (bus.volcano.sh/v1alpha1).
SYNC_JOB = "SyncJob"
RESTART_JOB = "RestartJob"
RESTART_TASK = "RestartTask"
RESTART_POD = "RestartPod"
RESTART_PARTITION = "RestartPartition"
ABORT_JOB = "AbortJob"
RESUME_JOB = "ResumeJob"
COMPLETE_JOB = "CompleteJob"
TERMINATE_JOB = "TerminateJob"
TARGETED = frozenset({RESTART_TASK, RESTART_POD, RESTART_PARTITION})

# Events.
ANY = "*"
POD_FAILED = "PodFailed"
POD_EVICTED = "PodEvicted"
POD_PENDING = "PodPending"
POD_RUNNING = "PodRunning"
UNKNOWN = "Unknown"
TASK_COMPLETED = "TaskCompleted"
TASK_FAILED = "TaskFailed"
OUT_OF_SYNC = "OutOfSync"
COMMAND_ISSUED = "CommandIssued"
INTERNAL_EVENTS = frozenset({OUT_OF_SYNC, COMMAND_ISSUED, POD_RUNNING})

# Primitives.
SYNC = "sync"
KILL = "kill"
KILL_TARGET = "kill-target"


@dataclass(frozen=True, slots=True)
class Request:
    """Something happened to a job (Volcano's apis.Request)."""

    event: str = OUT_OF_SYNC
    action: str | None = None  # set by a Command
    task: str = ""
    pod: str = ""
    partition: str = ""  # the pod's volcano.sh/partition-id (RestartPartition's target)
    exit_code: int | None = None
    job_uid: str = ""
    job_version: int = 0


@dataclass(frozen=True, slots=True)
class Counts:
    """The job's pods by phase (not counting terminating ones), after a primitive ran."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    terminating: int = 0
    task_succeeded: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Step:
    """What an action does in a phase: the primitive, whether finished pods are kept (`soft`),
    and how the next phase is decided (`rule`)."""

    primitive: str
    rule: str
    soft: bool = False
    retry: bool = False  # the transition counts as a retry (status.retryCount + 1)
    # A kill that starts a new incarnation of the job (status.version + 1). Volcano bumps the
    # version on every full kill, even the no-op kill each event runs on a finished or
    # aborting job; here only the kill that enters Restarting/Aborting/Completing/Terminating
    # does, so `version` counts incarnations.
    bump: bool = False

    def next_phase(self, phase: str, counts: Counts, spec: JobSpec, retry_count: int) -> str:
        return _RULES[self.rule](phase, counts, spec, retry_count)


def _policy_events(policy: LifecyclePolicy) -> list[str]:
    events = list(policy.events or ())
    if policy.event:
        events.append(policy.event)
    return events


def _match(policies: Sequence[LifecyclePolicy], request: Request) -> LifecyclePolicy | None:
    """The first policy whose events name the request's (or `*`) — a PodPending only matches
    a policy with a timeout — else the first whose exitCode is the request's."""
    for policy in policies:
        events = _policy_events(policy)
        if request.event in events or ANY in events:
            if request.event == POD_PENDING and not policy.timeout:
                continue
            return policy
    if request.exit_code is not None:
        for policy in policies:
            if policy.exit_code is not None and policy.exit_code == request.exit_code:
                return policy
    return None


def resolve_action(
    spec: JobSpec, request: Request, *, job_uid: str, job_version: int
) -> tuple[str, str | None]:
    """(action, timeout) for a request (Volcano's applyPolicies): a Command's action as is;
    internal events, requests about an older incarnation of the job and unmatched events sync;
    else the task's policies, then the job's."""
    if request.action:
        return request.action, None
    if request.event in INTERNAL_EVENTS:
        return SYNC_JOB, None
    if request.job_uid and request.job_uid != job_uid:
        return SYNC_JOB, None
    if request.job_version < job_version:
        return SYNC_JOB, None
    if request.task:
        task = next((t for t in spec.tasks or () if t.name == request.task), None)
        if task is not None and task.policies:
            policy = _match(task.policies, request)
            if policy is not None and policy.action:
                return policy.action, policy.timeout
    if spec.policies:
        policy = _match(spec.policies, request)
        if policy is not None and policy.action:
            return policy.action, policy.timeout
    return SYNC_JOB, None


def plan_action(phase: str, action: str) -> Step:
    """Volcano's Job state machine: what `action` does in
    `phase` ("" is Pending)."""
    phase = phase or PENDING
    if phase in (PENDING, RUNNING):
        if action == RESTART_JOB:
            return Step(KILL, "restart", retry=True, bump=True)
        if action in TARGETED:
            return Step(KILL_TARGET, "restart", retry=True)
        if action == ABORT_JOB:
            return Step(KILL, "to-aborting", soft=True, bump=True)
        if action == COMPLETE_JOB:
            return Step(KILL, "to-completing", soft=True, bump=True)
        if action == TERMINATE_JOB:
            return Step(KILL, "to-terminating", soft=True, bump=True)
        return Step(SYNC, "pending" if phase == PENDING else "running")
    if phase == RESTARTING:
        if action == SYNC_JOB:
            return Step(SYNC, "restarting")
        if action in TARGETED:
            return Step(KILL_TARGET, "restarting")
        return Step(KILL, "restarting")
    if phase in (ABORTING, ABORTED):
        if action == RESUME_JOB:
            # Not a retry: see the module docstring.
            return Step(KILL, "restart", soft=True, bump=True)
        return Step(KILL, "aborting" if phase == ABORTING else "stay", soft=True)
    if phase == COMPLETING:
        return Step(KILL, "completing", soft=True)
    if phase == TERMINATING:
        return Step(KILL, "terminating", soft=True)
    return Step(KILL, "stay", soft=True)  # Completed, Failed, Terminated


def total_replicas(spec: JobSpec) -> int:
    return sum(t.replicas for t in spec.tasks or ())


def _min_available(spec: JobSpec) -> int:
    return spec.min_available or 0


def _gone(counts: Counts) -> bool:
    return counts.pending == 0 and counts.running == 0 and counts.terminating == 0


def _pending(phase: str, counts: Counts, spec: JobSpec, retry: int) -> str:
    started = counts.running + counts.succeeded + counts.failed
    return RUNNING if started >= _min_available(spec) else PENDING


def running_outcome(counts: Counts, spec: JobSpec) -> str:
    """Volcano's Running completion logic."""
    replicas = total_replicas(spec)
    if replicas == 0:
        return RUNNING
    succeeded, failed = counts.succeeded, counts.failed
    if spec.min_success is not None and succeeded >= spec.min_success:
        return COMPLETED
    if succeeded + failed == replicas:
        tasks = spec.tasks or ()
        if _min_available(spec) >= sum(t.min_available or 0 for t in tasks):
            for task in tasks:
                if counts.task_succeeded.get(task.name or "", 0) < (task.min_available or 0):
                    return FAILED
        if spec.min_success is not None and succeeded < spec.min_success:
            return FAILED
        return COMPLETED if succeeded >= _min_available(spec) else FAILED
    if counts.pending > replicas - _min_available(spec):
        return PENDING
    return RUNNING


def _running(phase: str, counts: Counts, spec: JobSpec, retry: int) -> str:
    return running_outcome(counts, spec)


def _restarting(phase: str, counts: Counts, spec: JobSpec, retry: int) -> str:
    if retry >= spec.max_retry:
        return FAILED
    if total_replicas(spec) - counts.terminating >= _min_available(spec):
        return PENDING
    return RESTARTING


def _until_gone(then: str, meanwhile: str) -> object:
    def rule(phase: str, counts: Counts, spec: JobSpec, retry: int) -> str:
        return then if _gone(counts) else meanwhile

    return rule


_RULES = {
    "pending": _pending,
    "running": _running,
    "restart": lambda phase, counts, spec, retry: RESTARTING,
    "restarting": _restarting,
    "to-aborting": lambda phase, counts, spec, retry: ABORTING,
    "to-completing": lambda phase, counts, spec, retry: COMPLETING,
    "to-terminating": lambda phase, counts, spec, retry: TERMINATING,
    "aborting": _until_gone(ABORTED, ABORTING),
    "completing": _until_gone(COMPLETED, COMPLETING),
    "terminating": _until_gone(TERMINATED, TERMINATING),
    "stay": lambda phase, counts, spec, retry: phase,
}
