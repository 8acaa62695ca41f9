"""Volcano's reclaim and preempt actions for a gang, as pure decisions over a snapshot: which whole
units to evict so the gang can be placed.

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
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.actions import preempt, reclaim
from plugins.framework.decisions import Evictions
from plugins.framework.extension_points import Preemptor
from plugins.model.gang_fit import GangFit
from plugins.model.placement import Plan, Prefer, plan_gang
from plugins.model.queue_share import sum_vectors
from plugins.model.victims import VictimUnit, effective_units, walk_victims

if TYPE_CHECKING:
    from core.cache import Snapshot
    from plugins.framework.session import Session

__all__ = ["EvictionRequest", "Planned", "choose_evictions"]

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
    allocated: ResourceVector = _ZERO  # what the gang's job holds already (drf)
    whole_gangs: bool = True  # False: only units whose loss breaks no gang (elastic growth)


@dataclass(frozen=True, slots=True)
class Planned:
    """Evictions chosen with the placement they make possible."""

    evictions: Evictions
    plan: Plan


def choose_evictions(
    ssn: Session,
    group: PodGroupRecord,
    members: list[PodRecord],
    request: EvictionRequest,
    *,
    place: Callable[[Snapshot], Plan] | None = None,
) -> Planned | None:
    """The units to evict so the gang fits (reclaim, else preempt, as the conf lists them),
    with its placement; None when no acceptable set of units makes room. Which units are
    acceptable is the session's Reclaimable / Preemptable over each action's own candidates;
    `place` plans the gang on a trial snapshot (default `plan_gang`). An over-share
    preemption books what it frees in the session's share model (and undoes it when that is
    not enough)."""
    actions = set(ssn.policy.actions)
    may_reclaim = (
        reclaim.NAME in actions
        and request.over_share is None
        and ssn.preemptive(group.queue, request.demand)
    )
    if not may_reclaim and preempt.NAME not in actions:
        return None
    # Preempt alone takes only lower-priority work of the gang's queue.
    below = None if may_reclaim else request.priority
    units = ssn.victims_for(group.key, None if may_reclaim else group.queue, below)
    if not request.whole_gangs:
        units = [u for u in units if not u.breaks_gang]
    if not units:
        return None
    snapshot = ssn.snapshot
    # Only victims on nodes some member could use (kube-scheduler's filters, resources aside):
    # evicting elsewhere frees nothing the gang can take.
    fit = GangFit(snapshot, members)
    usable = {name for name, node in snapshot.nodes.items() if fit.any_ok(node)}
    units = [u for u in units if _on_usable_node(snapshot, u, usable)]
    if not units:
        return None
    # Victims that hold host ports or repel members matter beyond their resources: the trial
    # snapshots then leave them out entirely (only for gangs with such rules: a copy per trial).
    whole_pods = not fit.fast or fit.repelled
    preemptor = Preemptor(
        group=group.key,
        queue=group.queue,
        priority=request.priority,
        allocated=request.allocated,
        request=request.demand,
    )
    attempts: list[tuple[str, list[VictimUnit]]] = []
    if may_reclaim:
        attempts.append((reclaim.NAME, reclaim.accepted(ssn, preemptor, units)))
    if preempt.NAME in actions:
        attempts.append((preempt.NAME, preempt.accepted(ssn, preemptor, units)))

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
        if request.over_share is not None:
            freed = sum_vectors(unit.freed for unit in chosen)
            ssn.task_deallocated(group.queue, freed)
            if ssn.allocatable(group.queue, request.demand) is not None:
                ssn.task_allocated(group.queue, freed)  # undo: still over
                return None
        return Planned(Evictions(action, tuple(chosen), request.priority), plan)
    return None


def _on_usable_node(snapshot: Snapshot, unit: VictimUnit, usable: Collection[str]) -> bool:
    for pod_key in unit.pods:
        pod = snapshot.pods.get(pod_key)
        if pod is not None and pod.node in usable:
            return True
    return False
