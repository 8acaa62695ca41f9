"""The nodes a gang member may be re-planned onto by the filter (a member beyond minMember, or
one whose slot is not usable) so that its gang stays within one HyperNode its networkTopology
allows, and its subgroup within one of its own: the pass placed the other members there, and a
member re-planned onto any candidate with room split the gang across its domain (issue 50's
soak: elastic members and members of a gang admitted onto its victims' room landed outside).
Only with network-topology-aware in the conf (Volcano enforces the constraint only then)."""

from __future__ import annotations

from collections.abc import Iterable

from core.cache import ClusterCache
from core.records import PodGroupRecord, PodRecord
from extender.ledger import GangLedger
from plugins.builtin.network_topology import NAME as NETWORK_TOPOLOGY
from plugins.framework.policy import Policy
from plugins.model import domains
from plugins.model.subgroups import DEFAULT, subgroups_of


def domain_nodes(
    policy: Policy, cache: ClusterCache, ledger: GangLedger, group: PodGroupRecord, pod_key: str
) -> tuple[frozenset[str] | None, str]:
    """The nodes member `pod_key` of `group` may take (None: any) and the constraints that
    bound them, in words for a refusal."""
    if NETWORK_TOPOLOGY not in policy.plugins:
        return None, ""
    if not group.network_topology and not group.spec.get("subGroupPolicy"):
        return None, ""
    tree = cache.topology.tree()
    pods = cache.pods
    members = [pod for key in cache.pods_by_group.get(group.key, ()) if (pod := pods.get(key))]
    allowed: frozenset[str] | None = None
    words: list[str] = []

    def bound_by(raw: object, others: Iterable[PodRecord], what: str) -> None:
        nonlocal allowed
        constraint = domains.constraint_of(raw if isinstance(raw, dict) else None, tree)
        if constraint is None:
            return
        nodes = domains.nodes_allowed(constraint, tree, _placed(others, pod_key, ledger))
        if nodes is not None:
            allowed = nodes if allowed is None else allowed & nodes
            words.append(what + constraint.words)

    bound_by(group.network_topology, members, "")
    if group.spec.get("subGroupPolicy"):
        for sub in subgroups_of(group.spec, members).groups:
            if sub.key != DEFAULT and any(p.key == pod_key for p in sub.members):
                bound_by(sub.topology, sub.members, f"subgroup {sub.key}: ")
    return allowed, "; ".join(words)


def _placed(members: Iterable[PodRecord], pod_key: str, ledger: GangLedger) -> set[str]:
    """The nodes the other members hold: bound (not leaving) or given a slot."""
    slot_of = ledger.slot_of
    out = set()
    for pod in members:
        if pod.key == pod_key or pod.terminal or pod.deleting:
            continue
        node = pod.node or slot_of(pod.key)
        if node is not None:
            out.add(node)
    return out
