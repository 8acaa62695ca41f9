"""Whole-gang placement simulation: can these pending members all get a node at once?

This is the check Volcano's allocate action makes inside one session (place tasks one by one on
a scratch copy of the nodes, commit only when the gang is ready),
made before any member takes capacity: a gang is
admitted only with an exclusive slot for every required member, so two gangs can never each
hold part of the cluster and deadlock.

Free capacity of a node = allocatable - requested by pods bound to it (the snapshot) - what live
reservations of OTHER gangs have promised on it (`reserved`) - what this plan already placed.
Nodes are judged by kube-scheduler's filters (`plugins.model.gang_fit.GangFit` over
`plugins.model.feasibility`: readiness, cordon, taints and tolerations, node affinity and
nodeSelector, host ports, pod affinity and anti-affinity, topology spread), or by the caller's
`node_ok`; the fit rule is Volcano's (`ResourceVector.fits_in`: only the dimensions a pod requests
are compared).

Algorithm (first-fit decreasing, batched): members are grouped by request shape (pods of one
task share one request), and each group is placed in one walk over a per-dimension index of the
candidate nodes, sorted by free amount. The walk starts (by bisection) at the first node with
enough of the shape's most selective dimension, and takes as many members per node as fit.
`binpack` walks from the tightest fit upwards (fills nodes, keeps big ones whole); `spread`
walks from the emptiest node downwards, one member per node per round. Cost is about
O(shapes x candidate nodes + members), i.e. 1,000 members of one shape on 5,000 nodes is one
pass; the worst case (every member a different shape) is O(members x candidate nodes).
Members whose answer changes as the gang lands (host ports, pod (anti-)affinity, topology
spread: `GangFit.dynamic`), or members with different constraints, are placed one at a time,
each on the first node of the same walk that its rules accept: O(members x candidate nodes).

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.records import NodeRecord, PodRecord
from core.resources import ResourceVector
from plugins.model.feasibility import AFFINITY_RULES, SPREAD
from plugins.model.free_rows import free_rows
from plugins.model.gang_fit import GangFit, Held
from plugins.model.placement_reasons import Capacity, diagnose, first_unplaced, gang_reason
from plugins.model.placer import Nodes, Placer, Prefer

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = [
    "Plan",
    "Prefer",
    "plan_gang",
    "release",
    "reserved_by_node",
    "schedulable_node",
    "slot_usage",
]


_ZERO = ResourceVector()
# Refusals that placing more members can lift (the others only grow).
_CHANGING = frozenset({SPREAD, AFFINITY_RULES})


def schedulable_node(node: NodeRecord) -> bool:
    """The node check for a pod without constraints: Ready, not cordoned, and no
    NoSchedule/NoExecute taint (`plugins.model.feasibility.static_reason` for such a pod)."""
    return node.ready and not node.unschedulable and not node.blocking_taints


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome of `plan_gang`.

    ok: every requirement (`need`, `need_per_task`) is met. Only then are `slots` and `used`
        filled; a failed plan reserves nothing (Volcano discards a gang's partial allocation).
    slots: pod key -> node name, exclusive: `used` already accounts for every slot.
    used: node name -> sum of the requests of the members placed there (what the ledger adds to
        its per-node reservations).
    placed: how many members found a node (also when not ok, for messages).
    reason: when not ok, why, for a person: "not enough nvidia.com/gpu (need 4, free 2)".
    """

    ok: bool
    slots: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    used: dict[str, ResourceVector] = field(default_factory=dict)
    placed: int = 0


def _dims_of(members: Sequence[PodRecord]) -> tuple[str, ...]:
    names: set[str] = set()
    for pod in members:
        names.update(name for name, amount in pod.requests.items() if amount > 0)
    return tuple(sorted(names))


def plan_gang(
    snapshot: Snapshot,
    members: Sequence[PodRecord],
    need: int,
    reserved: Mapping[str, ResourceVector],
    *,
    need_per_task: Mapping[str, int] | None = None,
    node_ok: Callable[[NodeRecord], bool] | None = None,
    prefer: Prefer = "binpack",
    held: Held | None = None,
    within: Collection[str] | None = None,
) -> Plan:
    """Place a gang's pending `members` together, or explain why they cannot be.

    members: the pending members to place, in placement order
        (`plugins.model.gang_ready.pending_members`).
    need: how many of them must get a node (minMember minus those already counted ready:
        `plugins.model.gang_ready.members_needed`).
    need_per_task: task role -> how many members of that role must get a node
        (`plugins.model.gang_ready.missing_task_members`); members of those roles are placed first.
    reserved: node -> resources promised to other gangs' live reservations (`reserved_by_node`);
        reservations of members that have since bound must already be gone from it, or they
        would be counted twice (once in the snapshot's node_requested).

    node_ok: replaces the node's own filters (readiness, cordon, taints, node affinity) when
        given; the rules that depend on other pods (ports, pod affinity, spread) still apply.
    held: pod key -> node of another gang's reservation (`GangLedger.slot_of`): those pods
        count where they will be for host ports, pod affinity and spread.
    within: only these nodes (a HyperNode's: `plugins.model.domains`); None: every node.

    The plan gives slots to at least `need` members (and each role its share) and then to as
    many further members as fit, so an elastic gang gets everything the cluster can hold now.
    """
    if prefer not in ("binpack", "spread"):
        raise ValueError(f'prefer must be "binpack" or "spread", not {prefer!r}')
    per_task = {task: n for task, n in (need_per_task or {}).items() if n > 0}
    fit = GangFit(snapshot, members, held)
    check = node_ok or gang_node_check(fit, members)

    dims = _dims_of(members)
    names: list[str] = []
    filtered = 0  # nodes a member's own rules turned away though a plain pod could use them
    candidates = snapshot.nodes if within is None else [n for n in within if n in snapshot.nodes]
    for name in sorted(candidates):
        node = snapshot.nodes[name]
        if check(node):
            names.append(name)
        elif check is not schedulable_node and schedulable_node(node):
            filtered += 1
    nodes, total_free = free_rows(snapshot, names, dims, reserved)
    rows = nodes.free
    placer = _member_placer(snapshot, nodes, prefer, fit, own_filters=node_ok is None)

    def shape(pod: PodRecord) -> tuple[int, ...]:
        return tuple(pod.requests.get(d) for d in dims)

    # Pass 1: each short role's required members. Roles are interleaved in member order (the
    # caller's order is largest first), so one role's small pods cannot crowd out another's big
    # ones just because its name came first.
    placed_by_task: dict[str, int] = dict.fromkeys(per_task, 0)
    needed = [pod for pod in members if (pod.task or "") in per_task]
    role_batches: dict[tuple[str, tuple[int, ...]], list[PodRecord]] = {}
    for pod in needed:
        role_batches.setdefault((pod.task or "", shape(pod)), []).append(pod)
    for (task, need_vector), pods in role_batches.items():
        left = per_task[task] - placed_by_task[task]
        if left > 0:
            placed_by_task[task] += placer.place(need_vector, pods, left)
    tasks_ok = all(placed_by_task[task] >= n for task, n in per_task.items())

    # Pass 2: everyone else, as many as fit (skipped when a role already failed: not ok anyway).
    if tasks_ok:
        rest = [pod for pod in members if pod.key not in placer.slots]
        for need_vector, pods in _batches(rest, shape):
            placer.place(need_vector, pods, len(pods))
    placed = len(placer.slots)

    if tasks_ok and placed >= need:
        slots = {key: names[i] for key, i in placer.slots.items()}
        by_key = {pod.key: pod for pod in members}
        return Plan(
            ok=True,
            slots=slots,
            used=slot_usage(slots, {key: by_key[key].requests for key in slots}),
            placed=placed,
        )
    # What is left on the best node in each dimension, to tell "too big for any node" apart
    # from "fits in total but is scattered".
    largest = {d: max((row[n] for row in rows), default=0) for n, d in enumerate(dims)}
    reason = gang_reason(
        members,
        need,
        per_task,
        placed_by_task,
        placed,
        Capacity(total_free, largest, len(names), placer.slots.keys()),
    )
    blocked = first_unplaced(members, per_task, placer.slots)
    # kube-scheduler's view of the first member left out, when the members' rules had a say
    # (the common failed plan, short of room on nodes any pod may use, skips this O(nodes) walk).
    if blocked is not None and (not names or filtered or not fit.fast):
        why = diagnose(snapshot, blocked, fit, node_ok, (nodes.names, nodes.free, nodes.dims))
        reason = f"no schedulable node: {why}" if not names else f"{reason}; {blocked.key}: {why}"
    return Plan(ok=False, reason=reason, placed=placed)


def gang_node_check(fit: GangFit, members: Sequence[PodRecord]) -> Callable[[NodeRecord], bool]:
    """Which nodes enter the plan at all: for the common gang (no constraints, nothing in the
    cluster repelling it) `schedulable_node` itself; else the nodes some member's own filters
    accept (`GangFit`)."""
    if fit.fast and members:
        if members[0].constraints is None and not fit.repelled:
            return schedulable_node
        return fit.node_ok(members[0])
    return fit.any_ok


def _member_placer(
    snapshot: Snapshot, nodes: Nodes, prefer: Prefer, fit: GangFit, *, own_filters: bool
) -> Placer:
    """The batched placer when one node filter decides for every member (`fit.fast`), else
    one that asks `fit` for each member and tells it where each landed."""
    if fit.fast:
        return Placer(nodes, prefer)
    records = [snapshot.nodes[name] for name in nodes.names]
    # Refusals that only grow as members land (the node's own filters, ports taken,
    # anti-affinity) are remembered per profile: the walk of the next member skips those
    # nodes without asking again, so a 1,000-member hostPort gang is not O(members^2) asks.
    # Spread and pod affinity may turn a refusal into a yes: always asked.
    lasting: dict[int, set[int]] = {}

    def refused(pod: PodRecord) -> set[int]:
        return lasting.setdefault(fit.profile_id(pod), set())

    def allowed(i: int, pod: PodRecord) -> bool:
        why = fit.reason(pod, records[i], static=own_filters)
        if why is None:
            return True
        if why not in _CHANGING:
            refused(pod).add(i)
        return False

    return Placer(nodes, prefer, allowed, lambda i, pod: fit.place(pod, records[i]), refused)


def _batches(
    pods: Sequence[PodRecord], shape: Callable[[PodRecord], tuple[int, ...]]
) -> list[tuple[tuple[int, ...], list[PodRecord]]]:
    """Pods grouped by request shape, groups in order of first appearance."""
    groups: dict[tuple[int, ...], list[PodRecord]] = {}
    for pod in pods:
        groups.setdefault(shape(pod), []).append(pod)
    return list(groups.items())


# --------------------------------------------------------------------------- ledger helpers


def slot_usage(
    slots: Mapping[str, str], requests: Mapping[str, ResourceVector]
) -> dict[str, ResourceVector]:
    """node -> sum of the requests of the pods given a slot there (pods without a known request
    are skipped: they no longer exist)."""
    totals: dict[str, dict[str, int]] = {}
    for key, node in slots.items():
        request = requests.get(key)
        if request is None:
            continue
        row = totals.setdefault(node, {})
        for name, amount in request.items():
            row[name] = row.get(name, 0) + amount
    return {node: ResourceVector(row) for node, row in totals.items()}


def reserved_by_node(
    reservations: Iterable[Mapping[str, ResourceVector]],
) -> dict[str, ResourceVector]:
    """Sum per node of several reservations' usage maps (each a `Plan.used` / `slot_usage`):
    the `reserved` argument of the next `plan_gang`."""
    totals: dict[str, dict[str, int]] = {}
    for used in reservations:
        for node, vector in used.items():
            row = totals.setdefault(node, {})
            for name, amount in vector.items():
                row[name] = row.get(name, 0) + amount
    return {node: ResourceVector(row) for node, row in totals.items() if any(row.values())}


def release(
    reserved: Mapping[str, ResourceVector], used: Mapping[str, ResourceVector]
) -> dict[str, ResourceVector]:
    """`reserved` without one reservation's usage (a gang bound, timed out or was deleted).
    Nodes left with nothing reserved are dropped; amounts never go below zero."""
    out: dict[str, ResourceVector] = {}
    for node, vector in reserved.items():
        left = vector.saturating_sub(used.get(node, _ZERO))
        if not left.is_zero():
            out[node] = left
    return out
