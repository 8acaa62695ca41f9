"""The Deployment controller's RollingUpdate arithmetic (pkg/controller/deployment/rolling.go
and util's NewRSNewReplicas), as pure functions over replica counts.

One step of a rolling update: the new ReplicaSet grows while the total stays within
`replicas + maxSurge`; old ReplicaSets shrink while the available pods stay at least
`replicas - maxUnavailable` — first their unhealthy pods (spec replicas above available), then
as many available ones as the budget allows, oldest ReplicaSet first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Counts:
    """One ReplicaSet as the arithmetic reads it."""

    name: str
    replicas: int  # spec.replicas
    available: int  # status.availableReplicas
    created: str = ""  # creationTimestamp, for oldest-first order


def new_replicas(want: int, max_surge: int, all_sets: list[Counts], new: Counts) -> int:
    """NewRSNewReplicas for RollingUpdate: how many replicas the new ReplicaSet should have."""
    current = sum(r.replicas for r in all_sets)
    max_total = want + max_surge
    if current >= max_total:
        return new.replicas
    return min(new.replicas + max_total - current, want)


def scale_down_old(
    want: int, max_unavailable: int, new: Counts, old: list[Counts]
) -> dict[str, int]:
    """reconcileOldReplicaSets: the old ReplicaSets to scale down, by name, to what."""
    if sum(r.replicas for r in old) == 0:
        return {}
    all_pods = new.replicas + sum(r.replicas for r in old)
    min_available = want - max_unavailable
    new_unavailable = new.replicas - new.available
    budget = all_pods - min_available - new_unavailable
    if budget <= 0:
        return {}
    ordered = sorted(old, key=lambda r: (r.created, r.name))
    replicas = {r.name: r.replicas for r in ordered}
    # Unhealthy pods first: they count as unavailable already.
    cleaned = 0
    for r in ordered:
        if cleaned >= budget:
            break
        unhealthy = replicas[r.name] - r.available
        if replicas[r.name] == 0 or unhealthy <= 0:
            continue
        step = min(budget - cleaned, unhealthy)
        replicas[r.name] -= step
        cleaned += step
    # Then available pods, keeping minAvailable.
    available = new.available + sum(r.available for r in ordered)
    if available > min_available:
        allowed = available - min_available
        done = 0
        for r in ordered:
            if done >= allowed:
                break
            if replicas[r.name] == 0:
                continue
            step = min(replicas[r.name], allowed - done)
            replicas[r.name] -= step
            done += step
    return {r.name: replicas[r.name] for r in ordered if replicas[r.name] != r.replicas}
