"""The backfill action: elastic members of admitted gangs (beyond the gang's minimum), member by
member. Volcano's backfill places best-effort tasks; members that request nothing go through
kube-scheduler's own path here, so vulcan's backfill grows the running jobs instead.

A gang is admitted whole on its minimum (allocate); the members beyond it come one at a time,
each within its queue's Allocatable (deserved share, capability). Filter judges the ones
kube-scheduler brings; the members it refused wait (the extender's facts), and each session,
for one member per gang:

- if its queue refuses it still, or drains for a starving gang (a hold phase), it waits;
- if some node has room, it gets a slot there;
- else reclaim (from queues above their deserved share) or preempt (lower-priority work of its
  own queue) frees room for it, taking only units whose loss breaks no gang: elastic members
  of other jobs, one at a time, and pods of no gang (Volcano's gang plugin: a victim only while
  its job keeps its minimum). It is pipelined onto that room like an admitted gang's member.

So two queues' elastic jobs settle at their deserved shares (weights 1:3 of 8 slots: 2 and 6),
each reclaim taking one member for one member."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.actions.backfill_subgroups import grow_subgroup
from plugins.actions.domain_place import (
    Network,
    network_topology,
    placed_nodes,
    plan_in_domain,
    subgroup_member,
    subgroups,
)
from plugins.actions.evictions import EvictionRequest, choose_evictions
from plugins.framework.decisions import ADMITTED, Grown
from plugins.model.job_input import job_input
from plugins.model.placement import Plan, plan_gang

if TYPE_CHECKING:
    from core.cache import Snapshot
    from plugins.framework.session import Session

__all__ = ["NAME", "Backfill", "grow"]

NAME = "backfill"


class Backfill:
    name = NAME

    def execute(self, ssn: Session) -> None:
        snapshot = ssn.snapshot
        for key, waiting in sorted(ssn.elastic_waiting.items()):
            group = snapshot.podgroups.get(key)
            if group is None or not ssn.is_admitted(key):
                continue
            # A subgroup's member grows alone as the one member its subgroup misses (or one
            # beyond its size), within its subgroup's HyperNode; with more missing, the
            # subgroup's missing members grow together or not at all.
            sub = subgroups(ssn, group, snapshot.group_pods(key))
            for pod_key in sorted(waiting):
                growth = subgroup_member(ssn, group, sub, pod_key) if sub is not None else None
                place_as = None if growth is None else (growth.network, growth.placed)
                pod = snapshot.pods.get(pod_key)
                if (
                    pod is None
                    or pod.node is not None
                    or pod.terminal
                    or pod.deleting
                    or ssn.room.held(pod_key) is not None
                ):
                    continue
                if ssn.starvation.holding(group.queue, ssn.now) is not None:
                    break  # its queue drains for a starving gang
                if growth is not None and growth.missing > 1:
                    together = grow_subgroup(ssn, group, growth, waiting, NAME)
                    if not together:
                        continue  # (the subgroup cannot grow whole now: maybe another can)
                    for whole in together:
                        ssn.take(whole, group)
                    break  # one subgroup per gang and session
                if ssn.allocatable(group.queue, pod.requests) is not None:
                    break  # the queue is at its share: no member of this gang grows now
                grown = grow(ssn, group, pod, place_as)
                if grown is not None:
                    ssn.take(grown, group)
                break  # one member per gang and session: the next sees the queue with it


def grow(
    ssn: Session,
    group: PodGroupRecord,
    pod: PodRecord,
    place_as: tuple[Network | None, list[str]] | None = None,
) -> Grown | None:
    """A slot for one elastic member: on free room, else on room evictions free; with a
    networkTopology, within a HyperNode that holds the gang's other members (`place_as`: a
    subgroup's networkTopology and the nodes of its members, instead of the gang's)."""
    snapshot, prefer = ssn.snapshot, ssn.settings.prefer
    if place_as is not None:
        network, placed = place_as
    else:
        network = network_topology(ssn, group)
        placed = placed_nodes(ssn, group) if network is not None else []

    def place(on: Snapshot, reserved: Mapping[str, ResourceVector]) -> Plan:
        if network is not None:
            return plan_in_domain(on, network, [pod], 1, reserved, placed, prefer=prefer)
        return plan_gang(on, [pod], 1, reserved, prefer=prefer)

    reserved = ssn.room.reserved
    plan = place(snapshot, reserved)
    future = ssn.room.future()
    if not plan.ok and future is not None:
        reserved = future
        plan = place(snapshot, reserved)
    evictions = None
    if not plan.ok:
        job = job_input(snapshot, group)
        request = EvictionRequest(
            need=1,
            per_task={},
            reserved=reserved,
            demand=pod.requests,
            priority=job.priority,
            prefer=prefer,
            allocated=job.allocated,
            whole_gangs=False,  # an elastic member never breaks another gang
        )
        planned = choose_evictions(
            ssn, group, [pod], request, place=lambda trial: place(trial, request.reserved)
        )
        if planned is None:
            return None
        plan, evictions = planned.plan, planned.evictions
    node = plan.slots.get(pod.key)
    if node is None:
        return None
    return Grown(
        group.key,
        group.queue,
        ADMITTED,
        NAME,
        pod=pod.key,
        node=node,
        request=pod.requests,
        evictions=evictions,
    )
