"""The queues between two passes, as the last session closed them: what filter judges a pod
outside any gang (or an elastic member) against, Volcano's Allocatable, and books what it lets
through until the next pass counts it. The session's own numbers are not touched: this is the
closed session's copy, owned here."""

from __future__ import annotations

from core.resources import ResourceVector
from plugins.framework.extension_points import PassState
from plugins.framework.policy import Policy
from plugins.model.queue_inputs import QueuePass

__all__ = ["QueueGate"]


class QueueGate:
    def __init__(self) -> None:
        self.queues: QueuePass | None = None
        self.state = PassState()

    def closed(self, queues: QueuePass, state: PassState) -> None:
        """A session closed with these queues: they are the gate's now."""
        self.queues, self.state = queues, state

    def contended(self) -> bool:
        """Whether some queue may refuse a pod now (closed, or holding its deserved share):
        until then plain pods skip the queue check entirely."""
        return self.queues is not None and bool(self.queues.contended)

    def allocatable(self, policy: Policy, queue: str, request: ResourceVector) -> str | None:
        return policy.allocatable(queue, request, self.state)

    def book(self, policy: Policy, queue: str, request: ResourceVector) -> None:
        """A pod let through: counted against its queue until the next pass sees it."""
        policy.task_allocated(queue, request, self.state)

    def tentative(self, pod_key: str) -> bool:
        return self.queues is not None and pod_key in self.queues.tentative

    def let_through(self, pod_key: str) -> None:
        if self.queues is not None:
            self.queues.tentative.add(pod_key)
