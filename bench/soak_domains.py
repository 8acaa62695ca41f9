"""The soak's topology invariants (issue 50), on the checker's records:

- domain split: a gang with a `hard` networkTopology whose live bound members are on nodes no
  single HyperNode of tier <= its `highestTierAllowed` holds (a tier at or above the cluster's
  own allows the whole cluster) — at once: a bound pod never moves, so a split never heals;
  each subgroup of a PodGroup's `subGroupPolicy` likewise within its policy's networkTopology.
  A split gang is partly bound across its domain: its time counts as a partial one's;
- partial subgroup: a subgroup (pods matching a policy's labelSelector and carrying its
  `matchLabelKeys` labels, as Volcano forms them) with 0 < live bound < `subGroupSize`, timed
  as a partial gang is (`Checker.partial_episode`);
- and, for the stall check, whether waiting members fit within one allowed HyperNode
  (`place`).

The tree is resolved from the watched HyperNodes and the nodes' labels by
`core.hypernode_tree.build_tree`, as the scheduler resolves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from bench.soak_fit import pack
from bench.soak_model import Group, Pod, Resources, sub
from core.api.topology_members import selector_matches
from core.hypernode_tree import Domain, HyperNodeTree
from plugins.model.subgroups import policy_selector

if TYPE_CHECKING:
    from bench.soak_checker import Checker

DOMAIN_SPLIT = "domain-split"
PARTIAL_SUBGROUP = "partial-subgroup"


def allowed_tier(topology: Mapping[str, Any] | None, tree: HyperNodeTree) -> int | None:
    """The highest tier a `hard` networkTopology lets the gang span; None when it does not
    bound it (soft, none, no tier, or a tier at or above the cluster's own)."""
    if not topology or (topology.get("mode") or "hard") != "hard":
        return None
    highest = topology.get("highestTierAllowed")
    if not isinstance(highest, int) or isinstance(highest, bool):
        name = topology.get("highestTierName")
        highest = tree.tier_names.get(str(name)) if name else None
    if highest is None or highest >= tree.top_tier:
        return None
    return highest


def split(nodes: set[str], tier: int, tree: HyperNodeTree) -> str:
    """ "" when one HyperNode of tier <= `tier` holds every node of `nodes`; else why not."""
    if not nodes or any(d.tier <= tier and nodes <= d.nodes for d in tree.domains.values()):
        return ""
    where = ", ".join(f"{node} ({_lowest(node, tree)})" for node in sorted(nodes))
    return f"live bound members on {where}: no HyperNode of tier <= {tier} holds them all"


def _lowest(node: str, tree: HyperNodeTree) -> str:
    holding = [d for d in tree.domains.values() if node in d.nodes]
    if not holding:
        return "in no HyperNode"
    lowest = min(holding, key=lambda d: (d.tier, d.name))
    return f"{lowest.name}, tier {lowest.tier}"


def subgroups(group: Group, members: Sequence[Pod]) -> dict[str, tuple[dict[str, Any], list[Pod]]]:
    """The PodGroup's subgroups among `members`: "<policy>-<values>" -> (its policy, its pods).
    A pod joins the first policy whose labelSelector it matches and whose every
    matchLabelKeys label it carries with a value; pods no policy takes form no subgroup."""
    out: dict[str, tuple[dict[str, Any], list[Pod]]] = {}
    selectors = [policy_selector(p.get("labelSelector")) for p in group.subgroups]
    for pod in members:
        for policy, selector in zip(group.subgroups, selectors, strict=True):
            if selector is not None and not selector_matches(selector, pod.labels):
                continue
            keys = policy.get("matchLabelKeys") or []
            values = [pod.labels.get(k, "") for k in keys]
            if not keys or not all(values):
                continue
            key = f"{policy.get('name') or ''}-{'-'.join(values)}"
            out.setdefault(key, (policy, []))[1].append(pod)
            break
    return out


def size_of(policy: Mapping[str, Any]) -> int:
    size = policy.get("subGroupSize")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 1


def check_domains(
    checker: Checker, key: str, group: Group | None, members: list[Pod], finishing: bool, now: float
) -> None:
    """Both topology invariants for gang `key` (its `members`; `finishing`: ending on purpose,
    so a subgroup short of members is not a partial placement)."""
    tree = checker.tree
    live = [p for p in members if p.live_bound]
    why = ""
    if group is not None and (tier := allowed_tier(group.topology, tree)) is not None:
        why = split({p.node for p in live}, tier, tree)
    checker.hold(DOMAIN_SPLIT, key, bool(why), now, 0.0, why and checker.describe(key, why))
    found = subgroups(group, members) if group is not None and group.subgroups else {}
    for name in checker.subgroups_seen.get(key, set()) - set(found):
        for kind in (DOMAIN_SPLIT, PARTIAL_SUBGROUP):
            checker.hold(kind, f"{key} {name}", False, now, 0.0, "")
    if found:
        checker.subgroups_seen[key] = set(found)
    else:
        checker.subgroups_seen.pop(key, None)
    for name, (policy, pods) in found.items():
        subject = f"{key} {name}"
        sub_live = {p.node for p in pods if p.live_bound}
        why = ""
        if (tier := allowed_tier(policy.get("networkTopology"), tree)) is not None:
            why = split(sub_live, tier, tree)
        told = f"subgroup {name} (subGroupSize {size_of(policy)}): {why}"
        checker.hold(
            DOMAIN_SPLIT, subject, bool(why), now, 0.0, why and checker.describe(key, told)
        )
        bound, size = sum(1 for p in pods if p.live_bound), size_of(policy)
        if bound >= size:
            checker.whole_subgroups.add(subject)
        checker.partial_episode(
            PARTIAL_SUBGROUP,
            subject,
            0 < bound < size and not finishing,
            bound,
            bare=group is not None and not group.job,
            now=now,
            describe=partial(checker.describe, key, f"subgroup {name}: {bound}/{size} live bound"),
        )


def place(
    tree: HyperNodeTree, group: Group, pods: list[Pod], room: dict[str, Resources]
) -> dict[int, str] | None:
    """Pod index -> node for `pods` within one HyperNode the gang's networkTopology allows
    (each subgroup within one of its own), or None when none holds them (greedy: a packing it
    misses is not reported as a stall)."""
    tier = allowed_tier(group.topology, tree)
    domains: list[Domain | None] = [None]
    if tier is not None:
        allowed = [d for d in tree.domains.values() if d.tier <= tier]
        domains = sorted(allowed, key=lambda d: (d.tier, _free_cpu(d, room), d.name))
    for domain in domains:
        nodes = room.keys() if domain is None else domain.nodes & room.keys()
        inside = {n: dict(room[n]) for n in nodes}
        placed = _place_subgroups(tree, group, pods, inside)
        if placed is not None:
            return placed
    return None


def _free_cpu(domain: Domain, room: dict[str, Resources]) -> int:
    return sum(room[n].get("cpu", 0) for n in domain.nodes if n in room)


def _place_subgroups(
    tree: HyperNodeTree, group: Group, pods: list[Pod], room: dict[str, Resources]
) -> dict[int, str] | None:
    index = {id(p): i for i, p in enumerate(pods)}
    found = subgroups(group, pods) if group.subgroups else {}
    placed: dict[int, str] = {}
    for _name, (policy, members) in sorted(found.items()):
        if len(members) < size_of(policy):
            return None  # it cannot be whole
        tier = allowed_tier(policy.get("networkTopology"), tree)
        options = [set(room)]
        if tier is not None:
            ranked = sorted(tree.domains.values(), key=lambda d: (d.tier, d.name))
            options = [d.nodes & room.keys() for d in ranked if d.tier <= tier]
        for nodes in options:
            got = pack([p.requests for p in members], {n: room[n] for n in nodes})
            if got is not None:
                for i, node in got.items():
                    room[node] = sub(room[node], members[i].requests)
                    placed[index[id(members[i])]] = node
                break
        else:
            return None
    rest = [p for p in pods if index[id(p)] not in placed]
    got = pack([p.requests for p in rest], room)
    if got is None:
        return None
    for i, node in got.items():
        placed[index[id(rest[i])]] = node
    return placed
