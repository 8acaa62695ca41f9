"""A gang's placement under its networkTopology, as allocate and backfill ask for it: the
constraint when the conf has network-topology-aware (Volcano enforces it only then), and
`plan_gang` run within one HyperNode at a time (`plugins.model.domains`). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.builtin.network_topology import NAME as NETWORK_TOPOLOGY
from plugins.framework.inputs import TOPOLOGY
from plugins.model import domains
from plugins.model.placement import Plan, plan_gang

if TYPE_CHECKING:
    from core.cache import Snapshot
    from plugins.framework.session import Session

__all__ = ["Network", "network_topology", "placed_nodes", "plan_in_domain"]

Network = tuple[domains.Constraint, domains.BinpackWeights]


def network_topology(ssn: Session, group: PodGroupRecord) -> Network | None:
    """The gang's networkTopology and the plugin's binpacking weights, when the conf has
    network-topology-aware and the PodGroup a networkTopology; its placement reads the tree."""
    plugin = ssn.policy.plugins.get(NETWORK_TOPOLOGY)
    if plugin is None or not group.network_topology:
        return None
    ssn.read(TOPOLOGY)
    constraint = domains.constraint_of(group.network_topology, ssn.snapshot.hypernodes)
    if constraint is None:
        return None
    return constraint, plugin.binpack_weights()


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
