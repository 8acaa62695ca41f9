"""A gang that waits for its network-topology constraint (`spec.networkTopology`): the cluster
may have room for it, but no HyperNode domain it is allowed has (issue 50). The extender's
planner says so in the gang's reason ("networkTopology hard, highestTierAllowed 1: no HyperNode
of tier <= 1 can hold the gang; the closest, ..."); explain names it as the cause, with what
would lift it. Pure: no I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING

from explain.texts import Finding, origin_reason, short, unschedulable_message

if TYPE_CHECKING:
    from explain.gang_causes import GangCase

MARK = "networkTopology "


def network_topology(case: GangCase) -> Finding | None:
    """The gang waits for a domain its networkTopology allows (the extender's words)."""
    spec = case.raw.get("spec") or {}
    topology = spec.get("networkTopology")
    if case.admitted or not isinstance(topology, dict):
        return None
    reason = (case.gang or {}).get("reason") or origin_reason(unschedulable_message(case.raw))
    if MARK not in reason:
        return None
    said = reason[reason.index(MARK) :]
    unblock = ["free room inside one HyperNode the constraint allows (fewer or smaller pods)"]
    if topology.get("mode", "hard") == "hard":
        tier = topology.get("highestTierAllowed")
        unblock.append(
            "allow a higher tier (spec.networkTopology.highestTierAllowed"
            + (f", now {tier})" if tier is not None else ")")
            + " or mode: soft (the lowest tier that fits, else anywhere)"
        )
    return Finding("network-topology", f"waits for one HyperNode domain: {short(said)}", unblock)
