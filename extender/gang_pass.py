"""One scheduling pass of the extender, as the cycle's host (`plugins.framework.cycle.CycleHost`):
what the cycle reads of the extender's state (what is admitted, the ledger's room, the gang backoff,
whether a queue or a group needs deciding again at all) and where each of its decisions is
applied (`PassHost.apply`: the ledger's reservations, evictions, pipelined members, PodGroup
status, events). One `PassHost` per pass (`GangScheduler.schedule_pass`); what outlives the pass
(the verdicts that let a pass skip what did not change) is the `GangScheduler`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from core.cache import Snapshot
from core.decisions import gang_decision
from core.kube.events import NORMAL
from core.records import PodGroupRecord
from core.resources import ResourceVector
from extender.decision_notes import admitted_note
from extender.ledger import Reservation
from plugins.actions.allocate import GangRoom
from plugins.framework.cycle import ADOPT, ENQUEUE, Decision
from plugins.model import gang as gangs_
from plugins.model.victims import VictimUnit

if TYPE_CHECKING:
    from extender.gangs import GangScheduler


class PassHost:
    """The extender's state for one pass of the cycle (the module docstring)."""

    def __init__(
        self,
        gangs: GangScheduler,
        snapshot: Snapshot,
        reserved_by_group: Mapping[str, ResourceVector],
        dirty_queues: set[str],
    ) -> None:
        self.gangs = gangs
        self.snapshot = snapshot
        self.reserved_by_group = reserved_by_group
        self.dirty_queues = dirty_queues
        self.pass_allocated = gangs.ledger.pod_keys_set()  # members holding a slot
        self.visited: list[str] = []  # the queues this pass looked at

    def visit(self, queue: str, numbers: tuple[Any, ...] | None) -> bool:
        """Skip a queue when nothing a decision there reads has changed since the last pass:
        its groups (the cache's dirty set), its numbers, and no group of it waits on more
        than its own inputs."""
        if (
            queue not in self.dirty_queues
            and queue in self.gangs.queue_seen
            and self.gangs.queue_seen[queue] == numbers
            and not self.gangs.unsettled.get(queue)
        ):
            return False
        if queue in self.dirty_queues or queue not in self.gangs.queue_epochs:
            self.gangs.queue_epochs[queue] = next(self.gangs.epoch_clock)
        self.gangs.queue_seen[queue] = numbers
        self.gangs.unsettled[queue] = set()
        self.gangs.starving.pop(queue, None)  # elected again by this visit's decisions
        self.visited.append(queue)
        return True

    def settled(self, group: PodGroupRecord, numbers: tuple[Any, ...] | None) -> bool:
        """The group's last decision stands: its inputs — its PodGroup and pods (the cache's
        group version), whether it is admitted, what it holds in the ledger and, while it
        waits, its queue's numbers — are unchanged (for an enqueue refusal kept on its queue,
        its queue's pods and groups too). Refusals that depend on the rest of the cluster (the
        placement, the overcommit rule) or on time (backoff) have no verdict."""
        self.gangs.same_generation(group)
        key = group.key
        inputs = self._decision_inputs(key, numbers, self.reserved_by_group.get(key))
        known = self.gangs.verdicts.get(key)
        if (
            known is not None
            and known[:-1] == inputs
            and (known[-1] is None or known[-1] == self._queue_state(group.queue))
        ):
            return True
        self.gangs.verdicts.pop(key, None)
        return False

    def _queue_state(self, queue: str) -> tuple[int | None, float | None]:
        """What a queue-bound verdict (an enqueue refusal, `Decision.queue_bound`) reads beyond
        its inputs: whether its queue's pods or groups changed (the epoch: the lower-priority
        work preempt could promise to take) and whether the queue has had a starving gang (its
        hold and backfill phases)."""
        return self.gangs.queue_epochs.get(queue), self.gangs.starving_since.get(queue)

    def is_admitted(self, key: str) -> bool:
        return key in self.gangs.admitted

    def allocated(self) -> set[str]:
        return self.pass_allocated

    def backoff(self, key: str) -> str | None:
        wait = self.gangs.barrier.backing_off(key)
        if wait > 0:
            return self._backoff_reason(key, wait)
        return self.gangs.unmarked_member(self.snapshot, key)

    def room(self, snapshot: Snapshot, key: str) -> GangRoom:
        return GangRoom(
            reserved=dict(self.gangs.ledger.by_node),
            future=self.gangs.evictor.future_reserved(),
            victims=lambda: self.gangs.victims_for(snapshot, key),
            held=self.gangs.ledger.slot_of,
        )

    def starving(self, queue: str) -> tuple[str, float, ResourceVector | None] | None:
        """The queue's starving gang, since when the queue has had one, and what the queue's
        gangs that wait for its share ask together (`extender.share_waiters`)."""
        target = self.gangs.starving.get(queue)
        if target is None:
            return None
        since = self.gangs.starving_since.get(queue)
        need = self.gangs.share_waiters.need(queue)
        return target, (since if since is not None else -1.0), need

    def victims(self, snapshot: Snapshot, key: str) -> list[VictimUnit]:
        return self.gangs.victims_for(snapshot, key)

    # ------------------------------------------------------------------ applying decisions

    def apply(self, decision: Decision) -> None:
        """Apply one decision of the cycle and write the group's status; remember it as a
        verdict when it stands until its inputs change."""
        group, key, view = decision.group, decision.key, decision.view
        reason = decision.reason
        # What a gang waiting for its share keeps in its queue's `inqueue` (an enqueued one's
        # minResources; a gang not enqueued yet keeps nothing there to lift).
        waits = None
        if decision.starving is not None and group.phase == "Inqueue":
            waits = decision.starving[0]
        self.gangs.share_waiters.note(group.queue, key, waits, held=decision.holding)
        if decision.stage == ENQUEUE and decision.action is not None:
            reason = self._enqueued(decision)
            if reason is None and not self.gangs.gang_enabled and key not in self.gangs.admitted:
                # Without the gang plugin, enqueued is admitted: its members are placed one
                # by one by kube-scheduler.
                self.gangs.admitted.add(key)
                self.gangs.release.release_admitted(view)
            self.gangs.writer.podgroup_status(group, view, reason is None, reason)
            if decision.settled and reason is not None:
                self._keep(decision, self.reserved_by_group.get(key))
            else:
                self.gangs.unsettled.setdefault(group.queue, set()).add(key)
            return
        admitted_now = False
        if decision.stage == ADOPT:
            # Placed whole already (e.g. before a restart): later members (an elastic gang
            # growing) go through filter as members of an admitted gang and bind at once,
            # until it loses members (`QuorumWatch`).
            self.gangs.admitted.add(key)
            if self.gangs.gang_enabled:
                self.gangs.barrier.adopt(key)
        elif decision.action == "allocate" and decision.ok:
            self._admit(decision)
            admitted_now = True
            self.pass_allocated = self.gangs.ledger.pod_keys_set()
            view = gangs_.gang_view(self.snapshot, key, allocated=self.pass_allocated)
            assert view is not None
        elif reason is not None:
            self._not_admitted(key, reason)
        if decision.starving is not None:
            # It waits for its queue's share: the queue drains for the first such gang of the
            # visit, in admission order (`plugins.actions.starvation`); the later ones, decided in a
            # backfill phase, wait beside it (`extender.share_waiters`).
            self.gangs.starving.setdefault(group.queue, key)
            self.gangs.starving_since.setdefault(group.queue, decision.starving[1])
        volatile = not decision.settled
        if key in self.gangs.admitted:
            # Pipelined: admitted onto room its victims still hold. Volcano's Pipelined tasks
            # (valid, not ready), and the condition says what they wait for; decided again
            # every pass until the room is free (the victims' going touches no input of it).
            waiting = self.gangs.slots.waiting_members(key)
            if waiting:
                volatile = True
                view = (
                    gangs_.gang_view(
                        self.snapshot,
                        key,
                        allocated=self.pass_allocated,
                        pipelined=waiting,
                    )
                    or view
                )
                reason = self.gangs.slots.waiting_reason(key, *next(iter(waiting.values())))
            # Beyond the gang's minimum, members without a slot are elastic: the pass places
            # them (below). Short of it (a member made again under its name after its slot
            # went), they go to filter as before, which places them for the quorum.
            elastic = self.gangs.gang_enabled and view.ready_num >= view.min_member
            if not admitted_now and self.gangs.release.release_late(view, slotted_only=elastic):
                volatile = True  # decided again until its gated members are released
            if view.pending and elastic:
                # Elastic members still waiting for a node: kube-scheduler may have parked
                # them on its own fit check without asking this filter (and a job's pods wait
                # behind the queue-allocation gate), so the pass places them one at a time
                # within their queue (`extender.elastic_growth`). Succeeded members count
                # (Volcano's ReadyTaskNum): a task made once the task it depends on finished
                # has nothing else to wait for.
                pending = self.gangs.elastic_waiting.setdefault(key, set())
                pending.update(
                    pod.key for pod in view.members if view.status[pod.key] == gangs_.PENDING
                )
        self.gangs.writer.podgroup_status(
            group, view, admitted_now or key in self.gangs.admitted, reason
        )
        if self.gangs.gang_metrics is not None:
            self.gangs.gang_metrics.observe(group, view, admitted_now)
        if volatile or self.gangs.cache.group_versions.get(key) is None:
            self.gangs.unsettled.setdefault(group.queue, set()).add(key)
            return
        held = (
            self.reserved_by_group.get(key) if not admitted_now else self.gangs.ledger.held_by(key)
        )
        self._keep(decision, held)

    def _keep(self, decision: Decision, held: ResourceVector | None) -> None:
        """Remember the decision as a verdict: its inputs, and for a queue-bound one its
        queue's state (`_queue_state`)."""
        key = decision.key
        inputs = self._decision_inputs(key, decision.numbers, held)
        queue = self._queue_state(decision.group.queue) if decision.queue_bound else None
        self.gangs.verdicts[key] = (*inputs, queue)

    def _decision_inputs(
        self, key: str, numbers: tuple[Any, ...] | None, held: ResourceVector | None
    ) -> tuple[Any, ...]:
        """What a group's decision reads: its version, whether it is admitted, what it holds
        and, while it waits, its queue's numbers."""
        admitted = key in self.gangs.admitted
        queue = None if admitted else numbers
        return (self.gangs.cache.group_versions.get(key), admitted, held, queue)

    def _enqueued(self, decision: Decision) -> str | None:
        """Apply the enqueue action's answer: None when enqueued (the group becomes Inqueue;
        nothing is reserved), else why not (kept for filter)."""
        group, key = decision.group, decision.key
        if decision.reason is not None:
            self.gangs.promises.pop(key, None)
            return self._not_admitted(key, decision.reason)
        promise = decision.promise
        if promise is not None:
            self.gangs.promises[key] = promise.describe()
        self.gangs.reasons.pop(key, None)
        note = "enqueued: its job creates the pods now" if group.job_owned else "enqueued"
        if promise is not None:
            note = (
                f"enqueued on the promise of eviction ({decision.refused}): "
                f"{promise.describe()}; "
                + ("its job creates the pods now" if group.job_owned else "evicting when placed")
            )
        self.gangs.writer.group_event(group, NORMAL, "Enqueued", note)
        if key not in self.gangs.enqueue_logged:
            self.gangs.enqueue_logged.add(key)
            gang_decision("gang enqueued", group, note=note)
        return None

    def _admit(self, decision: Decision) -> None:
        """Apply the allocate action's placement: evictions, the ledger's reservations,
        pipelined members, the events (the queue's books are the session's: the cycle booked
        them with the Allocate event handlers)."""
        group, key, view = decision.group, decision.key, decision.view
        admission = decision.admission
        assert admission is not None and admission.plan is not None
        snapshot = self.snapshot
        if admission.evictions is not None:
            chosen = admission.evictions
            self.gangs.evictor.evict_units(
                snapshot, group, chosen.priority, chosen.action, chosen.units
            )
            self.gangs.evicted_whole(chosen.units, f"{chosen.action}ed whole for gang {key}")
        members = {pod.key: pod for pod in view.members}
        slots = admission.plan.slots
        for pod_key, node in slots.items():
            request = members[pod_key].requests
            self.gangs.ledger.reserve(Reservation(pod_key, node, request, key))
            if not self.gangs.slots.fits(pod_key, node, request):
                # Pipelined: the room is still held by pods being evicted or terminating.
                self.gangs.slots.pipeline(key, pod_key, node, self.gangs.evictor.holding(node))
        self.gangs.admitted.add(key)
        self.gangs.reasons.pop(key, None)
        self.gangs.promises.pop(key, None)
        note = admitted_note(group, slots, view)
        self.gangs.enqueue_logged.discard(key)
        self.gangs.writer.group_event(group, NORMAL, "Admitted", note)
        gang_decision(
            "gang admitted",
            group,
            members=len(slots),
            nodes=sorted(set(slots.values())),
            note=note,
        )
        self.gangs.release.release_admitted(view)

    # ------------------------------------------------------------------ preemption

    def _backoff_reason(self, key: str, wait: float) -> str:
        """Why a gang waits after a timeout, worded once per backoff: the PodGroup's condition
        (and the pods' filter reason) then stay the same while the passes repeat, so nothing is
        written every second for no news; the end is a time of day, not a countdown."""
        ends = self.gangs.barrier.backoff_ends(key)
        known = self.gangs.backoff_reasons.get(key)
        if known is not None and known[0] == ends:
            return known[1]
        until = datetime.now(UTC) + timedelta(seconds=wait)
        reason = f"backing off after a gang timeout until {until.strftime('%H:%M:%SZ')}"
        self.gangs.backoff_reasons[key] = (ends, reason)
        return reason

    def _not_admitted(self, key: str, reason: str) -> str:
        self.gangs.reasons[key] = reason
        return reason
