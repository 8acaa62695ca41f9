"""A gang with subgroups placed as Volcano's allocate places a job's SubJobs (allocateForJob,
organizeJobWorksheet, allocateForSubJob): within the job's own room (its HyperNode, when it has
a networkTopology: the caller tries them), subgroup by subgroup, each whole (its
`subGroupSize` members, counting those already placed) or not at all, within a HyperNode of its
own networkTopology when it has one; first the subgroups its policies' `minSubGroups` still
need, then the others, then the members of no subgroup. The gang is placed when its
`minSubGroups` are whole, `need` members got a node and each task its minimum; else nothing is.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from core.records import PodRecord
from core.resources import ResourceVector
from plugins.model.placement import Plan, reserved_by_node, slot_usage
from plugins.model.subgroups import DEFAULT, SubGroup, SubGroups

__all__ = ["PlaceSubGroup", "keep_whole", "placement_order", "plan_subgroups"]

# (its pending members, how many must be placed, the room others hold, its networkTopology,
# the nodes of its members already placed) -> a plan; `inside` is the caller's to keep.
PlaceSubGroup = Callable[
    [Sequence[PodRecord], int, Mapping[str, ResourceVector], Mapping[str, Any] | None, list[str]],
    Plan,
]


def _placed(group: SubGroup, pending: Collection[str]) -> list[str]:
    return [
        pod.node
        for pod in group.members
        if pod.key not in pending and pod.node is not None and not pod.terminal and not pod.deleting
    ]


Todo = list[tuple[SubGroup, list[str], list[PodRecord]]]


def _schedule(
    sub: SubGroups, members: Sequence[PodRecord]
) -> tuple[Todo, set[str], dict[str, int]]:
    """The subgroups with members to place (with the nodes of their placed ones and their
    pending ones, placement order), those minSubGroups needs (placed first), and how many more
    whole subgroups each policy needs beyond those that could be."""
    rank = {pod.key: n for n, pod in enumerate(members)}
    pending = set(rank)
    whole: dict[str, int] = {}
    todo: Todo = []
    for group in sub.groups:
        placed = _placed(group, pending)
        waiting = sorted((p for p in group.members if p.key in pending), key=lambda p: rank[p.key])
        if group.key != DEFAULT and len(placed) >= group.size:
            whole[group.policy] = whole.get(group.policy, 0) + 1
        if waiting:
            todo.append((group, placed, waiting))
    short = {p: n - whole.get(p, 0) for p, n in sub.min_sub_groups.items() if n > whole.get(p, 0)}
    required: set[str] = set()
    for group, placed, _ in todo:
        if group.key != DEFAULT and short.get(group.policy, 0) > 0 and len(placed) < group.size:
            required.add(group.key)
            short[group.policy] -= 1
    todo.sort(key=lambda t: (t[0].key == DEFAULT, t[0].key not in required))
    return todo, required, short


def placement_order(sub: SubGroups, members: Sequence[PodRecord]) -> list[PodRecord]:
    """`members` in the order their subgroups are placed (what a queue keeps first when it
    cannot take every member placed)."""
    todo, _, _ = _schedule(sub, members)
    return [pod for _, _, waiting in todo for pod in waiting]


def keep_whole(
    sub: SubGroups, planned: Mapping[str, str], kept: Mapping[str, str]
) -> dict[str, str]:
    """`kept` (some of the `planned` slots) without the members of a subgroup some of whose
    planned members were not kept: a subgroup is placed whole or not at all."""
    out = dict(kept)
    for group in sub.groups:
        if group.key == DEFAULT:
            continue
        placed = [pod.key for pod in group.members if pod.key in planned]
        if any(key not in out for key in placed):
            for key in placed:
                out.pop(key, None)
    return out


def plan_subgroups(
    sub: SubGroups,
    members: Sequence[PodRecord],
    need: int,
    need_per_task: Mapping[str, int],
    reserved: Mapping[str, ResourceVector],
    place: PlaceSubGroup,
) -> Plan:
    """The gang's plan (the module docstring); `members`: its pending members, placement order."""
    todo, required, short = _schedule(sub, members)
    if any(n > 0 for n in short.values()):
        missing = ", ".join(f"{p}: {n} more" for p, n in sorted(short.items()) if n > 0)
        return Plan(ok=False, reason=f"too few subgroups for minSubGroups ({missing})")

    slots: dict[str, str] = {}
    used: list[Mapping[str, ResourceVector]] = []
    room = reserved
    for group, placed, waiting in todo:
        if group.key == DEFAULT:
            left = max(0, need - len(slots))
            plan = place(waiting, min(left, len(waiting)), room, None, placed)
        else:
            missing_members = max(0, group.size - len(placed))
            if len(waiting) < missing_members:
                if group.key in required:
                    why = f"only {len(waiting)} of its {missing_members} missing members pending"
                    return Plan(ok=False, reason=f"subgroup {group.key}: {why}")
                continue
            plan = place(waiting, missing_members, room, group.topology, placed)
        if not plan.ok:
            if group.key in required or group.key == DEFAULT:
                return Plan(ok=False, reason=f"subgroup {group.key or '(none)'}: {plan.reason}")
            continue
        slots.update(plan.slots)
        used.append(plan.used)
        room = reserved_by_node([room, plan.used])
    by_key = {pod.key: pod for pod in members}
    per_task: dict[str, int] = {}
    for key in slots:
        task = by_key[key].task or ""
        per_task[task] = per_task.get(task, 0) + 1
    for task, n in sorted(need_per_task.items()):
        if per_task.get(task, 0) < n:
            return Plan(ok=False, reason=f"task {task}: {per_task.get(task, 0)}/{n} placeable")
    if len(slots) < need:
        return Plan(ok=False, reason=f"only {len(slots)} of {need} required members placeable")
    requests = {key: by_key[key].requests for key in slots}
    return Plan(ok=True, slots=slots, used=slot_usage(slots, requests), placed=len(slots))
