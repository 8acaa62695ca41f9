"""Backfill of a subgroup missing several members (an admitted gang above its minimum whose
subgroup lost members): its missing members get slots together, within a HyperNode of the
subgroup's networkTopology holding its placed members, or none does (a subgroup is never half
placed). On free room or room being freed; no evictions for it. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from core.records import PodGroupRecord
from core.resources import ResourceVector
from plugins.actions.domain_place import Growth, plan_in_domain
from plugins.framework.decisions import ADMITTED, Grown
from plugins.model.placement import Plan, plan_gang
from plugins.model.queue_share import sum_vectors

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["grow_subgroup"]


def grow_subgroup(
    ssn: Session, group: PodGroupRecord, growth: Growth, waiting: Collection[str], action: str
) -> list[Grown]:
    """A Grown (of `action`) for each of the subgroup's `growth.missing` members (of those
    waiting), or none."""
    pods = [pod for pod in growth.pending if pod.key in waiting]
    if len(pods) < growth.missing:
        return []  # (kube-scheduler has not brought them all yet)
    pods = pods[: growth.missing]
    if ssn.allocatable(group.queue, sum_vectors(pod.requests for pod in pods)) is not None:
        return []
    prefer = ssn.settings.prefer

    def place(room: Mapping[str, ResourceVector]) -> Plan:
        if growth.network is not None:
            return plan_in_domain(
                ssn.snapshot, growth.network, pods, len(pods), room, growth.placed, prefer=prefer
            )
        return plan_gang(ssn.snapshot, pods, len(pods), room, prefer=prefer)

    plan = place(ssn.room.reserved)
    future = ssn.room.future()
    if not plan.ok and future is not None:
        plan = place(future)
    if not plan.ok:
        return []
    return [
        Grown(
            group.key,
            group.queue,
            ADMITTED,
            action,
            pod=pod.key,
            node=plan.slots[pod.key],
            request=pod.requests,
        )
        for pod in pods
    ]
