"""Why a gang placement failed, for a person: `plugins.model.placement.plan_gang`'s reason texts.

Two kinds: the resource view ("not enough nvidia.com/gpu (need 4, free 2)", "no node has 8
nvidia.com/gpu free (at most 4)", fragmentation), and kube-scheduler's own FitError for the first
member left out when the members' rules had a say ("0/4 nodes are available: 4 node(s) didn't
have free ports for the requested pod ports.").

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.records import NodeRecord, PodRecord
from core.resources import format_quantity, format_shortfall
from plugins.model.feasibility import fit_error, insufficient
from plugins.model.gang_fit import GangFit

if TYPE_CHECKING:
    from core.cache import Snapshot

# Report order for shortfalls, as core.resources orders "insufficient" lists.
_REPORT_ORDER = {"pods": 0, "cpu": 1, "memory": 2, "ephemeral-storage": 3}


def shortfall(required: dict[str, int], free: dict[str, int]) -> list[str]:
    names = sorted(required, key=lambda name: (_REPORT_ORDER.get(name, len(_REPORT_ORDER)), name))
    return [
        format_shortfall(name, required[name], max(0, free.get(name, 0)))
        for name in names
        if required[name] > free.get(name, 0)
    ]


def sum_requests(pods: Iterable[PodRecord]) -> dict[str, int]:
    total: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod.requests.items():
            if amount > 0:
                total[name] = total.get(name, 0) + amount
    return total


@dataclass(frozen=True, slots=True)
class Capacity:
    """What a failed plan's message is computed from."""

    total_free: dict[str, int]  # summed over candidate nodes, before this plan
    largest: dict[str, int]  # best single node, after this plan's placements
    candidates: int
    placed_keys: Collection[str]


def _too_big(pods: Sequence[PodRecord], capacity: Capacity) -> str:
    """For the first of `pods` that got no node: "no node has 8 nvidia.com/gpu free (at most
    4)" when one of its requests exceeds what any node has left; "" when it is the combination
    that no node offers (fragmentation)."""
    blocked = next((pod for pod in pods if pod.key not in capacity.placed_keys), None)
    if blocked is None:
        return ""
    names = sorted(
        (name for name, amount in blocked.requests.items() if amount > 0),
        key=lambda name: (_REPORT_ORDER.get(name, len(_REPORT_ORDER)), name),
    )
    for name in names:
        amount, best = blocked.requests.get(name), max(0, capacity.largest.get(name, 0))
        if amount > best:
            return (
                f"no node has {format_quantity(name, amount)} {name} free "
                f"(at most {format_quantity(name, best)})"
            )
    return ""


_FRAGMENTED = "free capacity is fragmented across nodes"


def gang_reason(
    members: Sequence[PodRecord],
    need: int,
    per_task: Mapping[str, int],
    placed_by_task: Mapping[str, int],
    placed: int,
    capacity: Capacity,
) -> str:
    """Why a plan failed, for a person. First the cluster-wide totals: the resources the
    required members ask for against the free total of every candidate node ("not enough
    nvidia.com/gpu (need 4, free 2)"). When the totals would do, the first member left without
    a node is either bigger than any node's free capacity, or the capacity is fragmented."""
    if capacity.candidates == 0:
        return "no schedulable node (every node is not ready, cordoned or tainted)"
    if need > len(members) and not per_task:
        return f"only {len(members)} pending members for {need} required"
    parts: list[str] = []
    for task, required in per_task.items():
        got = placed_by_task.get(task, 0)
        if got >= required:
            continue
        role = [pod for pod in members if (pod.task or "") == task]
        text = f"task {task}: {got}/{required} members placeable"
        if len(role) < required:
            parts.append(f"{text} (only {len(role)} pending)")
            continue
        short = shortfall(sum_requests(role[:required]), capacity.total_free)
        detail = ", ".join(short) if short else (_too_big(role, capacity) or _FRAGMENTED)
        parts.append(f"{text}: {detail}")
    if parts:
        return "; ".join(parts)
    short = shortfall(sum_requests(members[:need]), capacity.total_free)
    if short:
        return ", ".join(short)
    detail = _too_big(members, capacity) or _FRAGMENTED
    return f"only {placed} of {need} required members fit: {detail}"


def first_unplaced(
    members: Sequence[PodRecord], per_task: Mapping[str, int], slots: Mapping[str, int]
) -> PodRecord | None:
    """The member a failed plan is explained by: of a short role first, else the first."""
    for pod in members:
        if pod.key not in slots and (not per_task or (pod.task or "") in per_task):
            return pod
    return next((pod for pod in members if pod.key not in slots), None)


def diagnose(
    snapshot: Snapshot,
    pod: PodRecord,
    fit: GangFit,
    node_ok: Callable[[NodeRecord], bool] | None,
    candidates: tuple[list[str], Sequence[list[int]], tuple[str, ...]],
) -> str:
    """kube-scheduler's FitError for `pod` as the plan left the cluster: each node's first
    failing filter, counted ("0/4 nodes are available: 4 node(s) didn't have free ports for
    the requested pod ports.")."""
    names, free_rows, dims = candidates
    index = {name: i for i, name in enumerate(names)}
    reasons: dict[str, int] = {}
    for name, node in snapshot.nodes.items():
        found: list[str] = []
        if node_ok is not None and not node_ok(node):
            found.append("node(s) didn't pass the caller's node check")
        else:
            why = fit.reason(pod, node, static=node_ok is None)
            if why is not None:
                found.append(why)
            elif name in index:
                free = free_rows[index[name]]
                found.extend(
                    insufficient(d)
                    for n, d in enumerate(dims)
                    if pod.requests.get(d) > max(0, free[n])
                )
        for why in found:
            reasons[why] = reasons.get(why, 0) + 1
    return fit_error(len(snapshot.nodes), reasons)
