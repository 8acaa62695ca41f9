"""Applies a closed session's decisions (`plugins.framework.decisions`): an admitted gang's slots
into the gang ledger and its evictions to the evictor, members kube-scheduler parked released,
why a gang waits kept for filter, PodGroup status and events written. A decision is applied
once; a kept one (the memo's) was applied when it was taken."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.cache import Snapshot
from core.decisions import gang_decision
from core.kube.events import NORMAL
from core.records import PodGroupRecord
from extender.admissions import Admissions
from extender.barrier import BindBarrier
from extender.decision_notes import admitted_note
from extender.elastic_members import ElasticMembers
from extender.evictor import Evictor
from extender.gang_quorum import BROKEN_TAIL
from extender.gang_writer import GangWriter
from extender.ledger import GangLedger, Reservation
from extender.member_release import MemberRelease
from extender.metrics import GangMetrics
from extender.slots import SlotWatch
from plugins.framework.decisions import (
    ENQUEUE,
    Admitted,
    Adopted,
    Decision,
    Enqueued,
    Grown,
    Seen,
    Waiting,
)
from plugins.model import gang as gangs
from plugins.model.elastic import holds_minimum
from plugins.model.gang import GangView
from plugins.model.victims import VictimUnit

__all__ = ["DecisionApplier", "GangParts"]


@dataclass(frozen=True, slots=True)
class GangParts:
    """What applying decisions writes to: the extender's gang state and its writers."""

    ledger: GangLedger
    slots: SlotWatch
    evictor: Evictor
    release: MemberRelease
    writer: GangWriter
    admissions: Admissions
    barrier: BindBarrier
    elastic: ElasticMembers
    metrics: GangMetrics | None


class DecisionApplier:
    def __init__(self, parts: GangParts, forget_group: Callable[[str, str], None]) -> None:
        self.parts = parts
        self.forget_group = forget_group
        # Gangs whose enqueue was logged since their last admission: one line per decision,
        # not one per pass while the group waits for its pods.
        self.enqueue_logged: set[str] = set()

    def apply(self, decision: Decision, snapshot: Snapshot, gang_enabled: bool) -> bool:
        """Apply `decision`; True when the gang's status follows more than its own inputs
        (members waiting for room being freed, or for the gate to be lifted): it is looked at
        again next pass."""
        parts = self.parts
        key = decision.key
        group = snapshot.podgroups.get(key)
        if group is None:
            return False
        if isinstance(decision, Grown):
            self._grown(decision, snapshot, group)
            return False
        view = self._view(snapshot, key)
        if view is None:
            return False
        if decision.stage == ENQUEUE and decision.action is not None:
            reason = self._enqueued(decision, group)
            if reason is None and not gang_enabled and key not in parts.admissions:
                # Without the gang plugin, enqueued is admitted: its members are placed one
                # by one by kube-scheduler.
                parts.admissions.admit(key)
                parts.release.release_admitted(view)
            parts.writer.podgroup_status(group, view, reason is None, self._words(key, reason))
            return False
        reason = decision.reason if isinstance(decision, Waiting) else None
        admitted_now = False
        if isinstance(decision, Adopted):
            # Placed whole already (e.g. before a restart): later members (an elastic gang
            # growing) go through filter as members of an admitted gang and bind at once,
            # until it loses members (`QuorumWatch`).
            parts.admissions.admit(key)
            if gang_enabled:
                parts.barrier.adopt(key)
        elif isinstance(decision, Admitted):
            self._admit(decision, snapshot, group, view)
            admitted_now = True
            view = self._view(snapshot, key) or view
        elif reason is not None:
            parts.admissions.refuse(key, reason)
        dequeue = isinstance(decision, Waiting) and decision.dequeue
        if dequeue:
            parts.admissions.settle_promise(key)
        unsettled = False
        if key in parts.admissions:
            # Pipelined: admitted onto room its victims still hold (Volcano's Pipelined tasks:
            # valid, not ready), and the condition says what they wait for.
            waiting = parts.slots.waiting_members(key)
            if waiting:
                unsettled = True
                view = (
                    gangs.gang_view(snapshot, key, allocated=parts.ledger.pods(), pipelined=waiting)
                    or view
                )
                reason = parts.slots.waiting_reason(key, *next(iter(waiting.values())))
            # Beyond the gang's minimum, members without a slot are elastic: the session's
            # backfill places them. Short of it (a member made again under its name after its
            # slot went), they go to filter, which places them for the quorum.
            elastic = gang_enabled and holds_minimum(view.ready_num, view.min_member)
            if not admitted_now and parts.release.release_late(view, slotted_only=elastic):
                unsettled = True  # looked at again until its gated members are released
            if isinstance(decision, Seen) and decision.elastic:
                # Elastic members still waiting for a node: kube-scheduler may have parked
                # them on its own fit check (and a job's pods wait behind the gate).
                parts.elastic.wait(key, decision.elastic)
        admitted = admitted_now or key in parts.admissions
        words = self._words(key, reason)
        parts.writer.podgroup_status(group, view, admitted, words, dequeue=dequeue)
        if parts.metrics is not None:
            parts.metrics.observe(group, view, admitted_now)
        return unsettled

    def _view(self, snapshot: Snapshot, key: str) -> GangView | None:
        return gangs.gang_view(snapshot, key, allocated=self.parts.ledger.pods())

    def _words(self, key: str, reason: str | None) -> str | None:
        """A waiting gang's reason in the words filter tells its members (`Admissions.told`):
        its PodGroup's condition is written again when they change, not with every number."""
        if reason is not None and self.parts.admissions.reasons.get(key) == reason:
            return self.parts.admissions.told(key)
        return reason

    def _enqueued(self, decision: Decision, group: PodGroupRecord) -> str | None:
        """Apply the enqueue action's answer: None when enqueued (the group becomes Inqueue;
        nothing is reserved), else why not (kept for filter)."""
        parts, key = self.parts, decision.key
        if isinstance(decision, Waiting):
            parts.admissions.settle_promise(key)
            parts.admissions.refuse(key, decision.reason)
            return decision.reason
        assert isinstance(decision, Enqueued)
        promise = decision.promise
        if decision.waits is not None:
            parts.admissions.refuse(key, decision.waits)
        else:
            parts.admissions.reasons.pop(key, None)
        note = "enqueued: its job creates the pods now" if group.job_owned else "enqueued"
        if promise is not None:
            pods = frozenset(p for unit in promise.units for p in unit.pods)
            parts.admissions.promise(key, promise.describe(), pods)
            note = (
                f"enqueued on the promise of eviction ({decision.refused}): "
                f"{promise.describe()}; "
                + ("its job creates the pods now" if group.job_owned else "evicting when placed")
            )
        parts.writer.group_event(group, NORMAL, "Enqueued", note)
        if key not in self.enqueue_logged:
            self.enqueue_logged.add(key)
            gang_decision("gang enqueued", group, note=note)
        return None

    def _admit(
        self, decision: Admitted, snapshot: Snapshot, group: PodGroupRecord, view: GangView
    ) -> None:
        """An admitted gang's placement: evictions, the ledger's reservations, pipelined
        members, the events."""
        parts, key = self.parts, decision.key
        evictions = decision.evictions
        if evictions is not None:
            units = list(evictions.units)
            parts.evictor.evict_units(snapshot, group, evictions.priority, evictions.action, units)
            self.evicted_whole(units, f"{evictions.action}ed whole for gang {key}")
        members = {pod.key: pod for pod in view.members}
        for pod_key, node in decision.slots.items():
            request = members[pod_key].requests
            parts.ledger.reserve(Reservation(pod_key, node, request, key))
            if not parts.slots.fits(pod_key, node, request):
                # Pipelined: the room is still held by pods being evicted or terminating.
                parts.slots.pipeline(key, pod_key, node, parts.evictor.holding(node))
        parts.admissions.admit(key)
        note = admitted_note(group, decision.slots, view)
        self.enqueue_logged.discard(key)
        parts.writer.group_event(group, NORMAL, "Admitted", note)
        gang_decision(
            "gang admitted",
            group,
            members=len(decision.slots),
            nodes=sorted(set(decision.slots.values())),
            note=note,
        )
        parts.release.release_admitted(self._view(snapshot, key) or view)

    def evicted_whole(self, units: list[VictimUnit], why: str) -> None:
        """A gang evicted whole is placed again as a new gang: all or nothing, through
        admission and the bind barrier's quorum (none of its members may bind on the strength
        of the evicted gang's admission)."""
        for unit in units:
            if unit.group is not None and not unit.elastic:
                # Broken now, as when a committed gang loses members (`QuorumWatch`).
                self.parts.barrier.uncommit(
                    unit.group, f"gang {unit.group} is no longer whole: {why}: {BROKEN_TAIL}"
                )
                self.forget_group(unit.group, why)
                self.parts.barrier.forget(unit.group)

    def _grown(self, decision: Grown, snapshot: Snapshot, group: PodGroupRecord) -> None:
        """An elastic member's slot (`plugins.actions.backfill`)."""
        parts = self.parts
        pod = snapshot.pods.get(decision.pod)
        if pod is None:
            return
        evictions = decision.evictions
        if evictions is not None:
            parts.evictor.evict_units(
                snapshot, group, evictions.priority, evictions.action, list(evictions.units)
            )
        parts.ledger.reserve(Reservation(pod.key, decision.node, pod.requests, group.key))
        parts.elastic.grown(group.key, pod.key)
        if not parts.slots.fits(pod.key, decision.node, pod.requests):
            parts.slots.pipeline(
                group.key, pod.key, decision.node, parts.evictor.holding(decision.node)
            )
            parts.slots.park(pod.key, group.key)  # released when its room is free
        else:
            parts.release.release(pod)
        evicted = (
            f" ({evictions.action}: {len(evictions.units)} unit(s) evicted)" if evictions else ""
        )
        parts.writer.pod_event(
            pod,
            NORMAL,
            "ElasticMember",
            f"elastic member of gang {group.key} given a slot on {decision.node}{evicted}",
        )
