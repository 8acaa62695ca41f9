"""A gang's placement under its networkTopology, as allocate and backfill ask for it: the
constraint when the conf has network-topology-aware (Volcano enforces it only then), and
`plan_gang` run within one HyperNode at a time (`plugins.model.domains`); and a gang with
subgroups placed subgroup by subgroup (`plugins.model.subgroup_plan`), each within a HyperNode
of its own networkTopology inside the job's. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.builtin.network_topology import NAME as NETWORK_TOPOLOGY
from plugins.framework.inputs import TOPOLOGY
from plugins.model import domains
from plugins.model.placement import Plan, plan_gang
from plugins.model.subgroup_plan import plan_subgroups
from plugins.model.subgroups import DEFAULT, SubGroups, subgroups_of

if TYPE_CHECKING:
    from core.cache import Snapshot
    from plugins.framework.session import Session

__all__ = [
    "Growth",
    "Network",
    "network_topology",
    "placed_nodes",
    "plan_in_domain",
    "plan_with_subgroups",
    "subgroup_member",
    "subgroups",
]

Network = tuple[domains.Constraint, domains.BinpackWeights]


def _weights(ssn: Session) -> domains.BinpackWeights | None:
    plugin = ssn.policy.plugins.get(NETWORK_TOPOLOGY)
    return None if plugin is None else plugin.binpack_weights()


def network_topology(ssn: Session, group: PodGroupRecord) -> Network | None:
    """The gang's networkTopology and the plugin's binpacking weights, when the conf has
    network-topology-aware and the PodGroup a networkTopology; its placement reads the tree."""
    weights = _weights(ssn)
    if weights is None or not group.network_topology:
        return None
    ssn.read(TOPOLOGY)
    constraint = domains.constraint_of(group.network_topology, ssn.snapshot.hypernodes)
    if constraint is None:
        return None
    return constraint, weights


def subgroups(ssn: Session, group: PodGroupRecord, pods: Sequence[PodRecord]) -> SubGroups | None:
    """The gang's subgroups (`plugins.model.subgroups`), None without any; with the plugin in
    the conf their placement reads the tree."""
    if not group.spec.get("subGroupPolicy"):
        return None
    found = subgroups_of(group.spec, pods)
    if not found.any:
        return None
    if _weights(ssn) is not None:
        ssn.read(TOPOLOGY)
    return found


def placed_nodes(ssn: Session, group: PodGroupRecord) -> list[str]:
    """The nodes the gang's members hold: bound (and not leaving) or given a slot."""
    snapshot = ssn.snapshot
    out = []
    for key in sorted(snapshot.pods_by_group.get(group.key, ())):
        pod = snapshot.pods.get(key)
        if pod is None or pod.terminal or pod.deleting:
            continue
        node = pod.node or ssn.room.held(key)
        if node is not None:
            out.append(node)
    return out


def plan_in_domain(
    on: Snapshot,
    network: Network,
    members: Sequence[PodRecord],
    need: int,
    reserved: Mapping[str, ResourceVector],
    placed: Sequence[str],
    **plan: Any,
) -> Plan:
    """`plan_gang(on, members, need, reserved, **plan)` within one HyperNode the constraint
    allows that holds the nodes in `placed`, or why none does."""
    constraint, weights = network

    def within(nodes: Collection[str] | None) -> Plan:
        return plan_gang(on, members, need, reserved, within=nodes, **plan)

    gang = domains.gang_of(members, need, placed)
    return domains.place_in_domains(on, constraint, gang, reserved, within, weights)


def plan_with_subgroups(
    ssn: Session,
    on: Snapshot,
    network: Network | None,
    sub: SubGroups,
    members: Sequence[PodRecord],
    need: int,
    need_per_task: Mapping[str, int],
    reserved: Mapping[str, ResourceVector],
    placed: Sequence[str],
    **plan: Any,
) -> Plan:
    """The gang placed subgroup by subgroup, within one HyperNode of its own networkTopology
    (`network`, tried as `plan_in_domain` tries them) when it has one."""
    weights = _weights(ssn)

    def for_job(inside: Collection[str] | None) -> Plan:
        bound = None if inside is None else frozenset(inside)

        def place(
            waiting: Sequence[PodRecord],
            count: int,
            room: Mapping[str, ResourceVector],
            topology: Mapping[str, Any] | None,
            placed_here: list[str],
        ) -> Plan:
            def within(nodes: Collection[str] | None) -> Plan:
                if bound is not None:
                    nodes = bound if nodes is None else [n for n in nodes if n in bound]
                return plan_gang(on, waiting, count, room, within=nodes, **plan)

            constraint = None
            if weights is not None and topology:
                constraint = domains.constraint_of(topology, on.hypernodes)
            if constraint is None or weights is None:
                return within(None)
            gang = domains.gang_of(waiting, count, placed_here)
            return domains.place_in_domains(on, constraint, gang, room, within, weights, inside)

        return plan_subgroups(sub, members, need, need_per_task, reserved, place)

    if network is None:
        return for_job(None)
    constraint, job_weights = network
    gang = domains.gang_of(members, need, placed)
    return domains.place_in_domains(on, constraint, gang, reserved, for_job, job_weights)


@dataclass(frozen=True, slots=True)
class Growth:
    """How an elastic member of a subgroup may be placed: with the `missing` members of its
    subgroup (`pending`: the subgroup's members waiting for a node), within a HyperNode of
    `network` (the subgroup's networkTopology, else the gang's) holding the nodes `placed`."""

    network: Network | None
    placed: list[str]
    missing: int
    pending: list[PodRecord]


def subgroup_member(
    ssn: Session, group: PodGroupRecord, sub: SubGroups, pod_key: str
) -> Growth | None:
    """The growth of `pod_key`'s subgroup, None when it is in no subgroup (it grows as any
    member)."""
    for subgroup in sub.groups:
        if subgroup.key == DEFAULT or all(pod.key != pod_key for pod in subgroup.members):
            continue
        placed: list[str] = []
        pending: list[PodRecord] = []
        for pod in subgroup.members:
            if pod.terminal or pod.deleting:
                continue
            node = pod.node or ssn.room.held(pod.key)
            if node is not None:
                placed.append(node)
            else:
                pending.append(pod)
        missing = subgroup.size - len(placed)
        weights = _weights(ssn)
        constraint = None
        if weights is not None and subgroup.topology:
            constraint = domains.constraint_of(subgroup.topology, ssn.snapshot.hypernodes)
        if constraint is None or weights is None:
            network = network_topology(ssn, group)
            gang_placed = placed_nodes(ssn, group) if network is not None else []
            return Growth(network, gang_placed, missing, pending)
        return Growth((constraint, weights), placed, missing, pending)
    return None
