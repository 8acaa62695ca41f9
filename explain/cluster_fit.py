"""A gang that can never fit this cluster, however long it waits: more than all nodes have
together, a member larger than the largest node, or a resource no node offers. Waiting cannot
help, so explain names the resource and the largest node instead of advising to wait."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.records import NodeRecord, PodRecord
from core.resources import ResourceVector
from explain.texts import Finding
from explain.world import amounts
from plugins.model.queue_share import requested_dims, strip_pods

if TYPE_CHECKING:
    from explain.gang_causes import GangCase

_HINTS = [
    "add nodes that offer it, or larger nodes",
    "or ask for less (fewer or smaller members, a smaller minResources)",
]


def _largest(nodes: list[NodeRecord], dim: str | None = None) -> NodeRecord:
    """The node with the most of `dim` (cpu, then memory, when none is named); first by name."""
    dims = [dim] if dim else ["cpu", "memory"]
    return min(nodes, key=lambda n: (tuple(-n.allocatable.get(d) for d in dims), n.name))


def _size(node: NodeRecord, dims: list[str] | None = None) -> str:
    return f"{node.name}: {amounts(node.allocatable, dims)}"


def _live_members(case: GangCase) -> list[PodRecord]:
    return [p for p in case.view.members if not p.terminal and not p.deleting]


def cannot_fit(case: GangCase) -> Finding | None:
    nodes = sorted(case.world.snapshot.nodes.values(), key=lambda n: n.name)
    if not nodes:
        return None  # no node at all: the placement check says so
    members = _live_members(case)
    total = ResourceVector()
    for node in nodes:
        total = total + node.allocatable
    for pod in members:
        for dim in requested_dims(strip_pods(pod.requests)):
            if total.get(dim) == 0:
                return Finding(
                    "cannot-fit",
                    f"the gang cannot fit this cluster: {pod.key} asks for "
                    f"{amounts(pod.requests, [dim])}, which no node offers (largest node "
                    f"{_size(_largest(nodes))})",
                    _HINTS,
                )
            largest = _largest(nodes, dim)
            if pod.requests.get(dim) > largest.allocatable.get(dim):
                return Finding(
                    "cannot-fit",
                    f"the gang cannot fit this cluster: {pod.key} asks for "
                    f"{amounts(pod.requests, [dim])} on one node, the largest node "
                    f"{largest.name} has {amounts(largest.allocatable, [dim])}",
                    _HINTS,
                )
    demand = case.view.min_resources
    if demand is None:
        demand = ResourceVector()
        for pod in members[: case.view.min_member]:
            demand = demand + pod.requests
    demand = strip_pods(demand)
    over = [d for d in requested_dims(demand) if demand.get(d) > total.get(d)]
    if not over:
        return None
    return Finding(
        "cannot-fit",
        f"the gang cannot fit this cluster: it needs {amounts(demand, over)}, the cluster has "
        f"{amounts(total, over)} in all (largest node {_size(_largest(nodes, over[0]), over)})",
        _HINTS,
    )
