"""A gang's placement within one HyperNode (a job's or PodGroup's `networkTopology`), as
Volcano's allocate action and network-topology-aware plugin place it:

- `hard` with `highestTierAllowed` h (or a `highestTierName` the HyperNodes' tier names
  translate): the HyperNodes of tier 1, then 2, ..., up to h are tried, and the gang is placed
  whole within one of them or not at all; h at or above the cluster's own tier (one above the
  highest HyperNode's: Volcano's ClusterTopHyperNode) allows the whole cluster last.
- `soft`: every tier in turn, then the whole cluster (Volcano converts soft to hard at the
  cluster's tier).
- `hard` without a tier (a tier name no HyperNode has): the whole cluster, as in Volcano.

Within a tier, a HyperNode that cannot hold the nodes of the gang's placed members (a gang
replacing members: Volcano's allocatedHyperNode) or whose free room in total is short of the
gang's is skipped; the others are tried best score first (Volcano's HyperNodeOrderFn: the
binpacking score of `domain_score`, then the share of the gang's members already inside,
then the name), and the first that holds the gang is taken. Scores do not depend on the
placement, so this is the HyperNode Volcano's "best of those that fit" picks.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.hypernode_tree import Domain, HyperNodeTree
from core.records import PodRecord
from core.resources import ResourceVector
from plugins.model.placement import Plan

if TYPE_CHECKING:
    from core.cache import Snapshot

__all__ = [
    "BinpackWeights",
    "Constraint",
    "constraint_of",
    "domain_score",
    "gang_of",
    "gradients",
    "nodes_allowed",
    "place_in_domains",
]

_ZERO = ResourceVector()
Place = Callable[[Collection[str] | None], Plan]  # a plan within these nodes (None: anywhere)


@dataclass(frozen=True, slots=True)
class BinpackWeights:
    """Resource -> weight of Volcano's HyperNode binpacking (cpu and memory 1 by default)."""

    weights: Mapping[str, int]


DEFAULT_WEIGHTS = BinpackWeights({"cpu": 1, "memory": 1})


@dataclass(frozen=True, slots=True)
class Constraint:
    mode: str  # "hard" | "soft"
    highest: int | None  # hard: the highest tier allowed (None: no tier: anywhere)
    words: str  # how a reason names it: "networkTopology hard, highestTierAllowed 1"


def constraint_of(raw: Mapping[str, Any] | None, tree: HyperNodeTree) -> Constraint | None:
    """The PodGroup's `spec.networkTopology` (raw) as a constraint; None without one."""
    if not raw:
        return None
    mode = raw.get("mode") or "hard"
    highest = raw.get("highestTierAllowed")
    name = raw.get("highestTierName")
    words = f"networkTopology {mode}"
    if isinstance(highest, int) and not isinstance(highest, bool):
        words += f", highestTierAllowed {highest}"
    elif name:
        highest = tree.tier_names.get(str(name))  # Volcano leaves an unknown name untranslated
        words += f", highestTierName {name}"
    else:
        highest = None
    return Constraint(mode, highest, words)


def gradients(constraint: Constraint, tree: HyperNodeTree) -> list[list[Domain | None]]:
    """The HyperNodes to try, tier by tier (None: the whole cluster)."""
    tiers = tree.tiers
    if constraint.mode == "soft":
        return [*(tree.of_tier(t) for t in tiers), [None]]
    if constraint.highest is None:
        return [[None]]
    out: list[list[Domain | None]] = [list(tree.of_tier(t)) for t in tiers]
    out = [g for g, t in zip(out, tiers, strict=True) if t <= constraint.highest]
    if constraint.highest >= tree.top_tier:
        out.append([None])
    return out


def nodes_allowed(
    constraint: Constraint, tree: HyperNodeTree, placed: Collection[str]
) -> frozenset[str] | None:
    """The nodes one more member may take so that it and the members on `placed` stay within
    one HyperNode the constraint allows (None: any node, as soft or the whole cluster allow)."""
    if constraint.mode == "soft":
        return None
    held = set(placed)
    out: set[str] = set()
    for gradient in gradients(constraint, tree):
        for domain in gradient:
            if domain is None:
                return None
            if held <= domain.nodes:
                out |= domain.nodes
    return frozenset(out)


def domain_score(
    request: Mapping[str, int],
    allocatable: Mapping[str, int],
    used: Mapping[str, int],
    weights: BinpackWeights,
) -> float:
    """Volcano's HyperNode binpacking score: per weighted resource the gang requests,
    (used + request) / allocatable, averaged by weight; 0 when one would overflow."""
    total = 0.0
    weight_sum = 0
    for name, amount in request.items():
        weight = weights.weights.get(name)
        if weight is None or amount <= 0:
            continue
        capacity = allocatable.get(name, 0)
        after = used.get(name, 0) + amount
        if after > capacity or capacity <= 0:
            return 0.0
        total += weight * after / capacity
        weight_sum += weight
    return total / weight_sum if weight_sum > 0 else 0.0


@dataclass(frozen=True, slots=True)
class _Room:
    allocatable: dict[str, int]
    used: dict[str, int]

    def free(self, name: str) -> int:
        return self.allocatable.get(name, 0) - self.used.get(name, 0)


def _room(
    snapshot: Snapshot, nodes: Collection[str], reserved: Mapping[str, ResourceVector]
) -> _Room:
    allocatable: dict[str, int] = {}
    used: dict[str, int] = {}
    for name in nodes:
        node = snapshot.nodes.get(name)
        if node is None:
            continue
        for dim, amount in node.allocatable.items():
            allocatable[dim] = allocatable.get(dim, 0) + amount
        taken = snapshot.node_requested.get(name, _ZERO) + reserved.get(name, _ZERO)
        for dim, amount in taken.items():
            used[dim] = used.get(dim, 0) + amount
    return _Room(allocatable, used)


@dataclass(frozen=True, slots=True)
class Gang:
    """What the search reads of the gang: the summed requests of its members to place and of
    the required ones, and the nodes its placed members are on (name -> how many)."""

    request: Mapping[str, int]
    required: Mapping[str, int]
    placed_on: Mapping[str, int]
    need: int = 0  # how many of the members must get a node


def gang_of(members: Sequence[PodRecord], need: int, placed: Iterable[str]) -> Gang:
    """The gang as the search reads it: `members` to place (`need` of them required: in each
    dimension the `need` smallest requests count, so the pre-filter never skips a HyperNode
    that could hold it) and the nodes its other members hold (`placed`, one per member)."""
    request: dict[str, int] = {}
    columns: dict[str, list[int]] = {}
    for pod in members:
        for dim, amount in pod.requests.items():
            if amount > 0:
                request[dim] = request.get(dim, 0) + amount
                columns.setdefault(dim, []).append(amount)
    required = {}
    for dim, amounts in columns.items():
        # Members that ask nothing of `dim` count 0 among the smallest.
        zeros = len(members) - len(amounts)
        required[dim] = sum(sorted(amounts)[: max(0, need - zeros)])
    placed_on: dict[str, int] = {}
    for node in placed:
        placed_on[node] = placed_on.get(node, 0) + 1
    return Gang(request, required, placed_on, need)


def place_in_domains(
    snapshot: Snapshot,
    constraint: Constraint,
    gang: Gang,
    reserved: Mapping[str, ResourceVector],
    place: Place,
    weights: BinpackWeights = DEFAULT_WEIGHTS,
    inside: Collection[str] | None = None,
) -> Plan:
    """The gang's plan within one HyperNode (the module docstring), or why none holds it.
    `inside`: only HyperNodes within these nodes (a subgroup's, within its job's HyperNode:
    `place` itself keeps to them)."""
    tree: HyperNodeTree = snapshot.hypernodes
    bound = frozenset(inside) if inside is not None else None
    if not tree.ready:
        return Plan(ok=False, reason=f"{constraint.words}: waiting for the HyperNodes to be listed")
    tried: list[tuple[Domain, Plan]] = []
    short: list[tuple[Domain, _Room]] = []
    last: Plan | None = None
    for gradient in gradients(constraint, tree):
        ranked: list[tuple[tuple[float, float, str], Domain, _Room]] = []
        for domain in gradient:
            if domain is None:
                last = place(None)
                if last.ok:
                    return last
                continue
            if any(node not in domain.nodes for node in gang.placed_on):
                continue
            if bound is not None and not domain.nodes <= bound:
                continue
            room = _room(snapshot, domain.nodes, reserved)
            if any(room.free(d) < amount for d, amount in gang.required.items()):
                short.append((domain, room))  # Volcano's pre-filter: not enough idle room
                continue
            score = domain_score(gang.request, room.allocatable, room.used, weights)
            already = sum(n for node, n in gang.placed_on.items() if node in domain.nodes)
            ranked.append(((-score, -already, domain.name), domain, room))
        for _, domain, _room_of in sorted(ranked, key=lambda r: r[0]):
            plan = place(domain.nodes)
            if plan.ok:
                return plan
            tried.append((domain, plan))
    if last is not None:
        return last  # (the whole cluster was allowed: its reason is the plain one)
    return Plan(ok=False, reason=_reason(constraint, gang, tried, short, place))


def _reason(
    constraint: Constraint,
    gang: Gang,
    tried: list[tuple[Domain, Plan]],
    short: list[tuple[Domain, _Room]],
    place: Place,
) -> str:
    """Why no HyperNode holds the gang, naming the one that comes closest and what it lacks."""
    limit = "tier" if constraint.highest is None else f"tier <= {constraint.highest}"
    if not tried and not short:
        where = " holding the nodes of its placed members" if gang.placed_on else ""
        return f"{constraint.words}: no HyperNode of {limit}{where}"
    if tried:
        domain, plan = min(tried, key=lambda t: (-t[1].placed, t[0].tier, t[0].name))
    else:

        def fullness(entry: tuple[Domain, _Room]) -> float:
            room = entry[1]
            return min(room.free(d) / n for d, n in gang.required.items() if n > 0)

        domain = min(short, key=lambda e: (-fullness(e), e[0].tier, e[0].name))[0]
        plan = place(domain.nodes)
    return (
        f"{constraint.words}: no HyperNode of {limit} can hold the gang; the closest, "
        f"{domain.name} (tier {domain.tier}, {len(domain.nodes)} nodes), has room for "
        f"{plan.placed} of {gang.need} required members: {plan.reason}"
    )
