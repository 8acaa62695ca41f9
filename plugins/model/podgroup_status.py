"""PodGroup status as Volcano's scheduler computes it at session close.

Three parts, each a function of a `GangView`:

* the gang condition (gang plugin OnSessionClose): a gang that is not ready gets
  `Unschedulable` (reason `NotEnoughResources`, message
  "<unready>/<members> tasks in gang unschedulable: pod group is not ready, <histogram>..."),
  a ready gang gets `Scheduled` (reason "tasks in gang are ready to be scheduled"). A condition
  replaces the previous one of its type; conditions of the other type are kept as they were.
* the phase (framework getPodGroupPhase): Unknown when members run while the gang was just found
  unschedulable; Running / Completed once `scheduled >= minMember`; otherwise Pending, unless the
  group is Inqueue, which it stays.
* the counts: members Running / Succeeded / Failed.

Departure from Volcano, deliberately: Volcano stamps every condition with the session's time and
UID, and avoids rewriting the object only by comparing conditions without those two fields. Here
a condition whose status, reason and message did not change keeps its previous
`lastTransitionTime` and `transitionID`, so the timestamp says when the condition last changed
(as Kubernetes conditions do) and an unchanged status is byte-for-byte unchanged.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.api.scheduling import (
    CONDITION_SCHEDULED,
    CONDITION_UNSCHEDULABLE,
    POD_GROUP_NOT_READY,
    REASON_NOT_ENOUGH_RESOURCES,
)
from plugins.model.gang import GangView
from plugins.model.gang_ready import ready

__all__ = [
    "REASON_GANG_READY",
    "fit_error",
    "gang_condition",
    "podgroup_phase",
    "podgroup_status",
    "status_changed",
]

PENDING = "Pending"
INQUEUE = "Inqueue"
RUNNING = "Running"
UNKNOWN = "Unknown"
COMPLETED = "Completed"

REASON_GANG_READY = "tasks in gang are ready to be scheduled"
# Volcano's per-task scheduling reasons for pending members (pkg/scheduler/api/job_info.go):
# Unschedulable after a failed attempt, Undetermined when nothing was attempted for the member.
PENDING_UNSCHEDULABLE = "Unschedulable"
PENDING_UNDETERMINED = "Undetermined"


def _histogram(counts: Mapping[str, int]) -> str:
    """Volcano's sortReasonsHistogram: "<count> <name>" entries sorted as strings (so
    "20 minAvailable" sorts before "8 Running"), joined by ", "."""
    return ", ".join(sorted(f"{n} {name}" for name, n in counts.items() if n > 0))


def fit_error(
    view: GangView,
    *,
    unschedulable_reason: str | None = None,
    pending_reasons: Mapping[str, int] | None = None,
) -> str:
    """Volcano's JobInfo.FitError for a gang that is not ready, e.g.
    "pod group is not ready, 2 Pending, 2 Running, 4 minAvailable; Pending: 2 Unschedulable.
    Origin reason is: not enough nvidia.com/gpu (need 4, free 2)".

    pending_reasons: reason -> number of Pending members; by default every Pending member is
    `Unschedulable` when there is an `unschedulable_reason` (placement was tried and failed) and
    `Undetermined` otherwise.
    """
    entries = dict(view.counts)
    # minAvailable is an entry of the same histogram (a status named "minAvailable" would be
    # merged with it in Volcano too, but no status has that name).
    entries["minAvailable"] = view.min_member
    message = f"{POD_GROUP_NOT_READY}, {_histogram(entries)}"
    if pending_reasons is None:
        default = PENDING_UNSCHEDULABLE if unschedulable_reason else PENDING_UNDETERMINED
        pending_reasons = {default: view.pending} if view.pending else {}
    if any(n > 0 for n in pending_reasons.values()):
        message += f"; {PENDING}: {_histogram(pending_reasons)}"
    if unschedulable_reason:
        message += f". Origin reason is: {unschedulable_reason}"
    return message


def gang_condition(
    view: GangView,
    *,
    unschedulable_reason: str | None = None,
    pending_reasons: Mapping[str, int] | None = None,
) -> dict[str, str] | None:
    """The condition the gang plugin sets this pass (without time and transition ID), or None
    when it sets none: a group without members that nothing refused (an enqueued job's group
    waiting for its pods), or one that is not ready only because it has no pending members
    left while enough are still scheduled (e.g. members terminating for a restart: Volcano
    leaves its conditions alone then). A group refused before it has members (its enqueue)
    says why, as Volcano's gang plugin does for every job that is not ready."""
    if view.created == 0 and not unschedulable_reason:
        return None
    if ready(view):
        return {
            "type": CONDITION_SCHEDULED,
            "status": "True",
            "reason": REASON_GANG_READY,
            "message": "",
        }
    if view.scheduled >= view.min_member and view.pending == 0:
        return None
    # Volcano does not clamp this: a gang short only of a role's minTaskMember can read "0/4".
    unready = view.min_member - view.ready_num
    detail = fit_error(
        view, unschedulable_reason=unschedulable_reason, pending_reasons=pending_reasons
    )
    return {
        "type": CONDITION_UNSCHEDULABLE,
        "status": "True",
        "reason": REASON_NOT_ENOUGH_RESOURCES,
        "message": f"{unready}/{view.created} tasks in gang unschedulable: {detail}",
    }


def podgroup_phase(view: GangView, *, current_phase: str, unschedulable: bool) -> str:
    """Volcano's getPodGroupPhase.

    current_phase: the phase after this pass's enqueue decision (Inqueue when just admitted).
    unschedulable: whether this pass set the Unschedulable condition.
    """
    if view.running > 0 and unschedulable:
        return UNKNOWN
    scheduled = view.scheduled
    if scheduled >= view.min_member:
        # Counted against scheduled members: a group whose every scheduled member finished
        # (Succeeded or Failed) is Completed. With minMember 0 and no member at all this is
        # Completed too, exactly as Volcano computes it (0 >= 0 and 0 == 0).
        return COMPLETED if scheduled == view.completed else RUNNING
    if current_phase != INQUEUE:
        # Includes a Running group that lost members: it drops back to Pending.
        return PENDING
    return INQUEUE


def _merge_condition(
    previous: Sequence[Mapping[str, Any]],
    condition: dict[str, str],
    *,
    now: str,
    transition_id: str,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    replaced = False
    for old in previous:
        if old.get("type") != condition["type"]:
            out.append(dict(old))
            continue
        if replaced:  # at most one entry per type: drop duplicates a foreign writer left
            continue
        replaced = True
        unchanged = all(old.get(f, "") == condition[f] for f in ("status", "reason", "message"))
        out.append(_stamped(condition, old, unchanged, now=now, transition_id=transition_id))
    if not replaced:
        out.append(_stamped(condition, {}, False, now=now, transition_id=transition_id))
    return out


def _stamped(
    condition: dict[str, str],
    old: Mapping[str, Any],
    unchanged: bool,
    *,
    now: str,
    transition_id: str,
) -> dict[str, Any]:
    # Volcano's PodGroupCondition field order: type, status, transitionID, lastTransitionTime,
    # reason, message.
    return {
        "type": condition["type"],
        "status": condition["status"],
        "transitionID": old.get("transitionID", transition_id) if unchanged else transition_id,
        "lastTransitionTime": old.get("lastTransitionTime", now) if unchanged else now,
        "reason": condition["reason"],
        "message": condition["message"],
    }


def podgroup_status(
    view: GangView,
    *,
    admitted: bool,
    previous_phase: str,
    unschedulable_reason: str | None,
    now: str,
    previous_conditions: Sequence[Mapping[str, Any]] = (),
    transition_id: str = "",
    pending_reasons: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The PodGroup `status` to write after one scheduling pass.

    admitted: the enqueue step admits this group in this pass (a Pending group becomes Inqueue
        before the phase is computed, as Volcano's enqueue action runs before session close).
        A group that is already Inqueue or further stays admitted whatever this says: Volcano
        has no way back to Pending except the phase rule (too few members scheduled while not
        Inqueue).
    previous_phase: the phase stored on the PodGroup ("" is Pending).
    unschedulable_reason: why placement failed this pass, if it was tried (the "Origin reason").
    now: RFC 3339 time for conditions that change.
    previous_conditions: the stored `status.conditions`; unchanged ones keep their time and ID.
    transition_id: identifies this pass (Volcano's session UID) on conditions that change.
    pending_reasons: see `fit_error`.
    """
    current = previous_phase or PENDING
    if admitted and current == PENDING:
        current = INQUEUE
    condition = gang_condition(
        view, unschedulable_reason=unschedulable_reason, pending_reasons=pending_reasons
    )
    unschedulable = condition is not None and condition["type"] == CONDITION_UNSCHEDULABLE
    if condition is None:
        conditions = [dict(c) for c in previous_conditions]
    else:
        conditions = _merge_condition(
            previous_conditions, condition, now=now, transition_id=transition_id
        )
    return {
        "phase": podgroup_phase(view, current_phase=current, unschedulable=unschedulable),
        "conditions": conditions,
        "running": view.running,
        "succeeded": view.succeeded,
        "failed": view.failed,
    }


def _condition_key(condition: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        condition.get("type") or "",
        condition.get("status") or "",
        condition.get("reason") or "",
        condition.get("message") or "",
    )


def _written_parts(status: Mapping[str, Any], *, messages: bool) -> tuple[Any, ...]:
    """What a status write is judged by: phase, counts (absent = 0) and conditions without
    lastTransitionTime and transitionID (and without their messages unless `messages`)."""
    width = 4 if messages else 3
    return (
        status.get("phase"),
        *(int(status.get(count) or 0) for count in ("running", "succeeded", "failed")),
        [_condition_key(c)[:width] for c in status.get("conditions") or ()],
    )


def status_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether `new` must be written over `old` (Volcano's rule: phase, counts or conditions
    changed; conditions compared without lastTransitionTime and transitionID). Absent counts
    and conditions equal zero and empty, as Volcano omits them when empty; an absent phase
    differs from every phase, so a new PodGroup gets its first phase written."""
    return _written_parts(old or {}, messages=True) != _written_parts(new, messages=True)


def only_messages_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether `new` differs from `old` in its conditions' messages alone: the same phase,
    counts, and conditions of the same type, status and reason."""
    return _written_parts(old, messages=False) == _written_parts(new, messages=False)
