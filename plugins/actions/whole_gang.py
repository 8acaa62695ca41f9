"""Place a whole gang or say why not (Volcano's allocate for one job, its statement committed only
when the job is ready): JobValid, then the queue (the enqueue votes for a job not enqueued yet,
Allocatable for the room it takes), then a placement of every required member on the idle room
(`plugins.model.placement.plan_gang`, or bucket by bucket with task-topology), then on the room
being freed (Volcano's FutureIdle: pipelined), then, when the conf has reclaim or preempt, on
the room evictions would free (`plugins.actions.evictions`). A job the enqueue votes refuse may
still be placed on the promise of eviction (`plugins.actions.promise`). Pure: no I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.actions import preempt
from plugins.actions.domain_place import (
    network_topology,
    placed_nodes,
    plan_in_domain,
    plan_with_subgroups,
    subgroups,
)
from plugins.actions.evictions import EvictionRequest, choose_evictions
from plugins.actions.promise import enqueue_by_eviction, held_by_peers
from plugins.builtin.task_topology import (
    TaskTopology,
    TaskTopologyError,
    parse_task_topology,
    plan_topology_gang,
)
from plugins.framework.decisions import Evictions
from plugins.model import gang_ready
from plugins.model.demand import gang_demand
from plugins.model.elastic import trim_elastic
from plugins.model.gang import GangView
from plugins.model.job_order import JobInput
from plugins.model.placement import Plan, plan_gang
from plugins.model.subgroup_plan import keep_whole, placement_order
from plugins.model.subgroups import SubGroups
from plugins.model.victims import effective_units

if TYPE_CHECKING:
    from core.cache import Snapshot
    from plugins.framework.session import Session

__all__ = ["Admission", "allocate_gang"]

_ZERO = ResourceVector()


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer for one gang: a placement (`plan`, ok) reached on the idle room, on the room
    being freed, or after `evictions`; or why not (`reason`); `at_enqueue`: refused by the
    enqueue votes (a gang its queue has not enqueued yet)."""

    plan: Plan | None = None
    evictions: Evictions | None = None
    reason: str | None = None
    demand: ResourceVector = _ZERO
    at_enqueue: bool = False
    unmade: bool = False  # refused by JobValid


def allocate_gang(ssn: Session, group: PodGroupRecord, view: GangView, job: JobInput) -> Admission:
    """Place the whole gang or say why not (the module docstring)."""
    key = group.key
    invalid = ssn.job_valid(view)
    if invalid is not None:
        return Admission(reason=invalid, unmade=True)
    members = gang_ready.pending_members(view)
    need = gang_ready.members_needed(view)
    demand = gang_demand(group, members, need, view)
    # Volcano's enqueue looks at Pending jobs only. Enqueued already, its minResources are
    # counted in the queue's `inqueue`; running (a gang that lost members: Running, Unknown),
    # its bound members are in `allocated`: judging its minResources again would count them
    # twice (a real soak: one member of three bound for minutes, its replacements refused).
    pending = group.phase in ("Pending", "")  # not past Volcano's enqueue yet
    refusal = ssn.enqueue_refusal(job) if pending else None
    over_share = ssn.allocatable(group.queue, demand)
    refused = refusal.reason if refusal is not None else None
    promise = None
    if refusal is not None:
        # Enqueued on the promise of eviction when lower-priority work (or a queue over its
        # share) holds what the votes refuse: the eviction below makes the room.
        promise = enqueue_by_eviction(ssn, job)
        if promise is None:
            return Admission(
                reason=f"gang {key}: waiting for admission: {refused}",
                at_enqueue=True,
            )
    else:
        # Its pods beyond what its queue's books count for it (its minResources in `inqueue`,
        # none before it is enqueued) must fit too: allocated + inqueue never pass
        # realCapability (issue 48). Room evictions would free may make it fit.
        counted = ssn.counted_inqueue(group)
        extra = demand.saturating_sub(counted) if counted is not None else demand
        room = ssn.room_refusal(group.queue, extra) if not extra.is_zero() else None
        if room is not None:
            promise = enqueue_by_eviction(ssn, dataclasses.replace(job, min_resources=extra))
            if promise is None:
                return Admission(
                    reason=f"gang {key}: waiting for admission: {room}",
                    at_enqueue=pending,
                )
            refused = room
    # From here on the answer depends on the rest of the cluster.
    per_task = gang_ready.missing_task_members(view)
    topology = _topology(ssn, group, view)
    prefer = ssn.settings.prefer
    held = ssn.room.held
    network = network_topology(ssn, group)
    placed = placed_nodes(ssn, group) if network is not None else []
    sub = subgroups(ssn, group, view.members)

    def place(reserved: Mapping[str, ResourceVector], on: Snapshot) -> Plan:
        if sub is not None:
            return plan_with_subgroups(
                ssn, on, network, sub, members, need, per_task, reserved, placed,
                prefer=prefer, held=held,
            )  # fmt: skip
        if network is not None:
            return plan_in_domain(
                on, network, members, need, reserved, placed,
                need_per_task=per_task, prefer=prefer, held=held,
            )  # fmt: skip
        if topology is not None:
            return plan_topology_gang(
                on, members, need, reserved, topology, need_per_task=per_task, held=held
            )
        return plan_gang(
            on, members, need, reserved, need_per_task=per_task, prefer=prefer, held=held
        )

    ssn.room_read()
    snapshot = ssn.snapshot
    plan = None
    reserved: Mapping[str, ResourceVector] = ssn.room.reserved
    if over_share is None and promise is None:
        plan = place(reserved, snapshot)
    future = ssn.room.future()
    if future is not None:
        # Room being freed counts as free (FutureIdle): tried after the idle room (as Volcano
        # allocates before it pipelines), and before any new eviction.
        reserved = future
        if plan is not None and not plan.ok:
            plan = place(reserved, snapshot)
    if plan is not None and plan.ok:
        plan = _within_queue(ssn, group.queue, demand, plan, members, need, per_task, sub)
        if not plan.ok:
            return Admission(reason=f"gang {key}: waiting for admission: {plan.reason}")
        return Admission(plan=plan, demand=demand)
    request = EvictionRequest(
        need=need,
        per_task=per_task,
        reserved=reserved,
        demand=demand,
        priority=job.priority,
        over_share=over_share,
        prefer=prefer,
        allocated=job.allocated,
    )
    planned = choose_evictions(
        ssn, group, members, request, place=lambda trial: place(reserved, trial)
    )
    if planned is None:
        why = over_share or (plan.reason if plan is not None else "") or refused or ""
        if preempt.NAME in ssn.policy.actions:
            # What it waits for: its queue's room is held by work it may not preempt.
            why += held_by_peers(group.queue, job.priority, ssn.victims_for(key, group.queue))
        return Admission(reason=f"gang {key}: waiting for admission: {why}")
    evictions = planned.evictions
    if promise is not None:
        # What the enqueue votes were promised goes too (evicting more only frees more room:
        # the placement stays valid).
        units = effective_units({u.pods: u for u in [*evictions.units, *promise.units]}.values())
        evictions = dataclasses.replace(evictions, units=tuple(units))
    plan = _within_queue(ssn, group.queue, demand, planned.plan, members, need, per_task, sub)
    if not plan.ok:
        return Admission(reason=f"gang {key}: waiting for admission: {plan.reason}")
    return Admission(plan=plan, evictions=evictions, demand=demand)


def _within_queue(
    ssn: Session,
    queue: str,
    demand: ResourceVector,
    plan: Plan,
    members: list[PodRecord],
    need: int,
    per_task: Mapping[str, int],
    sub: SubGroups | None = None,
) -> Plan:
    """The plan with only the elastic members (beyond the gang's minimum) its queue may take,
    judged one at a time after the minimum (`plugins.model.elastic.trim_elastic`): a gang's
    surplus never takes its queue past its deserved share or capability. Subgroups are kept
    whole or not at all, in the order they were placed (not ok: then it is short of `need`)."""
    if len(plan.slots) <= need:
        return plan
    # Booked with the session's Allocate handlers while judged, and taken back after with
    # its Deallocate handlers (Volcano's statement discarded): the action books the gang once
    # it is placed.
    ssn.task_allocated(queue, demand)
    booked: list[ResourceVector] = [demand]

    def accept(pod: PodRecord) -> bool:
        if ssn.allocatable(queue, pod.requests) is not None:
            return False
        ssn.task_allocated(queue, pod.requests)
        booked.append(pod.requests)
        return True

    order = members if sub is None else placement_order(sub, members)
    try:
        kept = trim_elastic(plan.slots, order, need, per_task, accept)
    finally:
        for amount in booked:
            ssn.task_deallocated(queue, amount)
    if sub is not None:
        kept = keep_whole(sub, plan.slots, kept)
        if len(kept) < need:
            why = "its queue cannot take the subgroups it needs whole"
            return Plan(ok=False, reason=why, placed=len(kept))
    if len(kept) == len(plan.slots):
        return plan
    requests = {pod.key: pod.requests for pod in members}
    used: dict[str, ResourceVector] = {}
    for pod_key, node in kept.items():
        used[node] = used.get(node, _ZERO) + requests[pod_key]
    return dataclasses.replace(plan, slots=kept, used=used, placed=len(kept))


def _topology(ssn: Session, group: PodGroupRecord, view: GangView) -> TaskTopology | None:
    """The gang's task-topology, when the conf has the plugin and the PodGroup asks for it (an
    invalid annotation is ignored, as Volcano's plugin ignores the job)."""
    plugin = ssn.policy.plugins.get("task-topology")
    if plugin is None or not plugin.co_locates:  # weight <= 0: its node order adds nothing
        return None
    try:
        return parse_task_topology(group.annotations, {pod.task or "" for pod in view.members})
    except TaskTopologyError:
        return None
