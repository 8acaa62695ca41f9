"""The HyperNode tree as scheduling reads it: each HyperNode's tier, the nodes below it
(`core.api.topology_members.nodes_below`: exact, regex and label members, nested HyperNodes)
and its parent; the tier names (a networkTopology's `highestTierName`); and whether the
HyperNodes have been listed at all (Volcano's HyperNodesReadyToSchedule). Built by
`build_tree` from the informed HyperNodes and the nodes' labels; immutable. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.api.topology import HyperNode
from core.api.topology_members import child_hypernodes, nodes_below

__all__ = ["EMPTY_TREE", "Domain", "HyperNodeTree", "build_tree"]


@dataclass(frozen=True, slots=True)
class Domain:
    """One HyperNode: a network performance domain."""

    name: str
    tier: int
    nodes: frozenset[str]
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class HyperNodeTree:
    domains: Mapping[str, Domain] = field(default_factory=dict)
    tier_names: Mapping[str, int] = field(default_factory=dict)  # tierName -> tier
    ready: bool = True  # False until the HyperNodes have been listed

    @property
    def tiers(self) -> tuple[int, ...]:
        return tuple(sorted({d.tier for d in self.domains.values()}))

    @property
    def top_tier(self) -> int:
        """The tier of the cluster as a whole (Volcano's ClusterTopHyperNode): one above the
        highest HyperNode's, 1 without HyperNodes."""
        tiers = self.tiers
        return tiers[-1] + 1 if tiers else 1

    def of_tier(self, tier: int) -> list[Domain]:
        """The HyperNodes of `tier`, by name."""
        return sorted((d for d in self.domains.values() if d.tier == tier), key=lambda d: d.name)


EMPTY_TREE = HyperNodeTree()


def build_tree(
    hypernodes: Mapping[str, HyperNode],
    node_labels: Mapping[str, Mapping[str, str]],
    *,
    ready: bool = True,
) -> HyperNodeTree:
    """The tree of `hypernodes` (name -> spec) over the nodes `node_labels` (name -> labels)
    knows: a member naming a node that does not exist selects nothing."""
    known: dict[str, frozenset[str]] = {}
    parents: dict[str, str] = {}
    for name in sorted(hypernodes):
        for child in child_hypernodes(hypernodes[name], hypernodes):
            parents.setdefault(child, name)
    domains = {
        name: Domain(
            name,
            hypernode.spec.tier,
            nodes_below(name, hypernodes, node_labels, known),
            parents.get(name),
        )
        for name, hypernode in hypernodes.items()
    }
    tier_names: dict[str, int] = {}
    for hypernode in hypernodes.values():
        if hypernode.spec.tier_name:
            tier_names.setdefault(hypernode.spec.tier_name, hypernode.spec.tier)
    return HyperNodeTree(domains, tier_names, ready)
