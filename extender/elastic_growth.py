"""Elastic members of admitted gangs (members beyond the gang's minimum), member by member.

A gang is admitted whole on its minimum (the allocate action, `plugins.framework.cycle`); the
members beyond it come one at a time, each within its queue's Allocatable (deserved share,
capability). Filter judges the ones kube-scheduler brings (`GangVerbs._elastic_refused`); the
members it refused wait here (`GangScheduler.elastic_waiting`), and each pass, for one member per
gang:

- if its queue refuses it still, it keeps waiting (nothing is evicted for it);
- if some node has room, it gets a slot there (a ledger reservation) and goes back to
  kube-scheduler's active queue (the admission stamp);
- else reclaim (from queues above their deserved share) or preempt (lower-priority work of its
  own queue) frees room for it, taking only units whose loss breaks no gang: elastic members
  of other jobs, one at a time, and pods of no gang (Volcano's gang plugin: a victim only while
  its job keeps its minimum). It is pipelined onto that room like an admitted gang's member.

So two queues' elastic jobs settle at their deserved shares (weights 1:3 of 8 slots: 2 and 6),
each reclaim taking one member for one member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.cache import Snapshot
from core.kube.events import NORMAL
from core.records import PodGroupRecord, PodRecord
from extender.ledger import Reservation
from plugins.actions.evictions import EvictionRequest, choose_evictions
from plugins.actions.starvation import holding
from plugins.framework.traversal import job_input
from plugins.model.placement import plan_gang

if TYPE_CHECKING:
    from extender.gangs import GangScheduler


def grow_elastic(scheduler: GangScheduler, snapshot: Snapshot) -> None:
    """One pass over the waiting elastic members (see the module docstring)."""
    _take_back_lost_slots(scheduler, snapshot)
    now = scheduler.pass_state.now
    waiting_by_group = scheduler.elastic_waiting
    for key in list(waiting_by_group):
        waiting = waiting_by_group[key]
        group = snapshot.podgroups.get(key)
        if group is None or key not in scheduler.admitted:
            del waiting_by_group[key]
            continue
        for pod_key in sorted(waiting):
            pod = snapshot.pods.get(pod_key)
            if (
                pod is None
                or pod.node is not None
                or pod.terminal
                or pod.deleting
                or scheduler.ledger.reservation_of(pod_key) is not None
            ):
                waiting.discard(pod_key)
                continue
            if holding(scheduler.starving, scheduler.starving_since, group.queue, now):
                break  # its queue drains for a starving gang (`plugins.actions.starvation`)
            if scheduler.session.allocatable(group.queue, pod.requests, scheduler.pass_state):
                break  # the queue is at its share: no member of this gang grows now
            if _place(scheduler, snapshot, group, pod):
                waiting.discard(pod_key)
            break  # one member per gang and pass: the next pass sees the queue with it
        if not waiting:
            del waiting_by_group[key]


def _take_back_lost_slots(scheduler: GangScheduler, snapshot: Snapshot) -> None:
    """An elastic member's slot that no longer fits and is not being freed (another pod took
    the room while its victims left) is given up, and the member waits again: the next pass
    places it anew (reclaiming again if it must) instead of it waiting for ever on room that
    never comes back."""
    for key, members in list(scheduler.elastic_slots.items()):
        for pod_key in list(members):
            pod = snapshot.pods.get(pod_key)
            reservation = scheduler.ledger.reservation_of(pod_key)
            if pod is None or pod.node is not None or pod.terminal or reservation is None:
                members.discard(pod_key)
                continue
            if scheduler.slots.fits(pod_key, reservation.node, reservation.request):
                continue
            if scheduler.slots.blockers(pod_key, group=key) is not None:
                continue  # its victims are still leaving: the room comes
            scheduler.ledger.release(pod_key)
            members.discard(pod_key)
            scheduler.elastic_waiting.setdefault(key, set()).add(pod_key)
        if not members:
            del scheduler.elastic_slots[key]


def _place(
    scheduler: GangScheduler, snapshot: Snapshot, group: PodGroupRecord, pod: PodRecord
) -> bool:
    """A slot for one elastic member: on free room, else on room evictions free."""
    reserved = dict(scheduler.ledger.by_node)
    future = scheduler.evictor.future_reserved()
    plan = plan_gang(snapshot, [pod], 1, reserved, prefer=scheduler.placement)
    if not plan.ok and future is not None:
        reserved = future
        plan = plan_gang(snapshot, [pod], 1, reserved, prefer=scheduler.placement)
    evictions = None
    if not plan.ok:
        job = job_input(snapshot, group)
        units = [
            unit
            for unit in scheduler.victims_for(snapshot, group.key)
            if not unit.breaks_gang  # an elastic member never breaks another gang
        ]
        evictions = choose_evictions(
            snapshot,
            group,
            [pod],
            units,
            EvictionRequest(
                need=1,
                per_task={},
                reserved=reserved,
                demand=pod.requests,
                priority=job.priority,
                prefer=scheduler.placement,
                actions=frozenset(scheduler.session.actions) & {"reclaim", "preempt"},
                allocated=job.allocated,
            ),
            scheduler.session,
            scheduler.pass_state,
        )
        if evictions is None:
            return False
        plan = evictions.plan
        scheduler.evictor.evict_units(
            snapshot, group, evictions.priority, evictions.action, evictions.units
        )
    node = plan.slots.get(pod.key)
    if node is None:
        return False
    scheduler.ledger.reserve(Reservation(pod.key, node, pod.requests, group.key))
    scheduler.elastic_slots.setdefault(group.key, set()).add(pod.key)
    scheduler.session.task_allocated(group.queue, pod.requests, scheduler.pass_state)
    if not scheduler.slots.fits(pod.key, node, pod.requests):
        scheduler.slots.pipeline(group.key, pod.key, node, scheduler.evictor.holding(node))
        scheduler.slots.park(pod.key, group.key)  # released when its room is free
    else:
        scheduler.release.release(pod)
    scheduler.writer.pod_event(
        pod,
        NORMAL,
        "ElasticMember",
        f"elastic member of gang {group.key} given a slot on {node}"
        + (f" ({evictions.action}: {len(evictions.units)} unit(s) evicted)" if evictions else ""),
    )
    return True
