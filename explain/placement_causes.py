"""Why a gang's members cannot be placed on the nodes: the whole-gang placement
(`plugins.model.placement`), kube-scheduler's filters (taints, node affinity, ports, ...) and the
nodes' free room, each finding naming what would unblock it. Pure: a function of the collected
objects (`explain.world`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from core.records import PodRecord
from core.resources import ResourceVector, format_quantity
from explain.texts import Finding
from explain.world import World, amount, amounts
from plugins.model import gang_ready
from plugins.model.feasibility import fit_error
from plugins.model.gang_fit import GangFit
from plugins.model.placement import plan_gang
from plugins.model.queue_share import requested_dims

if TYPE_CHECKING:
    from explain.gang_causes import GangCase


def plan(case: GangCase, reserved: dict[str, ResourceVector]) -> Any:
    """The gang's whole placement as the extender's allocate would try it, with `reserved`
    taken off the nodes' free room (a negative amount frees room)."""
    view = case.view
    return plan_gang(
        case.world.snapshot,
        gang_ready.pending_members(view),
        gang_ready.members_needed(view),
        reserved,
        need_per_task=gang_ready.missing_task_members(view),
    )


def placement(case: GangCase) -> Finding | None:
    """A gang not admitted whose members do not fit on the nodes: the filters that refuse
    them, or the room that is missing."""
    members_ = gang_ready.pending_members(case.view)
    need = gang_ready.members_needed(case.view)
    if case.admitted or not members_ or need == 0:
        return None
    planned = plan(case, {})
    if planned.ok:
        return None
    world = case.world
    filtered = node_filters(world, members_[:need], planned.reason)
    if filtered is not None:
        return filtered
    if not world.schedulable(members_[0]):
        return Finding(
            "node-room",
            "no node can take pods: every node is NotReady, cordoned or tainted",
            ["make a node Ready and schedulable"],
        )
    for pod in members_[:need]:
        finding = member_room(world, pod)
        if finding is not None:
            return finding
    return Finding(
        "node-room",
        f"the gang does not fit in the nodes' free room: {planned.reason}",
        ["wait for running pods to finish", "or add nodes", "or ask for less per member"],
    )


# What to do about each of kube-scheduler's filter reasons (plugins.model.feasibility's texts).
_FILTER_HINTS = (
    ("untolerated taint", "add a toleration for that taint to the pods, or untaint nodes"),
    ("node affinity/selector", "check the pods' nodeSelector / node affinity against node labels"),
    ("free ports", "one member per node holds a hostPort: add nodes, or drop the hostPort"),
    ("anti-affinity", "required anti-affinity allows one pod per topology domain: add nodes"),
    ("pod affinity rules", "required pod affinity needs a matching pod in the node's domain"),
    ("topology spread", "the spread's maxSkew leaves no domain: add nodes or raise maxSkew"),
    ("unschedulable", "uncordon a node (kubectl uncordon)"),
    ("not ready", "make a node Ready"),
)


def node_filters(world: World, members: list[PodRecord], reason: str) -> Finding | None:
    """The gang is held back by kube-scheduler's filters, not by room: a member that no node
    accepts (taints, node affinity, ...), or rules that leave too few nodes for all of them
    (host ports, anti-affinity, spread: the plan's reason then carries the filter counts)."""
    snapshot = world.snapshot
    fit = GangFit(snapshot, members)
    for pod in members:
        reasons: dict[str, int] = {}
        for node in snapshot.nodes.values():
            why = fit.reason(pod, node)
            if why is None:
                break
            reasons[why] = reasons.get(why, 0) + 1
        else:
            if not reasons:
                continue
            text = f"no node passes kube-scheduler's filters for {pod.key}: "
            text += fit_error(len(snapshot.nodes), reasons)
            return Finding("node-filters", text, _hints(reasons))
    counted = re.search(r"0/\d+ nodes are available: (.*)", reason)
    if counted is None or "node(s)" not in counted.group(1):
        return None
    text = f"kube-scheduler's filters leave too few nodes for the whole gang: {reason}"
    return Finding("node-filters", text, _hints({counted.group(1): 1}))


def _hints(reasons: dict[str, int]) -> list[str]:
    hints = [hint for needle, hint in _FILTER_HINTS if any(needle in r for r in reasons)]
    return hints or ["check the members' scheduling constraints against the nodes"]


def member_room(world: World, pod: PodRecord) -> Finding | None:
    """Why a member fits on no node ("default/x needs 4 nvidia.com/gpu on one node; the
    largest free is 2 on hollow-node-3"), or None when some node has its whole request free."""
    request = pod.requests
    dims = requested_dims(request)
    for dim in dims:
        node, free = world.largest_free(dim, pod=pod)
        if request.get(dim) <= free:
            continue
        nodes = world.snapshot.nodes
        most = max((nodes[n].allocatable.get(dim) for n in world.schedulable(pod)), default=0)
        text = (
            f"no node has room for a member: {pod.key} needs {amount(dim, request.get(dim))} on "
            f"one node; the largest free is {format_quantity(dim, free)} on {node}"
        )
        if request.get(dim) > most:
            unblock = [
                f"no node has {amount(dim, request.get(dim))} at all (the largest has "
                f"{format_quantity(dim, most)}): ask for at most {format_quantity(dim, most)} "
                "per pod, or add a bigger node"
            ]
        else:
            unblock = [
                f"wait for pods on {node} (or another node) to finish and free {dim}",
                f"or add a node with at least {amount(dim, request.get(dim))} free",
                "or ask for less per pod",
            ]
        return Finding("node-room", text, unblock)
    if any(request.fits_in(world.snapshot.node_free(n)) for n in world.schedulable(pod)):
        return None
    return Finding(
        "node-room",
        f"no node has room for a member: {pod.key} needs {amounts(request)} on one node, and no "
        "node has all of it free at once",
        ["wait for running pods to finish", "or add a node", "or ask for less per pod"],
    )
