"""The `proportion` and `capacity` plugins as session plugins.

Each builds its own share model when the session opens (`open_queues`, Volcano's
OnSessionOpen: deserved, realCapability, allocated, inqueue from the queues' inputs,
`plugins.model.queue_inputs`) and books into it (`job_enqueued`, `job_allocated`: Volcano's event
handlers); the other hooks are the extension points Volcano's plugins register over it. The
session picks the model (`plugins.framework.policy.Session.open_queues`: capacity when the conf
enables it without proportion). Without either plugin in the conf a queue still reports its numbers
(proportion's), but nothing is refused or reclaimed on their account."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from core.resources import ResourceVector
from plugins.framework.config_types import PluginOption
from plugins.framework.extension_points import (
    ABSTAINED,
    PERMITTED,
    QUEUE,
    REJECT,
    PassState,
    Preemptor,
    SessionPlugin,
    Vote,
)
from plugins.model.capacity_shares import capacity_shares
from plugins.model.job_order import JobInput
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_parts import QueueParts, computed_parts
from plugins.model.queue_share import QueueInput, ShareModel, allocated_from_inqueue
from plugins.model.victims import VictimUnit, victim_order_key


class _SharePlugin(SessionPlugin):
    hierarchical = False  # capacity's enableHierarchy: a tree of queues
    # What its hooks read: the job's queue and minResources, that queue's numbers.
    job_fields: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "job_enqueueable": ("queue", "min_resources")
    }
    inputs: ClassVar[Mapping[str, frozenset[str]]] = {
        hook: frozenset({QUEUE})
        for hook in ("job_enqueueable", "allocatable", "preemptive", "overused")
    }

    def open_queues(
        self,
        total: ResourceVector,
        inputs: Sequence[QueueInput],
        parts: QueueParts = computed_parts,
    ) -> ShareModel:
        """Volcano's OnSessionOpen: the queues' deserved shares from their inputs."""
        raise NotImplementedError

    def job_allocated(self, job: JobInput, held: ResourceVector, state: PassState) -> None:
        self.task_allocated(job.queue, held, state)
        if state.model is not None:
            allocated_from_inqueue(state.model, job.queue, job.inqueue, held)

    def task_allocated(self, queue: str, request: ResourceVector, state: PassState) -> None:
        """Volcano's Allocate event handler: what was placed counts as the queue's (the
        session asks only the plugin whose model the pass uses)."""
        if state.model is not None:
            state.model.on_allocated(queue, request)

    def task_deallocated(self, queue: str, request: ResourceVector, state: PassState) -> None:
        """Volcano's Deallocate event handler: a booking taken back."""
        if state.model is not None:
            state.model.on_released(queue, request)

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

    def open_queues(
        self,
        total: ResourceVector,
        inputs: Sequence[QueueInput],
        parts: QueueParts = computed_parts,
    ) -> ShareModel:
        return proportion_shares(total, inputs, parts)

    def overused(self, queue: str, state: PassState) -> bool:
        return state.model is not None and state.model.overused(queue)


class CapacityPlugin(_SharePlugin):
    """Capacity registers no Overused: a queue may borrow up to its realCapability."""

    name = "capacity"

    def configure(self, option: PluginOption) -> None:
        self.hierarchical = option.is_enabled("enableHierarchy")

    def open_queues(
        self,
        total: ResourceVector,
        inputs: Sequence[QueueInput],
        parts: QueueParts = computed_parts,  # capacity's queues depend on their parents: unused
    ) -> ShareModel:
        return capacity_shares(total, list(inputs), hierarchical=self.hierarchical)
