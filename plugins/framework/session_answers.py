"""The policy's answers to a session's decisions (a base of `plugins.framework.session.Session`):
every question to the policy goes through here, logged with its answer for the memo when a
decision is being read (`plugins.framework.session_reads`), so the policy code declares its
inputs by asking and knows nothing of caching. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from core.resources import ResourceVector
from plugins.framework.extension_points import QUEUE, Preemptor, Refusal, Vote
from plugins.framework.inputs import QUEUES, TOTAL
from plugins.framework.policy import Policy
from plugins.framework.session_reads import SessionReads
from plugins.model.gang import GangView
from plugins.model.job_order import JobInput
from plugins.model.victims import VictimUnit

__all__ = ["PolicyAnswers"]


class PolicyAnswers(SessionReads):
    policy: Policy

    def job_order_key(self, job: JobInput) -> tuple[Any, ...]:
        return self.policy.job_order_key(job, self.state)

    def queue_order(self, names: Iterable[str]) -> list[str]:
        return self.policy.queue_order(self.state, names)

    def job_valid(self, view: GangView) -> str | None:
        return self.policy.job_valid(view)  # the gang's own: its version covers it

    def job_ready(self, view: GangView) -> bool:
        return self.policy.job_ready(view)

    def enqueue_refusal(self, job: JobInput) -> Refusal | None:
        if self.policy.clock_dependent:
            self.clock_read()

        def vote(name: str, plugin: Any, reads: frozenset[str] | None) -> Vote:
            return self._answer(
                ("enqueue", name, self.policy.vote_key(name, job)),
                lambda s: plugin.job_enqueueable(job, s.state),
                reads,
                job.queue,
            )

        return self.policy.enqueue_walk(vote)

    def allocatable(self, queue: str, request: ResourceVector) -> str | None:
        return self._answer(
            ("allocatable", queue, request),
            lambda s: s.policy.allocatable(queue, request, s.state),
            self.policy.inputs("allocatable"),
            queue,
        )

    def preemptive(self, queue: str, request: ResourceVector) -> bool:
        return self._answer(
            ("preemptive", queue, request),
            lambda s: s.policy.preemptive(queue, request, s.state),
            self.policy.inputs("preemptive"),
            queue,
        )

    def overused(self, queue: str) -> bool:
        return self._answer(
            ("overused", queue),
            lambda s: s.policy.overused(queue, s.state),
            self.policy.inputs("overused"),
            queue,
        )

    def beyond_limit(self, queue: str, minimum: ResourceVector) -> str | None:
        model = self.state.model
        if model is None or self.policy.queue_plugin is None:
            return None
        return self._answer(
            ("beyond", queue, minimum),
            lambda s: s.state.model.beyond_limit(queue, minimum) if s.state.model else None,
            frozenset({QUEUE}),  # the model's own: the queue's numbers alone
            queue,
        )

    def room_refusal(self, queue: str, request: ResourceVector) -> str | None:
        if self.policy.queue_plugin is None:
            return None  # no queue plugin in the conf: the queues refuse nothing
        return self._answer(
            ("room", queue, request),
            lambda s: s.state.model.room_refusal(queue, request) if s.state.model else None,
            frozenset({QUEUE}),  # the model's own: the queue's numbers alone
            queue,
        )

    def preemptable(self, preemptor: Preemptor, units: Sequence[VictimUnit]) -> list[VictimUnit]:
        if not units:
            return []
        self.read(QUEUES)
        self.read(TOTAL)
        return self.policy.preemptable(preemptor, units, self.state)

    def reclaimable(self, preemptor: Preemptor, units: Sequence[VictimUnit]) -> list[VictimUnit]:
        if not units:
            return []
        self.read(QUEUES)
        self.read(TOTAL)
        return self.policy.reclaimable(preemptor, units, self.state)

    def queue_read(self, queue: str) -> None:
        """A decision reads the queue's numbers themselves (not through a question)."""
        self.read(("queue", queue))
