"""The `proportion` and `capacity` plugins as session plugins (spec/volcano.md §3.9-3.10).

Their numbers (deserved, realCapability, allocated, inqueue) are the pass's share model,
built by the extender from the cluster (`extender.queues.QueuePolicy`, which picks the
capacity computation when the conf enables capacity without proportion); these classes are
the extension points Volcano's plugins register over them. Without either plugin in the conf
a queue still reports its numbers, but nothing is refused or reclaimed on their account. The
numbers' bookkeeping within a pass (a gang placed counts as allocated) is the extender's, so
that they are right whatever the conf: Volcano's Allocate event handlers here."""

from __future__ import annotations

from collections.abc import Sequence

from core.resources import ResourceVector
from plugins.job_order import JobInput
from plugins.session import ABSTAINED, PERMITTED, REJECT, PassState, Preemptor, SessionPlugin, Vote
from plugins.victims import VictimUnit, victim_order_key


class _SharePlugin(SessionPlugin):
    def queue_order(self, state: PassState) -> list[str]:
        return state.model.queue_order() if state.model is not None else []

    def job_enqueueable(self, job: JobInput, state: PassState) -> Vote:
        if state.model is None:
            return ABSTAINED
        refused = state.model.enqueueable(job.queue, job.min_resources)
        return Vote(REJECT, refused) if refused else PERMITTED

    def job_enqueued(self, job: JobInput, state: PassState) -> None:
        if state.model is not None:
            state.model.on_enqueued(job.queue, job.min_resources)

    def allocatable(self, queue: str, request: ResourceVector, state: PassState) -> str | None:
        return state.model.allocatable(queue, request) if state.model is not None else None

    def preemptive(self, queue: str, request: ResourceVector, state: PassState) -> bool:
        return state.model is not None and state.model.preemptive(queue, request)

    def reclaimable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit]:
        """Victims taken in victim order while their queue holds more than it deserves (and
        keeps its guarantee), judged on a running copy that loses each accepted one."""
        if state.model is None:
            return []
        judge = state.model.victim_judge(preemptor.queue)
        taken: list[VictimUnit] = []
        # A gang's elastic members come before the gang whole (victim order): what they free
        # is judged once, and the whole gang only for the rest of its members.
        counted: dict[str, ResourceVector] = {}
        for unit in sorted(candidates, key=victim_order_key):
            freed = unit.freed
            if unit.group is not None and not unit.elastic and unit.group in counted:
                freed = freed.saturating_sub(counted[unit.group])
            if judge.take(unit.queue, freed):
                taken.append(unit)
                if unit.elastic and unit.group is not None:
                    counted[unit.group] = counted.get(unit.group, ResourceVector()) + unit.freed
        return taken


class ProportionPlugin(_SharePlugin):
    name = "proportion"

    def overused(self, queue: str, state: PassState) -> bool:
        return state.model is not None and state.model.overused(queue)


class CapacityPlugin(_SharePlugin):
    """Capacity registers no Overused: a queue may borrow up to its realCapability."""

    name = "capacity"
