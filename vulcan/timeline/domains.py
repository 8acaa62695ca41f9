"""Node lanes coloured by HyperNode (issue 50): each node's domain is the lowest-tier HyperNode
holding it (`core.api.topology_members.nodes_below`, as the scheduler resolves the tree), the
lanes are ordered domain by domain, and each domain's lanes get a pale band of its own colour
and a legend entry, so a gang kept inside one domain shows as bars inside one band."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import matplotlib
from matplotlib import colormaps
from matplotlib.patches import Patch
from pydantic import ValidationError

from core.api.topology import HyperNode
from core.api.topology_members import nodes_below

__all__ = ["domain_colours", "domain_handles", "draw_domains", "node_domains"]

Json = dict[str, Any]


def node_domains(hypernodes: Iterable[Json], nodes: Iterable[Json]) -> dict[str, tuple[str, int]]:
    """node -> (its lowest-tier HyperNode, that tier); ties go to the first name. HyperNodes
    that do not parse are left out (the webhook refuses them; an old object may remain)."""
    tree: dict[str, HyperNode] = {}
    for raw in hypernodes:
        try:
            found = HyperNode.model_validate(raw)
        except ValidationError:
            continue
        tree[found.metadata.name] = found
    labels = {
        (n.get("metadata") or {}).get("name") or "": (n.get("metadata") or {}).get("labels") or {}
        for n in nodes
    }
    known: dict[str, frozenset[str]] = {}
    best: dict[str, tuple[int, str]] = {}
    for name in sorted(tree):
        tier = tree[name].spec.tier
        for node in nodes_below(name, tree, labels, known):
            if node not in best or (tier, name) < best[node]:
                best[node] = (tier, name)
    return {node: (name, tier) for node, (tier, name) in best.items()}


def domain_colours(domains: Iterable[str]) -> dict[str, str]:
    """A pale colour per HyperNode (Pastel1, then Pastel2, cycling), in the order given."""
    colours = [matplotlib.colors.to_hex(c) for c in colormaps["Pastel1"].colors]
    colours += [matplotlib.colors.to_hex(c) for c in colormaps["Pastel2"].colors]
    return {name: colours[i % len(colours)] for i, name in enumerate(dict.fromkeys(domains))}


def domain_handles(lanes: list[str], domains: Mapping[str, tuple[str, int]]) -> list[Any]:
    """The legend entries: one per HyperNode with a lane, in lane order."""
    tiers = {domains[lane][0]: domains[lane][1] for lane in lanes if lane in domains}
    colours = domain_colours(tiers)
    return [
        Patch(facecolor=colour, edgecolor="none", label=f"HyperNode {name} (tier {tiers[name]})")
        for name, colour in colours.items()
    ]


def draw_domains(
    ax: Any, lanes: list[str], domains: Mapping[str, tuple[str, int]], rows: Mapping[str, Any]
) -> None:
    """A band behind each lane in its domain's colour. `rows`: lane -> (top, height) in the
    axes' y units."""
    colours = domain_colours(domains[lane][0] for lane in lanes if lane in domains)
    for lane in lanes:
        if lane in domains:
            top, height = rows[lane]
            colour = colours[domains[lane][0]]
            ax.axhspan(top, top + height, color=colour, alpha=0.6, zorder=0, linewidth=0)
