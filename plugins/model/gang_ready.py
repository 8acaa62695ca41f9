"""Volcano's gang readiness and validity over a `plugins.model.gang.GangView`: JobReady (`ready`:
per-role CheckTaskReady and IsReady), JobValid (`valid`: per-role
CheckTaskValid and ValidTaskNum >= minMember), how many members a placement still needs
(`members_needed`, `missing_task_members`) and the members it places, in order
(`pending_members`). Pure functions of the view."""

from __future__ import annotations

from core.records import PodRecord
from core.resources import ResourceVector
from plugins.model.gang import (
    OCCUPIED_STATUSES,
    PENDING,
    VALID_STATUSES,
    GangView,
    is_best_effort,
)

_BYTE_LIKE = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})

__all__ = [
    "members_needed",
    "missing_task_members",
    "pending_members",
    "ready",
    "task_ready",
    "task_valid",
    "valid",
]


def _task_occupied(view: GangView, task: str) -> int:
    # CheckTaskReady counts AllocatedStatus + Succeeded, plus pending best-effort members: they
    # need no resources, so Volcano treats them as placed already.
    return view.task_count(task, OCCUPIED_STATUSES) + view.task_pending_best_effort.get(task, 0)


def missing_task_members(view: GangView) -> dict[str, int]:
    """Per task role, how many more members must be placed before its minTaskMember is met
    (only roles that are short). Empty when Volcano skips per-role checks (`checks_tasks`)."""
    if not view.checks_tasks:
        return {}
    missing: dict[str, int] = {}
    for task, minimum in sorted(view.min_task_member.items()):
        short = minimum - _task_occupied(view, task)
        if short > 0:
            missing[task] = short
    return missing


def task_ready(view: GangView) -> bool:
    """Volcano's CheckTaskReady."""
    return not missing_task_members(view)


def members_needed(view: GangView) -> int:
    """How many more members must be placed for `IsReady` (ReadyTaskNum + pending best-effort
    >= minMember); 0 when the job-level minimum is already met."""
    return max(0, view.min_member - view.ready_num - view.pending_best_effort)


def ready(view: GangView) -> bool:
    """Volcano's gang JobReady: CheckTaskReady and IsReady (subgroups are not modelled)."""
    return task_ready(view) and members_needed(view) == 0


def task_valid(view: GangView) -> dict[str, tuple[int, int]]:
    """Volcano's CheckTaskValid failures: task -> (valid members, minTaskMember) for every role
    with too few valid members (Allocated*, Succeeded, Pipelined or Pending). Empty when valid."""
    if not view.checks_tasks:
        return {}
    short: dict[str, tuple[int, int]] = {}
    for task, minimum in sorted(view.min_task_member.items()):
        if minimum <= 0:
            continue
        have = view.task_count(task, VALID_STATUSES)
        if have < minimum:
            short[task] = (have, minimum)
    return short


def _not_counted(view: GangView) -> str:
    """Members that exist but are not valid, e.g. "1 Failed, 1 Releasing" (sorted by status)."""
    parts = [
        f"{n} {status}"
        for status, n in sorted(view.counts.items())
        if n and status not in VALID_STATUSES
    ]
    return ", ".join(parts)


def valid(view: GangView) -> tuple[bool, str]:
    """Volcano's gang JobValid: (True, "") or (False, reason).

    As in Volcano the per-role check comes first and, when it fails, decides alone
    (`NotEnoughPodsOfTask`): "gang team-a/train: task worker: 1/3 members created". Then the
    job-level check (`NotEnoughTasks`): "gang team-a/train: 3/4 members created". Members that
    exist but cannot count (Failed, Releasing, Unknown) are named in parentheses, because
    "3/4 created" would be misleading when five pods exist.
    """
    short_tasks = task_valid(view)
    if short_tasks:
        detail = "; ".join(
            f"task {task}: {have}/{minimum} members created"
            for task, (have, minimum) in short_tasks.items()
        )
        return False, f"gang {view.group_key}: {detail}"
    if view.valid_num < view.min_member:
        reason = f"gang {view.group_key}: {view.valid_num}/{view.min_member} members created"
        extra = _not_counted(view)
        if extra:
            reason += f" (not counted: {extra})"
        return False, reason
    return True, ""


# ------------------------------------------------------------------------------ placement order


def _size_key(requests: ResourceVector) -> tuple[int, int, int]:
    """Larger first: extended resources (GPUs, the usual bottleneck), then cpu, then memory."""
    extended = sum(amount for name, amount in requests.items() if name not in _BYTE_LIKE)
    return -extended, -requests.cpu, -requests.memory


def pending_members(view: GangView) -> list[PodRecord]:
    """The members a placement must find nodes for, in the order to place them.

    Pending members only (no node, no reservation, not deleting), those carrying vulcan's own
    queue-allocation gate included (vulcan lifts it when the gang is admitted); members gated by
    the user are `SCHEDULING_GATED`, not Pending, and wait for their gates to go. Best-effort
    members are left out, as Volcano's allocate leaves them to backfill: they count as ready
    already. Order: members of
    roles still short of their minTaskMember first, then task priority (desc), then larger
    requests first (first-fit decreasing packs better), then creation time and key.
    """
    short = missing_task_members(view)
    chosen = [
        pod
        for pod in view.members
        if view.status[pod.key] == PENDING and not is_best_effort(pod.requests)
    ]
    chosen.sort(
        key=lambda pod: (
            (pod.task or "") not in short,
            -pod.priority,
            _size_key(pod.requests),
            pod.created,
            pod.key,
        )
    )
    return chosen
