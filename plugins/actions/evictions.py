"""Volcano's reclaim and preempt actions for a gang, as pure decisions over a snapshot
(spec/volcano.md §3.7, §3.8): which whole units to evict so the gang can be placed.

A gang that passed its queue's checks but does not fit (each action only when the conf lists it):
- **reclaim** first, when its queue may still grow (`preemptive`: below its deserved share):
  whole units of other, reclaimable queues that hold more than they deserve (never below a
  guarantee, the share model's VictimJudge);
- else **preempt**: whole lower-priority units of its own queue.
Preemptable, non-critical units only, in victim order (`plugins.model.victims.walk_victims`), taken
until a whole-gang placement exists, then every unit the placement does without is given back.
A gang whose queue is at its share (`over_share`) may only preempt within its queue, and only
if what the victims free brings the queue back within its share. Pods already being freed are
no victims (their room is free in `reserved`). The extender applies the result (evictions,
events); nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from core.cache import Snapshot
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.framework.extension_points import PassState, Preemptor
from plugins.framework.policy import Policy
from plugins.model.elastic import surplus_members
from plugins.model.gang_fit import GangFit
from plugins.model.placement import Plan, Prefer, plan_gang
from plugins.model.queue_share import QueueInput, sum_vectors
from plugins.model.victims import (
    VictimUnit,
    effective_units,
    is_critical,
    select_victims,
    walk_victims,
)

_ZERO = ResourceVector()


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    """What the gang needs placed: `need` members (and `per_task` of each role), around the
    `reserved` room of other gangs; `demand` is what it takes from its queue."""

    need: int
    per_task: Mapping[str, int]
    reserved: Mapping[str, ResourceVector]
    demand: ResourceVector
    priority: int
    over_share: str | None = None
    prefer: Prefer = "binpack"
    actions: frozenset[str] = frozenset({"reclaim", "preempt"})  # the conf's, of these two
    allocated: ResourceVector = _ZERO  # what the gang's job holds already (drf)


@dataclass(frozen=True, slots=True)
class Evictions:
    action: str  # "reclaim" or "preempt"
    units: list[VictimUnit]
    plan: Plan  # the gang's placement once they are gone
    priority: int


def unit_of(
    group: str | None,
    queue: str,
    created: str,
    pods: Sequence[PodRecord],
    *,
    elastic: bool = False,
) -> VictimUnit:
    """One eviction decision: a whole running gang's bound members, one elastic member of a
    gang (`elastic`: the gang keeps its minimum without it), or one pod of no gang."""
    return VictimUnit(
        group=group,
        queue=queue,
        priority=max(pod.priority for pod in pods),
        pods=tuple(pod.key for pod in pods),
        freed=sum_vectors(pod.requests for pod in pods),
        preemptable=all(pod.annotations_preemptable for pod in pods),
        critical=any(is_critical(pod.priority_class, pod.namespace) for pod in pods),
        breaks_gang=group is not None and not elastic,
        creation=created,
        elastic=elastic,
    )


def victim_units(
    snapshot: Snapshot,
    exclude_group: str,
    releasing: Collection[str],
    queue_of: Callable[[PodRecord], str],
    served: Callable[[PodRecord], bool],
) -> list[VictimUnit]:
    """Everything that could be evicted, as whole units: each running gang (but
    `exclude_group`) with all its bound members (evicting some would leave it hanging), each
    elastic member of a gang above its minimum on its own (`plugins.model.elastic.surplus_members`),
    and each bound pod of no gang. Only pods vulcan schedules (`served`): another scheduler's
    pods are never victims, in a gang or not. Pods already being freed (terminating, or
    `releasing`) are none."""
    units: list[VictimUnit] = []
    for other in snapshot.podgroups.values():
        if other.key == exclude_group:
            continue
        bound = [
            pod
            for k in snapshot.pods_by_group.get(other.key, ())
            if (pod := snapshot.pods.get(k)) is not None
            and pod.occupies_node
            and not pod.deleting
            and k not in releasing
        ]
        if bound and all(served(pod) for pod in bound):
            for pod in surplus_members(
                bound,
                other.min_member,
                other.min_task_member,
                checks_tasks=other.min_member >= sum(other.min_task_member.values()),
            ):
                units.append(unit_of(other.key, other.queue, other.created, [pod], elastic=True))
            units.append(unit_of(other.key, other.queue, other.created, bound))
    for pod in snapshot.pods.values():
        if (
            pod.group is None
            and pod.occupies_node
            and not pod.deleting
            and pod.key not in releasing
            and served(pod)
        ):
            units.append(unit_of(None, queue_of(pod), pod.created, [pod]))
    return units


def choose_evictions(
    snapshot: Snapshot,
    group: PodGroupRecord,
    members: list[PodRecord],
    units: Sequence[VictimUnit],
    request: EvictionRequest,
    session: Policy,
    state: PassState,
    *,
    place: Callable[[Snapshot], Plan] | None = None,
) -> Evictions | None:
    """The units to evict so the gang fits (reclaim, else preempt), with its placement; None
    when no acceptable set of units makes room. Which units are acceptable is the session's
    Reclaimable / Preemptable (its plugins by tier) over the action's own candidates; `place`
    plans the gang on a trial snapshot (default `plan_gang`). An over-share preemption books
    what it frees in the pass's share model (and undoes it when that is not enough)."""
    if not units:
        return None
    # Only victims on nodes some member could use (kube-scheduler's filters, resources aside):
    # evicting elsewhere frees nothing the gang can take.
    fit = GangFit(snapshot, members)
    usable = {name for name, node in snapshot.nodes.items() if fit.any_ok(node)}
    units = [u for u in units if _on_usable_node(snapshot, u, usable)]
    # Victims that hold host ports or repel members matter beyond their resources: the trial
    # snapshots then leave them out entirely (only for gangs with such rules: a copy per trial).
    whole_pods = not fit.fast or fit.repelled
    if not units:
        return None
    model = state.model
    preemptor = Preemptor(
        group=group.key,
        queue=group.queue,
        priority=request.priority,
        allocated=request.allocated,
        request=request.demand,
    )
    attempts: list[tuple[str, list[VictimUnit]]] = []
    if (
        "reclaim" in request.actions
        and request.over_share is None
        and session.preemptive(group.queue, request.demand, state)
    ):
        attempts.append(("reclaim", accepted_victims("reclaim", session, state, preemptor, units)))
    if "preempt" in request.actions:
        attempts.append(("preempt", accepted_victims("preempt", session, state, preemptor, units)))

    def plan_on(trial: Snapshot) -> Plan:
        if place is not None:
            return place(trial)
        return plan_gang(
            trial,
            members,
            request.need,
            request.reserved,
            need_per_task=request.per_task,
            prefer=request.prefer,
        )

    def plan_without(chosen: list[VictimUnit]) -> Plan | None:
        if not chosen:
            return None
        requested = dict(snapshot.node_requested)
        for unit in effective_units(chosen):
            for pod_key in unit.pods:
                pod = snapshot.pods[pod_key]
                assert pod.node is not None
                requested[pod.node] = requested.get(pod.node, _ZERO).saturating_sub(pod.requests)
        trial = dataclasses.replace(snapshot, node_requested=requested)
        if whole_pods:
            gone = {pod_key for unit in chosen for pod_key in unit.pods}
            trial = dataclasses.replace(
                trial,
                pods={k: p for k, p in snapshot.pods.items() if k not in gone},
                anti_affinity_pods=frozenset(snapshot.anti_affinity_pods) - gone,
                host_port_pods=frozenset(snapshot.host_port_pods) - gone,
            )
        plan = plan_on(trial)
        return plan if plan.ok else None

    for action, allowed in attempts:
        if not allowed:
            continue
        walked = walk_victims(allowed, plan_without)
        if walked is None:
            continue
        chosen, plan = walked
        if request.over_share is not None and model is not None:
            freed = sum_vectors(unit.freed for unit in chosen)
            model.on_released(group.queue, freed)
            if session.allocatable(group.queue, request.demand, state) is not None:
                model.on_allocated(group.queue, freed)  # undo: still over
                return None
        return Evictions(action, chosen, plan, request.priority)
    return None


def _on_usable_node(snapshot: Snapshot, unit: VictimUnit, usable: Collection[str]) -> bool:
    for pod_key in unit.pods:
        pod = snapshot.pods.get(pod_key)
        if pod is not None and pod.node in usable:
            return True
    return False


def accepted_victims(
    action: str,
    session: Policy,
    state: PassState,
    preemptor: Preemptor,
    units: Sequence[VictimUnit],
) -> list[VictimUnit]:
    """The units `action` ("reclaim" or "preempt") may evict for `preemptor`: the action's
    own candidates (below), then the session's Reclaimable / Preemptable over them."""
    if action == "reclaim":
        inputs = state.inputs
        candidates = [u for u in units if _reclaim_candidate(u, preemptor.queue, inputs)]
        return session.reclaimable(preemptor, candidates, state)
    # Strictly lower priority whatever the conf's plugins (a conf without `priority` too):
    # two jobs of equal priority must never evict each other's work (no thrash).
    candidates = [
        u
        for u in units
        if _preempt_candidate(u, preemptor.queue, preemptor.group)
        and u.priority < preemptor.priority
    ]
    return session.preemptable(preemptor, candidates, state)


def victims_for_need(
    action: str,
    session: Policy,
    state: PassState,
    preemptor: Preemptor,
    need: ResourceVector,
    units: Sequence[VictimUnit],
) -> list[VictimUnit] | None:
    """The units to evict so that `need` (what is still missing after the free room, e.g. a
    node with 2 free GPUs and a pod asking for 4 needs 2) is freed: only units that free
    something still missing are offered to the session (so a queue's reclaimable surplus is
    not spent on a unit that does not help), then `plugins.model.victims.select_victims`. [] when
    nothing is needed, None when they cannot."""
    wanted = [name for name, amount in need.items() if amount > 0]
    helpful = [u for u in units if any(u.freed.get(name) > 0 for name in wanted)]
    allowed = accepted_victims(action, session, state, preemptor, helpful)
    return select_victims(need, allowed)


def _reclaim_candidate(unit: VictimUnit, queue: str, inputs: Mapping[str, QueueInput]) -> bool:
    """Reclaim's own candidates (Volcano's reclaim action): preemptable work of another queue
    that is reclaimable."""
    source = inputs.get(unit.queue)
    return unit.queue != queue and source is not None and source.reclaimable and unit.preemptable


def _preempt_candidate(unit: VictimUnit, queue: str, group: str) -> bool:
    """Preempt's own candidates (Volcano's preempt action): preemptable work of the same
    queue, not the preemptor's own job."""
    return unit.queue == queue and unit.group != group and unit.preemptable
